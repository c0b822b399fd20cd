import t from 'tap'
import { selfSignedPair } from '../helpers/openssl'
import { spawn, spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { type AddressInfo, createServer } from 'node:net'
import { join } from 'node:path'
import { WebSocketServer } from 'ws'
import { refusedPorts } from '../helpers/process'
import { EMITS_WRONG_MAPPING } from '../helpers/cli'

// The BUILT command line (bin/assist-gateway.js → dist/), as an operator runs it: plain node, no TypeScript
// loader. dist/ is brought up to date first with the same script `npm start` uses (quick when it is current).
const ROOT = join(__dirname, '..', '..')
const BIN = join(ROOT, 'bin', 'assist-gateway.js')
/** A literal for a RegExp. */
const esc = (s: string): string => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version

// About forty CLI processes, each loading the whole gateway: on a busy 2-core machine that is minutes,
// not a hang. The runner's per-file limit (120 s) is raised for this file only.
t.setTimeout(300_000)

const build = spawnSync(process.execPath, [join(ROOT, 'bin', 'build-if-stale.js')], { encoding: 'utf8' })
if (build.status !== 0) throw new Error(`cannot build dist/: ${build.stderr}`)

/** The environment of an operator's shell: no test loader, no overrides the configs here do not expect. */
function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  // One process (GATEWAY_WORKERS=1): these are the CLI's conventions; serve --workers has its own test.
  const e: NodeJS.ProcessEnv = {
    ...process.env,
    GATEWAY_WORKERS: '1',
    PORT: '',
    ADMIN_PORT: '',
    REDIS_URL: '',
    GATEWAY_CONFIG: '',
    ...extra
  }
  delete e.NODE_OPTIONS
  return e
}

interface Run {
  code: number | null
  signal: NodeJS.Signals | null
  out: string
  err: string
}

