import t, { type Test } from 'tap'
import { randomUUID } from 'node:crypto'
import { WebSocket } from 'ws'
import { type RealVendorEmulator, type RealVendorOptions, startRealVendor } from '../../gateway/tools/real-vendors'

// The AudioHook emulator's scripted server moves catch a client that ignores them: audio while paused,
// a startPaused session not answered with paused, a resumed at the wrong position, audio after a disconnect.

type Json = Record<string, any>
const ORG = 'd7934305-0972-4844-938e-9060eef73d05'

/** A bare AudioHook client that does exactly what the test says, right or wrong. */
class Client {
  readonly msgs: Json[] = []
  private seq = 0
  private serverseq = 0
  samples = 0
  constructor(
    readonly ws: WebSocket,
    readonly id: string
  ) {
    ws.on('message', (d, bin) => {
      if (bin) return
      const m = JSON.parse(d.toString()) as Json
      this.serverseq = m.seq
      this.msgs.push(m)
    })
  }
  send(type: string, parameters: Json, position = this.samples / 8000): void {
    const msg = {
      version: '2',
      id: this.id,
      type,
      seq: ++this.seq,
      serverseq: this.serverseq,
      position: `PT${position}S`
    }
    this.ws.send(JSON.stringify({ ...msg, parameters }))
  }
  audio(ms = 100): void {
    this.ws.send(Buffer.alloc(ms * 8, 0xff))
    this.samples += ms * 8
  }
  async waitFor(type: string): Promise<Json> {
    for (let i = 0; i < 500; i++) {
      const m = this.msgs.find(x => x.type === type)
      if (m !== undefined) return m
      await new Promise(r => setTimeout(r, 10))
    }
    throw new Error(`no ${type}; have ${JSON.stringify(this.msgs.map(m => m.type))}`)
  }
}

async function session(t: Test, audiohook: RealVendorOptions['audiohook']): Promise<[RealVendorEmulator, Client]> {
  const emu = await startRealVendor({ kind: 'audiohook', resultEveryMs: 0, audiohook })
  t.teardown(() => emu.close())
  const id = randomUUID()
  const ws = new WebSocket(emu.url, {
    headers: { 'Audiohook-Organization-Id': ORG, 'Audiohook-Session-Id': id, 'Audiohook-Correlation-Id': randomUUID() }
  })
  const c = new Client(ws, id)
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve())
    ws.once('error', reject)
  })
  t.teardown(() => ws.terminate())
  const participant = { id: randomUUID(), ani: '', aniName: '', dnis: '' }
  c.send('open', {
    organizationId: ORG,
    conversationId: randomUUID(),
    participant,
    media: [{ type: 'audio', format: 'PCMU', channels: ['external'], rate: 8000 }]
  })
  await c.waitFor('opened')
  return [emu, c]
}

t.test(
  'audio after the client said paused (server pause) is a protocol error; before it, counted in flight',
  async t => {
    const [emu, c] = await session(t, { steps: [{ afterMs: 50, type: 'pause' }] })
    await c.waitFor('pause')
    c.audio()
    c.send('paused', {})
    c.audio()
    await new Promise(r => setTimeout(r, 100))
    const s = emu.sessions()[0] as Json
    t.equal(s.audiohook.framesAfterPause, 1, 'the frame in flight before paused is counted')
    t.match(s.errors, [/Received audio in state PAUSED/])
  }
)

// Reference server (serversessionimpl.ts): opened {startPaused} leaves the session ACTIVE; the client's
// `paused` makes it PAUSED (onPausedMessage), and `resumed` is taken only in PAUSED (onResumedMessage).
// The reference client sends `paused` at once and no audio while paused (clientsessionimpl.ts,
// client/src/mediasource-tone.ts): the emulator holds a client to that.
t.test('startPaused: audio before the client says paused is an error, as is a resumed without it', async t => {
  const [emu, c] = await session(t, { startPaused: true })
  t.match(c.msgs[0], { type: 'opened', parameters: { startPaused: true } })
  c.audio()
  c.send('resumed', { start: 'PT0S', discarded: 'PT0S' }, 0)
  await c.waitFor('disconnect')
  await new Promise(r => setTimeout(r, 100))
  const errors = (emu.sessions()[0] as Json).errors as string[]
  t.match(errors[0], /Received audio after opened \{startPaused: true\}, before the client's paused/)
  t.ok(
    errors.some(e => /resumed in state ACTIVE/.test(e)),
    'a resumed before paused is recorded'
  )
})

t.test('startPaused: paused, then audio is an error until resumed, whose start must be the position', async t => {
  const [emu, c] = await session(t, { startPaused: true, steps: [{ afterMs: 100, type: 'resume' }] })
  c.send('paused', {})
  await c.waitFor('resume')
  c.send('resumed', { start: 'PT0S', discarded: 'PT0.1S' })
  c.samples += 800 // the discarded stretch is on the timeline
  c.audio()
  c.send('ping', {})
  await c.waitFor('pong')
  t.same((emu.sessions()[0] as Json).errors, [], 'the client that says paused and resumed is clean')
  const [emu2, d] = await session(t, { startPaused: true, steps: [{ afterMs: 50, type: 'resume' }] })
  d.send('paused', {})
  d.audio()
  await d.waitFor('resume')
  d.send('resumed', { start: 'PT5S', discarded: 'PT0S' }, 0)
  await new Promise(r => setTimeout(r, 100))
  t.match((emu2.sessions()[0] as Json).errors, [/Received audio in state PAUSED/])
  t.ok(
    (emu2.sessions()[0] as Json).errors.some((e: string) => /resumed: start PT5S is not the stream position/.test(e)),
    'the resumed start is checked'
  )
})

t.test('disconnect: audio until close is counted; the close transaction completes', async t => {
  const [emu, c] = await session(t, {
    steps: [{ afterMs: 50, type: 'disconnect', parameters: { reason: 'error', info: 'x' } }]
  })
  t.match(await c.waitFor('disconnect'), { parameters: { reason: 'error', info: 'x' } })
  c.audio()
  c.audio()
  c.send('close', { reason: 'disconnect' })
  await c.waitFor('closed')
  const s = emu.sessions()[0] as Json
  t.equal(s.audiohook.framesAfterDisconnect, 2)
  t.same(s.audiohook.serverSent, ['opened', 'disconnect', 'closed'])
  t.same(s.errors, [])
})
