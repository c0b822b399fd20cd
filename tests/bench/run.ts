/**
 * `npm run bench [-- audio|wsclient|failover|codec|text|capacity|fleet|join|relay|tee|soak|all] [flags]`: prints figures; only soak fails (uncounted frames).
 *   audio    [--legs N (1000)] [--seconds S (20)] [--warmup S (3)] [--baseline-legs N (= legs)]
 *            [--baseline-seconds S (3)] [--profile] [--no-pin]
 *   audio --vs-nginx [--legs 500,1000] [--rounds 2] ...: side by side with nginx (audio-nginx.ts)
 *   audio --memory [--legs 500,1000,2000] [--settle 6] [--finals-ms N] [--floor]: memory per leg, legs added in steps (audio-memory.ts)
 *   text     side by side with nginx when installed (text-nginx.ts)
 *   capacity [--seconds S (8)] [--warmup S (3)] [--baseline-seconds S (3)] [--step N (250)] [--resolution N (100)]
 *            [--max-legs N (5000)] [--coalesce-ms N] [--connections 1,2,...,256] [--only audio|text] [--no-pin]:
 *            the most legs one process carries at real time (p99 added ≤ coalesceMs + 10 ms, 0 lost) and the
 *            most text req/s at p99 ≤ 20 ms, with the machine and date (capacity.ts)
 *   wsclient [--frames N (200000)] [--batch B (100)] [--conns C (100)]
 *   join / tee: gateway CPU per platform frame of a joined pair / a teed leg against plain legs (ab.ts)
 *   relay    a leg relayed to its session on another instance against one on the session's instance (relay.ts)
 *   soak     a fleet under faults (soak/soak.ts); the one bench that fails: exit 1 on uncounted frames.
 *   (none) / all: audio (vs nginx when installed), text, wsclient, codec; no flags.
 * Ends with one line `BENCH_JSON {...}` holding every figure. Child processes (gateway, sink) are
 * killed on every way out, including errors and SIGINT.
 */
import { AUDIO_BOOLEANS, AUDIO_FLAGS, runAudio, type BenchMapping } from './audio'
import { AUDIO_MEMORY_FLAGS, runAudioMemory } from './audio-memory'
import { installExitHandlers, killAllChildren, numberFlag, parseFlags, UsageError } from './lib'
import { runWsClient, WSCLIENT_FLAGS } from './wsclient'
import { CODEC_FLAGS, runCodec } from './codec'
import { FAILOVER_FLAGS, runFailover } from './failover'
import { benchText } from './text'
import { AUDIO_NGINX_BOOLEANS, AUDIO_NGINX_FLAGS, legList, runAudioVsNginx } from './audio-nginx'
import { findNginx } from './nginx'
import { FLEET_FLAGS, runFleet } from './fleet'
import { runTextVsNginx } from './text-nginx'
import { JOIN_BOOLEANS, JOIN_FLAGS, runJoin } from './join'
import { RELAY_FLAGS, runRelay } from './relay'
import { runTee, TEE_FLAGS } from './tee'
import { runSoak, SOAK_BOOLEANS, SOAK_FLAGS } from './soak/soak'
import { CAPACITY_BOOLEANS, CAPACITY_FLAGS, runCapacity } from './capacity'

const USAGE = `usage: npm run bench [-- [audio|wsclient|failover|codec|text|capacity|fleet|join|relay|tee|soak|all] [flags]]
  audio    [--legs N (1000)] [--seconds S (20)] [--warmup S (3)] [--mapping passthrough|deepgram] [--baseline-legs N (= --legs)] [--baseline-seconds S (3)] [--profile] [--no-pin]
  audio --vs-nginx [--legs 500,1000] [--coalesce-ms 0,20,40,100] [--vendor-ping-seconds 1,0] [--floor] [--rounds 2] [--seconds S (10)] [--warmup S (3)] [--baseline-seconds S (3)] [--no-nginx] [--no-pin]
  audio --memory [--legs 500,1000,2000] [--settle S (6)] [--replay-seconds S] [--mapping passthrough|deepgram] [--finals-ms N] [--floor]: RSS, V8 heap and external memory per leg
  wsclient [--frames N (200000)] [--batch B (100)] [--conns C (100)]
  failover [--legs N (500)] [--warmup S (3)] [--after S (5)]
  codec    [--seconds S (60)]
  text     [--connections N (64)] [--seconds S (10)] [--warmup S (3)] [--rounds 2] [--threads 1] [--mapping passthrough|json-events] [--floor] [--base DIR]
           [--no-nginx] [--no-pin] [--profile]: plain HTTP, side by side with nginx when installed
  text --mode tls|both [--connections N] [--seconds S] [--mapping ...]: the gateway alone, over HTTPS too
  capacity [--seconds S (8)] [--warmup S (3)] [--baseline-seconds S (3)] [--step N (250)] [--resolution N (100)] [--max-legs N (5000)]
           [--coalesce-ms N (audio.coalesceMs)] [--connections 1,2,4,8,16,32,64,128,256] [--only audio|text] [--no-pin]:
           one gateway process: the most legs at real time with p99 added ≤ coalesceMs + 10 ms and 0 lost (steps up, then
           bisects), and the most text req/s (wrk, a closed loop per connection count) at p99 ≤ 20 ms; machine and date
  fleet    [--instances 4] [--legs 1000] [--seconds 10] [--warmup 3]: N instances sharing Redis (REDIS_URL)
  join     [--pairs N (200)] [--seconds S (10)] [--warmup S (3)] [--rounds 2]: gateway CPU per platform frame,
           two plain legs vs a joined pair (stereo), A B A B on one gateway
  join --in-process [--pairs N (100)] [--frames N (1000)]: the same on the audio path alone (no sockets, fake clock)
  relay    [--pairs N (100)] [--seconds S (10)] [--warmup S (3)] [--rounds 2]: two instances on Redis (REDIS_URL),
           joined calls with both legs on one instance vs one leg relayed from the other: CPU per relayed frame
  tee      [--legs N (500)] [--seconds S (10)] [--warmup S (3)] [--rounds 2]: gateway CPU per platform frame,
           a plain leg vs a leg with one tee (results: drop), A B A B on one gateway
  soak     [--instances 2] [--vendors 2] [--legs 300] [--minutes 10] [--no-nginx] [--allow-uncounted] [--windows a,b]
           [--freeze-seconds 15]: a fleet on its own Redis behind nginx (or a TCP balancer), reconnecting legs, a fault
           per window (--windows: only those); exit 1 on uncounted frames
  all      (default) audio (vs nginx when installed), text, wsclient, codec; no flags`