/** Runs the CLI to its end (60 s at most: a command that should exit at once and serves instead fails). */
async function cli(args: string[], extra: Record<string, string> = {}): Promise<Run> {
  const child = spawn(process.execPath, [BIN, ...args], { env: env(extra), stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.on('data', d => {
    out += String(d)
  })
  child.stderr.on('data', d => {
    err += String(d)
  })
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000)
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>(resolve =>
    child.on('close', (c, s) => resolve([c, s]))
  )
  clearTimeout(killer)
  return { code, signal, out, err }
}

/** Runs the CLI once per argument list, two at a time (the machine is shared; each start costs CPU). */
async function cliEach(argLists: string[][]): Promise<Run[]> {
  const runs: Run[] = []
  let next = 0
  const worker = async (): Promise<void> => {
    for (let i = next++; i < argLists.length; i = next++) runs[i] = await cli(argLists[i])
  }
  await Promise.all([worker(), worker()])
  return runs
}

/** A self-signed pair made with the openssl CLI; `passphrase` encrypts the key. */
function pair(dir: string, name: string, passphrase?: string): { cert: string; key: string } {
  return selfSignedPair(dir, `${name}-`, passphrase)
}

/** A config that serves nothing reachable: one route to a closed port, listeners on port 0. */
function gatewayYaml(extra: { tls?: string; mapping?: string } = {}): string {
  return [
    `listen: { host: 127.0.0.1, port: 0${extra.tls !== undefined ? `, tls: ${extra.tls}` : ''} }`,
    'admin: { host: 127.0.0.1, port: 0 }',
    'routes:',
    '  demo:',
    `    mapping: ${extra.mapping ?? 'mappings/json-events.yaml'}`,
    '    upstreams: [{ name: a, audio: "ws://127.0.0.1:1/x", text: "http://127.0.0.1:1" }]'
  ].join('\n')
}

const HELP_CASES: [string[], RegExp][] = [
  [['--help'], /^usage: assist-gateway <command>/],
  [['-h'], /^usage: assist-gateway <command>/],
  [['help'], /^usage: assist-gateway <command>/],
  [['help', 'check'], /^usage: assist-gateway check /],
  [['serve', '--help'], /^usage: assist-gateway serve /],
  [['serve', '-h'], /^usage: assist-gateway serve /],
  [['check', '--help'], /^usage: assist-gateway check /],
  [['check', '-h'], /^usage: assist-gateway check /],
  [['simulate', '--help'], /^usage: assist-gateway simulate audio [\s\S]*usage: assist-gateway simulate text /],
  [['simulate', 'audio', '--help'], /^usage: assist-gateway simulate audio /],
  [['simulate', 'text', '-h'], /^usage: assist-gateway simulate text /],
  [['vendor', '--help'], /^usage: assist-gateway vendor /],
  [['vendor', '-h'], /^usage: assist-gateway vendor /]
]

t.test('--help and -h print the usage on stdout and exit 0, at top level and on every command', async t => {
  const runs = await cliEach(HELP_CASES.map(([args]) => args))
  HELP_CASES.forEach(([args, usage], i) => {
    const r = runs[i]
    t.equal(r.code, 0, `${args.join(' ')}: exit 0 (${r.err})`)
    t.match(r.out, usage, `${args.join(' ')}: its usage on stdout`)
    t.equal(r.err, '', `${args.join(' ')}: nothing on stderr`)
  })
})

t.test('--version prints the package version and exits 0', async t => {
  const r = await cli(['--version'])
  t.equal(r.code, 0)
  t.equal(r.out, `${VERSION}\n`)
  t.equal(r.err, '')
})

t.test('usage errors exit 2 with the message and the usage on stderr', async t => {
  const cases: [string[], RegExp][] = [
    [[], /a command is required[\s\S]*usage: assist-gateway <command>/],
    [['frobnicate'], /unknown command frobnicate[\s\S]*usage: assist-gateway <command>/],
    [['serve', '--bogus'], /Unknown option '--bogus'[\s\S]*usage: assist-gateway serve /],
    [['check', '--bogus'], /Unknown option '--bogus'[\s\S]*usage: assist-gateway check /],
    [['simulate', 'audio', '--bogus'], /Unknown option '--bogus'[\s\S]*usage: assist-gateway simulate audio /],
    [['simulate', 'text', '--bogus'], /Unknown option '--bogus'[\s\S]*usage: assist-gateway simulate text /],
    [['vendor', '--bogus'], /Unknown option '--bogus'[\s\S]*usage: assist-gateway vendor /],
    [['simulate'], /simulate: "audio" or "text"/],
    [
      ['simulate', 'audio', '--url', 'ws://127.0.0.1:1/a', '--legs', '2.5'],
      /--legs must be a whole number >= 1, not "2.5"/
    ],
    [['simulate', 'audio', '--url', 'ws://127.0.0.1:1/a', '--legs', 'abc'], /--legs must be a whole number/],
    [['simulate', 'audio', '--url', 'ws://127.0.0.1:1/a', '--contact', '0'], /--contact must be a whole number 1-/],
    [['simulate', 'audio', '--url', 'http://127.0.0.1:1/a'], /--url must be ws:\/\/ or wss:\/\//],
    [['simulate', 'audio', '--url', 'ws://127.0.0.1:1/a', '--file', '/nonexistent.ulaw'], /--file \/nonexistent.ulaw/],
    [
      ['simulate', 'text', '--url', 'http://127.0.0.1:1/t', '--text', 'x', '--contact-id', '1.5'],
      /--contact-id must be a whole number/
    ],
    [['simulate', 'text', '--url', 'not a url', '--text', 'x'], /--url not a url is not a URL/],
    [['vendor', '--kind', 'passthrough', '--port', 'abc'], /--port must be a whole number 0-65535, not "abc"/],
    [['vendor', '--kind', 'passthrough', '--port', '70000'], /--port must be a whole number 0-65535/],
    [
      ['vendor', '--kind', 'passthrough', '--port', '0', '--result-every-frames', '2.5'],
      /--result-every-frames must be/
    ]
  ]
  const runs = await cliEach(cases.map(([args]) => args))
  cases.forEach(([args, message], i) => {
    const r = runs[i]
    t.equal(r.code, 2, `${args.join(' ')}: exit 2`)
    t.match(r.err, message, `${args.join(' ')}: says why`)
    t.notMatch(r.err, /\n\s+at /, `${args.join(' ')}: no stack trace`)
    t.equal(r.out, '', `${args.join(' ')}: nothing on stdout`)
  })
})

t.test('check and serve exit 2 on a broken config, naming file, line, column and pointer', async t => {
  const dir = t.testdir({ 'gateway.yaml': 'listen: { port: 70000 }\nroutes: {}\n' })
  const file = join(dir, 'gateway.yaml')
  for (const command of ['check', 'serve']) {
    const r = await cli([command, '--config', file])
    t.equal(r.code, 2, `${command}: exit 2`)
    t.match(r.err, `${file}:1:11: /listen/port: `, command)
    t.match(r.err, `${file}:2:1: /routes: `, command)
  }
})

t.test('check and serve both dry-run the mappings: a mapping check rejects is refused by serve with 2', async t => {
  const dir = t.testdir({
    'emits.yaml': EMITS_WRONG_MAPPING,
    'gateway.yaml': gatewayYaml({ mapping: 'emits.yaml' })
  })
  for (const command of ['check', 'serve']) {
    const r = await cli([command, '--config', join(dir, 'gateway.yaml')])
    t.equal(r.code, 2, `${command}: exit 2 (${r.err})`)
    t.match(
      r.err,
      `${join(dir, 'emits.yaml')}:6:7: /audio/results/0/emit: must produce a PlatformWebSocketMessage`,
      command
    )
  }
})

t.test('check and serve load the TLS pair: swapped, mismatched or undecryptable → 2 naming both files', async t => {
  const dir = t.testdir({
    'swapped.yaml': gatewayYaml({ tls: '{ cert: a-key.pem, key: a-cert.pem }' }),
    'mismatched.yaml': gatewayYaml({ tls: '{ cert: a-cert.pem, key: b-key.pem }' }),
    'encrypted.yaml': gatewayYaml({ tls: '{ cert: e-cert.pem, key: e-key.pem, passphrase: "${TLS_PASS}" }' }),
    'good.yaml': gatewayYaml({ tls: '{ cert: a-cert.pem, key: a-key.pem }' })
  })
  const a = pair(dir, 'a')
  const b = pair(dir, 'b')
  const e = pair(dir, 'e', 'right-pass-1')
  const cases: [string, string, string, RegExp][] = [
    ['swapped.yaml', a.key, a.cert, /are cert and key swapped\?/],
    ['mismatched.yaml', a.cert, b.key, /the key does not belong to the certificate/],
    ['encrypted.yaml', e.cert, e.key, /passphrase is missing or wrong/]
  ]
  for (const [name, cert, key, why] of cases) {
    const file = join(dir, name)
    for (const command of ['check', 'serve']) {
      const r = await cli([command, '--config', file], { TLS_PASS: 'wrong-pass-1' })
      t.equal(r.code, 2, `${command} ${name}: exit 2`)
      t.match(
        r.err,
        new RegExp(
          `${esc(file)}:\\d+:\\d+: /listen/tls: certificate ${esc(cert)} and key ${esc(key)} do not load as a pair`
        ),
        `${command} ${name}`
      )
      t.match(r.err, why, `${command} ${name}: says why`)
      t.notMatch(r.err, 'wrong-pass-1', 'the passphrase is never printed')
    }
  }
  const good = await cli(['check', '--config', join(dir, 'good.yaml')])
  t.equal(good.code, 0, good.err)
  t.match(good.out, /^ok: /m)
  const decrypted = await cli(['check', '--config', join(dir, 'encrypted.yaml')], { TLS_PASS: 'right-pass-1' })
  t.equal(decrypted.code, 0, decrypted.err)
})

t.test('serve exits 1 when it cannot serve a valid config (its port is taken)', async t => {
  const taken = createServer()
  await new Promise<void>(resolve => taken.listen(0, '127.0.0.1', () => resolve()))
  t.teardown(() => new Promise(resolve => taken.close(resolve)))
  const port = (taken.address() as AddressInfo).port
  const dir = t.testdir({ 'gateway.yaml': gatewayYaml().replace('port: 0 }', `port: ${port} }`) })
  const r = await cli(['serve', '--config', join(dir, 'gateway.yaml')])
  t.equal(r.code, 1, 'a runtime failure, not a config error')
  t.match(r.err, /^assist-gateway: /m)
})

/** A stand-in audio hook: answers CONNECTED, then /ok runs to the end, /cut and /ends-early close, /chatty talks. */
async function audioHook(t: { teardown: (fn: () => unknown) => void }): Promise<string> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 })
  await new Promise(resolve => wss.once('listening', resolve))
  wss.on('connection', (ws, req) => {
    let chatter: NodeJS.Timeout | undefined
    ws.on('message', (_data, isBinary) => {
      if (!isBinary) {
        ws.send(JSON.stringify({ command: 'CONNECTED', messageType: 'COMMAND', message: 'BEGIN AUDIO STREAM' }))
        if (req.url === '/chatty')
          chatter = setInterval(() => ws.send(JSON.stringify({ command: 'TRANSCRIPT', text: 'x'.repeat(200) })), 5)
      } else if (req.url === '/cut') ws.close(1011, 'vendor gone')
      else if (req.url === '/ends-early') ws.close(1000, 'bye')
    })
    ws.on('close', () => clearInterval(chatter))
  })
  t.teardown(async () => {
    for (const c of wss.clients) c.terminate()
    await new Promise(resolve => wss.close(resolve))
  })
  return `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`
}

