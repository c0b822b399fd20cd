import t from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import { parse, stringify } from 'yaml'
import { spawnCli } from '../helpers/cli'
import { AUDIO_TOKEN, platformLeg, routeTo, startVendor, TEXT_TOKEN } from '../helpers/gateway'
import { freePort, spawnGateway, type GatewayProcess } from '../helpers/process'
import { audioInit } from '../helpers/legs'

// A gateway holds its ports alone. uWebSockets.js binds with SO_REUSEPORT by default, and Linux then lets a
// second process of the same user bind the same port and takes half the new connections to it: a second
// gateway started on a taken port served every other call without a word. Now it does not start.
const port = (g: GatewayProcess, which: 'public' | 'admin'): number =>
  Number(new URL(which === 'public' ? g.url('/audio/demo') : g.adminUrl('/admin/upstreams')).port)

/**
 * Start a second gateway with the first's config file, on its own free ports except `taken`; resolves
 * with how it ended: its exit code and output, or 'listening' (then it is stopped) if it started.
 */
async function second(
  first: GatewayProcess,
  taken: Record<string, number>,
  workers: string
): Promise<{ code: number | null; out: string }> {
  const cfg = parse(readFileSync(first.file, 'utf8')) as Record<string, Record<string, unknown>>
  for (const key of ['listen', 'metrics', 'admin', 'fleet']) cfg[key] = { ...cfg[key], port: await freePort() }
  for (const [key, p] of Object.entries(taken)) cfg[key] = { ...cfg[key], port: p }
  const file = `${first.file}.second.yaml`
  writeFileSync(file, stringify(cfg))
  const child = spawnCli(['serve', '--config', file], {
    env: { ...process.env, AUDIO_TOKEN, TEXT_TOKEN, GATEWAY_WORKERS: workers, REDIS_URL: '', GATEWAY_CONFIG: '' }
  })
  let out = ''
  return await new Promise(resolve => {
    const read = (d: Buffer): void => {
      out += String(d)
      // The main process's line, after every worker listens ("gateway listening", with or without workers).
      if (/"msg":"gateway listening/.test(out)) {
        child.kill('SIGKILL')
        resolve({ code: null, out })
      }
    }
    child.stdout!.on('data', read)
    child.stderr!.on('data', read)
    child.once('exit', code => resolve({ code, out }))
  })
}

for (const firstWorkers of ['1', '2']) {
  t.test(`a gateway (${firstWorkers} process(es)) holds its ports: a second one on them does not start`, async t => {
    const vendor = await startVendor(t, { kind: 'json-events' })
    const first = await spawnGateway(
      t,
      { routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } },
      {
        GATEWAY_WORKERS: firstWorkers
      }
    )
    const publicPort = port(first, 'public')
    for (const workers of ['1', '2']) {
      const r = await second(first, { listen: publicPort }, workers)
      t.equal(r.code, 1, `a second gateway of ${workers} process(es) on the public port exits with 1`)
      t.match(
        r.out,
        `cannot listen on 127.0.0.1:${publicPort} (in use by another process`,
        'and says which address is taken'
      )
    }
    const r = await second(first, { admin: port(first, 'admin') }, '1')
    t.equal(r.code, 1, 'a second gateway on the admin port exits with 1')
    t.match(r.out, `cannot listen on 127.0.0.1:${port(first, 'admin')}`)

    // The failed starts left the first as it was: it still answers legs.
    for (let i = 0; i < 2; i++) {
      const leg = platformLeg(t, first.url('/audio/demo'), audioInit(930000 + i))
      t.equal((await leg.answer).command, 'CONNECTED', `leg ${i} answered by the first gateway`)
      leg.ws.close(1000)
      await leg.closed
    }
  })
}