type OneRun = [
  string[],
  string[],
  (flags: Map<string, string>) => Record<string, unknown> | Promise<Record<string, unknown>>
]

/** The benches that are one run on their own flags: its valued flags, boolean flags, and the run; `out[name]` is its figures. */
const ONE_RUN = new Map<string, OneRun>(
  Object.entries({
    wsclient: [WSCLIENT_FLAGS, [], runWsClient],
    failover: [FAILOVER_FLAGS, [], runFailover],
    fleet: [FLEET_FLAGS, [], runFleet],
    join: [JOIN_FLAGS, JOIN_BOOLEANS, runJoin],
    relay: [RELAY_FLAGS, [], runRelay],
    tee: [TEE_FLAGS, [], runTee],
    codec: [CODEC_FLAGS, [], runCodec],
    capacity: [CAPACITY_FLAGS, CAPACITY_BOOLEANS, runCapacity]
  } satisfies Record<string, OneRun>)
)

async function main(argv: string[]): Promise<number> {
  installExitHandlers()
  let [cmd, ...rest] = argv
  if (cmd === undefined || cmd.startsWith('--')) {
    rest = cmd === undefined ? [] : argv
    cmd = 'all'
  }
  if (cmd === 'help' || cmd === '-h' || rest.includes('--help')) {
    console.log(USAGE)
    return 0
  }
  const out: Record<string, unknown> = { node: process.version, startedAt: new Date().toISOString() }
  const started = performance.now()
  let code = 0
  switch (cmd) {
    case 'audio': {
      const flags = parseFlags(
        rest,
        [...AUDIO_FLAGS, ...AUDIO_NGINX_FLAGS, ...AUDIO_MEMORY_FLAGS],
        [...AUDIO_BOOLEANS, ...AUDIO_NGINX_BOOLEANS]
      )
      // Without --vs-nginx: the gateway alone, as before (its figures keep their meaning).
      if (flags.has('memory'))
        out.audio = await runAudioMemory(
          legList(flags.get('legs'), '500,1000,2000'),
          numberFlag(flags, 'settle', 6, { min: 1, max: 600 }),
          (flags.get('mapping') ?? 'passthrough') as BenchMapping,
          flags.has('replay-seconds') ? numberFlag(flags, 'replay-seconds', 0, { min: 0, max: 30 }) : null,
          flags.has('floor'),
          numberFlag(flags, 'finals-ms', 0, { min: 0, max: 60_000 })
        )
      else out.audio = flags.has('vs-nginx') ? await runAudioVsNginx(flags) : await runAudio(flags)
      break
    }
    case 'soak': {
      const soak = await runSoak(parseFlags(rest, SOAK_FLAGS, SOAK_BOOLEANS))
      out.soak = soak.json
      code = soak.code
      break
    }
    case 'text':
      // The text bench prints its own report and figures.
      await benchText(rest)
      return 0
    case 'all': {
      if (rest.length > 0) throw new UsageError('all takes no flags: run one bench with its flags instead')
      const none = new Map<string, string>()
      out.audio = findNginx() !== null ? await runAudioVsNginx(none) : await runAudio(none)
      console.log('')
      out.text = await runTextVsNginx(none)
      console.log('')
      out.wsclient = await runWsClient(none)
      console.log('')
      out.codec = runCodec(none)
      break
    }
    default: {
      const bench = ONE_RUN.get(cmd)
      if (bench === undefined) throw new UsageError(`unknown benchmark ${cmd}`)
      const [valued, booleans, run] = bench
      out[cmd] = await run(parseFlags(rest, valued, booleans))
    }
  }
  out.seconds = Math.round((performance.now() - started) / 100) / 10
  console.log(`\nBENCH_JSON ${JSON.stringify(out)}`)
  return code
}

main(process.argv.slice(2)).then(
  code => {
    killAllChildren()
    process.exit(code)
  },
  (err: unknown) => {
    killAllChildren()
    if (err instanceof UsageError) {
      console.error(`bench: ${err.message}\n${USAGE}`)
      process.exit(2)
    }
    console.error('bench: failed:', err)
    process.exit(1)
  }
)
