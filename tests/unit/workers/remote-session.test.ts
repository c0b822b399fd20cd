import t from 'tap'
import { Writable } from 'node:stream'
import type { AudioRelay } from '../../../gateway/audio/relay'
import type { Session, SessionOwner, SessionState } from '../../../gateway/audio/session-contract'
import type { GatewayError } from '../../../gateway/errors'
import { createLogger } from '../../../gateway/telemetry/log'
import { LegCounters } from '../../../gateway/telemetry/metrics'
import type { ToMain } from '../../../gateway/workers/protocol'
import { WorkerRegistry } from '../../../gateway/workers/remote-session'

// Two workers' registries joined by a stand-in for the main process's routing (the same messages, in
// order, delivered synchronously); a recording session on worker 0 and recording legs on worker 1.

const log = createLogger({ level: 'silent', secrets: [], destination: new Writable({ write: (_c, _e, cb) => cb() }) })

class RecordingSession implements Session {
  readonly id = 's1'
  state: SessionState = 'READY'
  owner: SessionOwner | null = null
  readonly counters = new LegCounters('demo')
  readonly written: number[] = []
  readonly calls: string[] = []
  readonly relay = { write: (d: ArrayBuffer) => this.written.push(new Uint8Array(d)[0]) } as unknown as AudioRelay
  constructor(readonly key: string) {}
  start(): void {}
  park(): void {
    this.calls.push('park')
  }
  attach(owner: SessionOwner): void {
    this.owner?.superseded()
    this.owner = owner
    owner.sessionReady({ vendor: 'x' })
  }
  close(graceful: boolean): void {
    this.calls.push(`close ${graceful}`)
    this.state = 'CLOSED'
  }
  handOff(): void {
    this.calls.push('handOff')
  }
  pauseVendor(): void {
    this.calls.push('pause')
  }
  resumeVendor(): void {
    this.calls.push('resume')
  }
}

class RecordingLeg implements SessionOwner {
  readonly events: string[] = []
  sessionReady(p: Record<string, unknown>): void {
    this.events.push(`ready ${String(p.vendor)}`)
  }
  sessionFailed(e: GatewayError): void {
    this.events.push(`failed ${e.code}`)
  }
  deliver(text: string): void {
    this.events.push(`deliver ${text}`)
  }
  superseded(): void {
    this.events.push('superseded')
  }
}

function pair(): { a: WorkerRegistry; b: WorkerRegistry } {
  const regs: WorkerRegistry[] = []
  const route = (from: number) => (m: ToMain) => {
    if (m.t === 'dir-add') regs[1 - from].directoryAdd(m.key, from, m.caller)
    else if (m.t === 'dir-del') regs[1 - from].directoryDel(m.key, from)
    else if (m.t === 'relay') regs[m.to].linked(from, m.link, m.m)
  }
  regs.push(new WorkerRegistry(0, route(0), log), new WorkerRegistry(1, route(1), log))
  return { a: regs[0], b: regs[1] }
}

const frame = (n: number): ArrayBuffer => new Uint8Array([n, 0, 0]).buffer

t.test('a leg on the other worker claims the session: frames go there in order, results come back', async t => {
  const { a, b } = pair()
  const s = new RecordingSession('demo:1:2:TX')
  a.add(s, 'caller-1')
  const leg = new RecordingLeg()
  const remote = b.claim(s.key, leg, {}, log, 'caller-1')
  t.not(remote, null)
  t.not(remote, 'refused')
  const r = remote as Session
  t.same(leg.events, ['ready x'], 'the session on worker 0 told the leg on worker 1 it is ready')
  for (let i = 1; i <= 5; i++) r.relay.write(frame(i))
  t.same(s.written, [1, 2, 3, 4, 5], 'every frame, in order')
  s.owner!.deliver('{"command":"MESSAGE"}')
  t.same(leg.events.at(-1), 'deliver {"command":"MESSAGE"}')
  r.pauseVendor()
  r.resumeVendor()
  r.park()
  t.same(s.calls, ['pause', 'resume', 'park'], 'the leg parks the session where it lives')
  r.relay.write(frame(9))
  t.same(s.written, [1, 2, 3, 4, 5], 'nothing after the park')
})

t.test('only the caller that opened the session claims it; an unknown leg opens a new one', async t => {
  const { a, b } = pair()
  const s = new RecordingSession('demo:1:3:TX')
  a.add(s, 'caller-1')
  t.equal(b.claim(s.key, new RecordingLeg(), {}, log, 'caller-2'), 'refused')
  t.equal(s.owner, null, 'the session is untouched')
  t.equal(b.claim('demo:9:9:TX', new RecordingLeg(), {}, log, 'caller-1'), null)
  a.closed(s)
  t.equal(b.claim(s.key, new RecordingLeg(), {}, log, 'caller-1'), null, 'a closed session is withdrawn')
})

t.test('a leg coming back on the session worker supersedes the remote one', async t => {
  const { a, b } = pair()
  const s = new RecordingSession('demo:1:4:TX')
  a.add(s, 'c')
  const far = new RecordingLeg()
  b.claim(s.key, far, {}, log, 'c')
  const near = new RecordingLeg()
  t.equal(a.claim(s.key, near, {}, log, 'c'), s)
  t.same(far.events, ['ready x', 'superseded'])
  t.same(near.events, ['ready x'])
})

t.test('a worker that ends: its sessions are gone for the other, its legs park the sessions they held', async t => {
  const { a, b } = pair()
  const s = new RecordingSession('demo:1:5:TX')
  a.add(s, 'c')
  const leg = new RecordingLeg()
  b.claim(s.key, leg, {}, log, 'c')
  a.workerGone(1)
  t.same(s.calls, ['park'], 'worker 1 ended: the session waits for its leg to come back')

  const s2 = new RecordingSession('demo:1:6:TX')
  a.add(s2, 'c')
  const leg2 = new RecordingLeg()
  b.claim(s2.key, leg2, {}, log, 'c')
  b.workerGone(0)
  t.same(leg2.events, ['ready x', 'failed SHUTTING_DOWN'], 'worker 0 ended: the leg is told to reconnect')
  t.equal(b.claim(s2.key, new RecordingLeg(), {}, log, 'c'), null, 'and its sessions are forgotten')
})
