import t from 'tap'
import { initMessage } from '../../gateway/tools/simulate'
import { platformLeg, routeTo, startVendor } from '../helpers/gateway'
import { spawnGateway } from '../helpers/process'

// Issue 30 item 5: a client without valid credentials cannot flood the log, on `serve` as it ships (two
// worker processes here): every process's lines are counted, the main process's and each worker's.

const TEXT = {
  busNo: 4321,
  contactId: 9001,
  messageData: { participant: 'patron', text: 'hello' },
  authorizationHeader: 'not-the-text-token-0123'
}

type Line = Record<string, unknown>

function jsonLines(out: string): Line[] {
  return out
    .split('\n')
    .filter(l => l.startsWith('{'))
    .map(l => JSON.parse(l) as Line)
}

t.test('300 refused text posts and 150 refused legs from one address write at most 100 log lines', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await spawnGateway(t, {
    // The shipped cap (20 lines of a kind per instance), over a window longer than this test: the count does
    // not depend on how fast this machine sends (the shipped 10 s window lets one such batch through per 10 s).
    log: { level: 'info', flood: { lines: 20, windowSeconds: 3600 } },
    auth: { failureDelayMs: 0, failureBudget: { failures: 20, windowSeconds: 3600 } },
    routes: { demo: { ...routeTo([vendor], 'mappings/json-events.yaml'), default: true } }
  })
  const from = jsonLines(gw.output()).length
  const statuses = new Map<number, number>()
  for (let i = 0; i < 300; i++) {
    const r = await fetch(gw.url('/text/demo'), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(TEXT)
    })
    await r.arrayBuffer()
    statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1)
  }
  t.same(
    [...statuses],
    [
      [401, 20],
      [429, 280]
    ],
    'wrong credentials, then held off by the failure budget'
  )
  const answers = new Map<string, number>()
  for (let i = 0; i < 150; i++) {
    const init = initMessage({ token: 'not-the-audio-token-0123', contactId: i, busNo: 4321, perspective: 'TX' })
    const leg = platformLeg(t, gw.url('/audio/demo'), init)
    const code = String((await leg.answer).messageType)
    answers.set(code, (answers.get(code) ?? 0) + 1)
    await leg.closed
  }
  t.same([...answers], [['TOO_MANY_FAILURES', 150]], 'every leg refused')
  // Stopped: every process has written all it will, the summaries of the windows still open included.
  const stoppedAt = new Date().toISOString()
  process.kill(gw.pid, 'SIGTERM')
  await gw.exited
  const all = jsonLines(gw.output()).slice(from)
  const during = all.filter(l => String(l.time) < stoppedAt)
  const byEvent: Record<string, number> = {}
  for (const l of during) byEvent[String(l.event)] = (byEvent[String(l.event)] ?? 0) + 1
  t.ok(during.length <= 100, `${during.length} lines while it was flooded: ${JSON.stringify(byEvent)}`)
  t.ok(
    during.every(l => l.worker !== undefined),
    'all of them from the workers that served it'
  )

  // What was left out is said: one log_suppressed line per worker and kind, counting the rest.
  const suppressed = all.filter(l => l.event === 'log_suppressed')
  const keys = suppressed.map(l => `${l.worker}/${l.kind}`)
  t.equal(new Set(keys).size, keys.length, `one summary per worker and kind (${keys.join(', ')})`)
  const left = (kind: string): number =>
    suppressed.filter(l => l.kind === kind).reduce((n, l) => n + Number(l.suppressed), 0)
  const written = (event: string, code: string): number =>
    during.filter(l => l.event === event && l.code === code).length
  t.equal(written('text_refused', 'AUTH_INVALID') + left('AUTH_INVALID'), 20, 'the 401s: written or counted')
  t.equal(
    written('text_refused', 'TOO_MANY_FAILURES') +
      written('leg_failed', 'TOO_MANY_FAILURES') +
      left('TOO_MANY_FAILURES'),
    280 + 150,
    'the 429s and refused legs: written or counted'
  )
  const accessLines = during.filter(l => l.event === 'text_request').length
  t.equal(accessLines, written('text_refused', 'AUTH_INVALID') + written('text_refused', 'TOO_MANY_FAILURES'))
  t.equal(during.filter(l => l.event === 'leg_summary').length, written('leg_failed', 'TOO_MANY_FAILURES'))
})