t.test('simulate audio exits 0 only when every leg connected and ran to its end', async t => {
  const base = await audioHook(t)
  const sim = (path: string, ...more: string[]): Promise<Run> =>
    cli(['simulate', 'audio', '--url', `${base}${path}`, '--seconds', '0.2', ...more])
  const [ok, cut, early, refused] = await Promise.all([
    sim('/ok', '--legs', '2'),
    sim('/cut', '--legs', '2'),
    sim('/ends-early'),
    cli(['simulate', 'audio', '--url', `ws://127.0.0.1:${(await refusedPorts(1))[0]}/audio/demo`])
  ])
  t.equal(ok.code, 0, ok.err)
  t.match(ok.out, /^leg 1 closed 1000 done$/m)
  t.equal(cut.code, 1, 'legs the server cut: runtime failure')
  t.match(cut.out, /^leg 0 closed 1011 vendor gone$/m)
  t.match(cut.err, /2 of 2 leg\(s\) failed: leg 0: cut \(closed 1011 after \d+ frames\)/)
  t.equal(early.code, 1, 'a normal close before the clip ended is still a cut leg')
  t.equal(refused.code, 1, 'a closed port: runtime failure')
  t.match(refused.out, /^leg 0 error connect ECONNREFUSED/m)
  t.match(refused.err, /1 of 1 leg\(s\) failed: leg 0: connect ECONNREFUSED/)
  t.notMatch(refused.err, /\n\s+at /, 'no stack trace')
})

t.test('simulate text against a closed port exits 1', async t => {
  const r = await cli([
    'simulate',
    'text',
    '--url',
    `http://127.0.0.1:${(await refusedPorts(1))[0]}/text/demo`,
    '--text',
    'hi'
  ])
  t.equal(r.code, 1)
  t.match(r.out, /^error connect ECONNREFUSED/m)
})

t.test('simulate piped into a reader that closes early ends quietly: no EPIPE crash, no stack trace', async t => {
  const base = await audioHook(t)
  const child = spawn(process.execPath, [BIN, 'simulate', 'audio', '--url', `${base}/chatty`, '--seconds', '30'], {
    env: env(),
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let err = ''
  child.stderr.on('data', d => {
    err += String(d)
  })
  // Like `| head -1`: read the first chunk, then close the read end of the pipe.
  child.stdout.once('data', () => child.stdout.destroy())
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000)
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>(resolve =>
    child.on('close', (c, s) => resolve([c, s]))
  )
  clearTimeout(killer)
  t.equal(signal, null, 'it ended by itself (not killed)')
  t.equal(code, 1, 'the run did not complete: runtime failure')
  t.equal(err, '', 'nothing on stderr: no EPIPE error, no stack trace')
})
