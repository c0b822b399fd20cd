import t from 'tap'
import { WebSocket } from 'ws'
import { startRealVendor } from '../../gateway/tools/real-vendors'
import { SEQ_FRAME_BYTES } from '../../gateway/tools/vendors/sequence'
import { eventually } from '../helpers/redis-servers'

// The `sequencedFrames` and pause options of the real-vendor emulators (bench soak's loss accounting), on
// the Deepgram emulator: Deepgram's live streaming takes raw binary audio messages of any length
// (developers.deepgram.com, Live Audio API reference, "Sending audio"), so numbered µ-law frames are valid audio.

function frame(stream: number, seq: number): Buffer {
  const b = Buffer.alloc(SEQ_FRAME_BYTES, 0xff)
  b.writeDoubleLE(Date.now(), 0)
  b.writeUInt32LE(seq, 8)
  b.writeUInt32LE(stream, 12)
  return b
}

async function open(url: string): Promise<WebSocket> {
  const ws = new WebSocket(`${url}?encoding=mulaw&sample_rate=8000&channels=1`, { perMessageDeflate: false })
  await new Promise((resolve, reject) => {
    ws.once('open', resolve)
    ws.once('error', reject)
  })
  return ws
}

t.test('sequencedFrames: each session reports which numbered frames arrived, in runs', async t => {
  const v = await startRealVendor({ kind: 'deepgram', sequencedFrames: true, resultEveryMs: 0 })
  t.teardown(() => v.close())
  const ws = await open(v.url)
  // Frames 0-4 in two writes, 6 (5 missing), then 5 late.
  ws.send(Buffer.concat([frame(42, 0), frame(42, 1), frame(42, 2)]))
  ws.send(Buffer.concat([frame(42, 3), frame(42, 4)]))
  ws.send(frame(42, 6))
  ws.send(frame(42, 5))
  t.ok(await eventually(() => v.sessions()[0]?.frames === 4), 'four messages arrived')
  const seq = v.sessions()[0].sequence
  t.equal(seq?.stream, 42)
  t.equal(seq?.frames, 7)
  t.same(
    seq?.runs.map(r => [r[0], r[1]]),
    [
      [0, 4],
      [6, 6],
      [5, 5]
    ]
  )
  ws.close()
  const plain = await startRealVendor({ kind: 'deepgram', resultEveryMs: 0 })
  t.teardown(() => plain.close())
  const ws2 = await open(plain.url)
  ws2.send(frame(1, 0))
  t.ok(await eventually(() => plain.sessions()[0]?.frames === 1))
  t.equal(plain.sessions()[0].sequence, undefined, 'without the option no sequence is reported')
  ws2.close()
})

t.test('pauseAll stops reading every session socket, new ones too; resumeAll reads what waited', async t => {
  const v = await startRealVendor({ kind: 'deepgram', sequencedFrames: true, resultEveryMs: 0 })
  t.teardown(() => v.close())
  const a = await open(v.url)
  a.send(frame(1, 0))
  t.ok(await eventually(() => v.sessions()[0]?.frames === 1))
  t.equal(v.openSessions(), 1)
  v.pauseAll()
  const b = await open(v.url)
  t.equal(v.openSessions(), 2, 'upgrades are still accepted while paused')
  a.send(frame(1, 1))
  b.send(frame(2, 0))
  // Nothing to wait for but time: what is unread must stay unread.
  await new Promise(resolve => setTimeout(resolve, 300))
  t.same(
    v.sessions().map(s => s.frames),
    [1, 0],
    'nothing read while paused'
  )
  v.resumeAll()
  t.ok(
    await eventually(() => v.sessions()[0].frames === 2 && v.sessions()[1].frames === 1),
    'the waiting frames are read after resumeAll'
  )
  a.close()
  b.close()
})
