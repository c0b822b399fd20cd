import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse } from 'yaml'
import { initMessage } from '../../gateway/tools/simulate'
import { AUDIO_TOKEN, TEXT_TOKEN, platformLeg, routeTo, startVendor, until } from '../helpers/gateway'
import { type GatewayProcess, spawnGateway } from '../helpers/process'
import { utterance } from '../helpers/tls'

// Issue 30: what the operator's Prometheus sees of `serve` as it ships (here 2 workers): every series an
// alert takes increase() of exists at 0 before any traffic, and a worker killed with SIGKILL takes no
// instance counter down and no series away.

const root = join(__dirname, '..', '..')

/** Every sample of an exposition text by series text (`name{labels}`), and the type of each family. */
function parseExposition(text: string): { samples: Map<string, number>; types: Map<string, string> } {
  const samples = new Map<string, number>()
  const types = new Map<string, string>()
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line)
    if (type !== null) types.set(type[1], type[2])
    const m = /^([a-zA-Z_:][\w:]*(?:\{[^}]*\})?) (\S+)$/.exec(line)
    if (m !== null) samples.set(m[1], Number(m[2]))
  }
  return { samples, types }
}

/** The labels of a series text. */
function labelsOf(series: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const m of series.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) out[m[1]] = m[2]
  return out
}

/** A PromQL selector's matchers (`name{a="x", b!~"y|z"}`), as a predicate on a series text. */
function selector(text: string): { name: string; matches: (series: string) => boolean } {
  const m = /^(\w+)(?:\{(.*)\})?$/.exec(text.trim())
  if (m === null) throw new Error(`not a selector: ${text}`)
  const matchers = [...(m[2] ?? '').matchAll(/(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"/g)].map(x => ({
    label: x[1],
    op: x[2],
    value: x[3]
  }))
  return {
    name: m[1],
    matches: series => {
      if (!series.startsWith(`${m[1]}{`) && series !== m[1]) return false
      const labels = labelsOf(series)
      return matchers.every(({ label, op, value }) => {
        const v = labels[label] ?? ''
        const re = new RegExp(`^(?:${value})$`)
        return op === '=' ? v === value : op === '!=' ? v !== value : op === '=~' ? re.test(v) : !re.test(v)
      })
    }
  }
}

/** The selectors the alert rules take increase() of, read from ops/alerts.yml. */
function increaseSelectors(): string[] {
  const rules = (
    parse(readFileSync(join(root, 'ops', 'alerts.yml'), 'utf8')) as { groups: { rules: { expr: string }[] }[] }
  ).groups.flatMap(g => g.rules)
  return rules.flatMap(r => [...r.expr.matchAll(/increase\(\s*([^[]+?)\s*\[/g)].map(m => m[1]))
}

const scrape = async (g: GatewayProcess): Promise<string> => await (await fetch(g.adminUrl('/metrics'))).text()

interface Workers {
  workers: { worker: number; up: boolean; pid: number; restarts: number }[]
}
const workers = async (g: GatewayProcess): Promise<Workers['workers']> =>
  ((await (await fetch(g.adminUrl('/admin/workers'))).json()) as Workers).workers

t.test('before any traffic, every series an alert takes increase() of is at 0 (serve, 2 workers)', async t => {
  const v = await startVendor(t, { kind: 'json-events' })
  const gw = await spawnGateway(t, {
    health: { active: { kind: 'none' } },
    routes: { demo: routeTo([v], 'mappings/json-events.yaml') }
  })
  t.ok(await until(async () => (await workers(gw)).length === 2 && (await workers(gw)).every(w => w.up)), '2 workers')
  const { samples } = parseExposition(await scrape(gw))
  const selectors = increaseSelectors()
  // 17 when issue 30 counted them; issue 33's quota alert (AssistGatewayQuotaRefusals) is the 18th.
  t.equal(selectors.length, 18, 'the 18 increase() selectors of ops/alerts.yml')
  for (const text of selectors) {
    const s = selector(text)
    const found = [...samples].filter(([series]) => s.matches(series))
    t.ok(found.length > 0, `${text}: has a series`)
    t.ok(
      found.every(([, value]) => value === 0),
      `${text}: at 0`
    )
  }
})

t.test('kill -9 of a worker: no instance counter goes down, no series goes missing', async t => {
  const v = await startVendor(t, { kind: 'json-events' })
  const gw = await spawnGateway(t, {
    health: { active: { kind: 'none' } },
    routes: { demo: routeTo([v], 'mappings/json-events.yaml') }
  })
  t.ok(await until(async () => (await workers(gw)).every(w => w.up)), 'both workers are up')
  // Text requests of each kind: answered (200), refused credentials (401), unknown route (404).
  const post = async (path: string, body: Record<string, unknown>): Promise<number> =>
    (
      await fetch(gw.url(path), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body)
      })
    ).status
  for (let i = 0; i < 12; i++) {
    t.equal(await post('/text/demo', utterance({ authorizationHeader: TEXT_TOKEN })), 200)
    t.equal(await post('/text/demo', utterance({ authorizationHeader: 'wrong' })), 401)
    t.equal(await post('/text/nowhere', utterance({ authorizationHeader: TEXT_TOKEN })), 404)
  }
  // 20 legs: 16 that stream and end, 4 with a wrong token.
  for (let i = 0; i < 20; i++) {
    const token = i % 5 === 4 ? 'wrong-token' : AUDIO_TOKEN
    const leg = platformLeg(
      t,
      gw.url('/audio/demo'),
      initMessage({ token, contactId: 3000 + i, busNo: 4594, perspective: 'TX' })
    )
    const answer = await leg.answer
    if (answer.command === 'CONNECTED') {
      leg.send(Buffer.alloc(160, 1))
      leg.ws.close(1000)
    }
    await leg.closed
  }
  // Both workers served: the kernel spreads connections over them.
  const before = await scrape(gw)
  const was = parseExposition(before)
  const legs = [...was.samples].filter(([k]) => k.startsWith('assist_gateway_audio_sessions_total{'))
  t.equal(
    legs.reduce((n, [, x]) => n + x, 0),
    20,
    'the 20 legs are counted'
  )
  const list = await workers(gw)
  const victim = list[0]
  process.kill(victim.pid, 'SIGKILL')
  t.ok(
    await until(async () => {
      const now = await workers(gw)
      return now.every(w => w.up) && now[0].pid !== victim.pid
    }),
    'the killed worker is restarted'
  )
  const now = parseExposition(await scrape(gw))
  // The instance's series, every one; a process's own (process_*, nodejs_*) are the new process's, whose
  // GC kinds and active handles are its own: each worker has its series again.
  const missing = [...was.samples.keys()].filter(k => k.startsWith('assist_gateway_') && !now.samples.has(k))
  t.same(missing, [], 'no series of the instance is missing')
  const counterFamily = (series: string): boolean => {
    const name = series.replace(/\{.*$/, '')
    const family = name.replace(/_(bucket|sum|count)$/, '')
    const type = was.types.get(name) ?? was.types.get(family)
    return name.startsWith('assist_gateway_') && (type === 'counter' || type === 'histogram')
  }
  const lower = [...was.samples]
    .filter(([k]) => counterFamily(k))
    .filter(([k, x]) => (now.samples.get(k) ?? -1) < x)
    .map(([k, x]) => `${k}: ${x} → ${now.samples.get(k)}`)
  t.same(lower, [], 'no instance counter is lower')
  t.equal(now.samples.get('assist_gateway_worker_restarts_total{worker="0"}'), 1, 'the restart is counted')
  for (const w of ['main', '0', '1'])
    t.ok(now.samples.has(`process_start_time_seconds{worker="${w}"}`), `process series of worker="${w}"`)
  t.ok(
    now.samples.get('process_start_time_seconds{worker="0"}')! >
      was.samples.get('process_start_time_seconds{worker="0"}')!,
    'worker 0’s are the restarted process’s'
  )
})
