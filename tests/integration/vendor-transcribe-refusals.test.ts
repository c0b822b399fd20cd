import t, { type Test } from 'tap'
import { audioInit } from '../helpers/legs'
import { startRealVendor, type RealVendorEmulator, type RealVendorOptions } from '../../gateway/tools/real-vendors'
import { platformLeg, startGateway, until, type TestGateway } from '../helpers/gateway'
import { stream } from '../helpers/audio'
import { withMappingCopy, legUntilClosed } from '../helpers/vendors'

// What the strict Amazon Transcribe emulator refuses, and the gateway's answer to each. Follows the Amazon
// Transcribe developer guide, "Setting up a WebSocket stream" → "Handling WebSocket streaming errors" (an
// exception message :message-type exception / :exception-type, then a close frame; BadRequestException,
// LimitExceededException, InternalFailureException, UnrecognizedClientException).

type T = Test
type Json = Record<string, any>

const KEYS = { accessKeyId: 'AKIAEMULATOR00000002', secretAccessKey: 'an0ther-tr4nscr1be-secret' }
const init = (contactId: number): Json => audioInit(contactId)

async function emulator(t: T, opts: Omit<RealVendorOptions, 'kind'> = {}): Promise<RealVendorEmulator> {
  const emu = await startRealVendor({ kind: 'amazon-transcribe', aws: KEYS, resultEveryMs: 1000, ...opts })
  t.teardown(async () => await emu.close())
  return emu
}

async function gateway(t: T, emus: RealVendorEmulator[], mapping: string, audio: Json = {}): Promise<TestGateway> {
  return await startGateway(
    t,
    {
      audio: { failoverTimeoutSeconds: 1, ...audio },
      routes: {
        x: {
          mapping,
          auth: { audio: ['${AUDIO_TOKEN}'] },
          params: { region: 'eu-west-1' },
          upstreams: emus.map((e, i) => ({
            name: `v${i}`,
            audio: e.url,
            signing: { accessKeyId: '${AWS_KEY_ID}', secretAccessKey: '${AWS_SECRET}' }
          }))
        }
      }
    },
    { AWS_KEY_ID: KEYS.accessKeyId, AWS_SECRET: KEYS.secretAccessKey }
  )
}

t.test(
  'transcribe: an AudioEvent with the wrong headers is a BadRequestException; the gateway fails over, then gives up',
  async t => {
    await withMappingCopy(
      t,
      'amazon-transcribe',
      m => {
        m.audio.frames.headers =
          '{ ":content-type": "application/octet-stream", ":event-type": "Audio", ":message-type": "event" }'
      },
      async (t, file) => {
        const emu = await emulator(t)
        const gw = await gateway(t, [emu], file)
        const leg = platformLeg(t, gw.url('/audio/x'), init(9201))
        t.equal((await leg.answer).command, 'CONNECTED')
        void stream(leg, 0, 100).catch(() => {})
        const closed = await leg.closed
        t.equal(closed.code, 1011, 'the leg ends once no session lasts (failover timeout)')
        t.match(leg.messages.at(-1), { command: 'ERROR', messageType: 'UPSTREAM_CLOSED' })
        t.ok(emu.sessions().length >= 2, `the session was replaced (${emu.sessions().length} sessions)`)
        t.match(emu.sessions()[0].errors, [/headers must be :message-type event, :event-type AudioEvent/])
        t.equal(emu.sessions()[0].closeCode, 1000, 'the exception, then a close frame')
      }
    )
  }
)

t.test('transcribe: a text frame is a BadRequestException (every frame must be event-stream)', async t => {
  await withMappingCopy(
    t,
    'amazon-transcribe',
    m => {
      m.audio.open = '"hello"'
    },
    async (t, file) => {
      const emu = await emulator(t)
      const gw = await gateway(t, [emu], file)
      const leg = platformLeg(t, gw.url('/audio/x'), init(9202))
      t.equal((await leg.answer).command, 'CONNECTED')
      void stream(leg, 0, 100).catch(() => {})
      t.equal((await leg.closed).code, 1011, 'no session lasts: the leg ends after the failover timeout')
      t.match(emu.sessions()[0].errors, [/a text frame/])
      t.match(emu.sessions()[0].texts, [{ unparsed: 'hello' }])
    }
  )
})

// Audio faster than real time: not refused on this API (the guide and the API reference document no such
// error; the SDKs' real-time rule is about HTTP/2 event signatures), so the emulator takes it and there is
// no gateway answer to show.

t.test('transcribe: LimitExceededException moves the call to another session; the platform sees nothing', async t => {
  const a = await emulator(t, {
    transcribeException: { afterAudioMs: 500, type: 'LimitExceededException', message: 'too many streams' }
  })
  const b = await emulator(t, {
    transcribeException: { afterAudioMs: 500, type: 'LimitExceededException', message: 'too many streams' }
  })
  const gw = await gateway(t, [a, b], 'mappings/amazon-transcribe.yaml', { failoverTimeoutSeconds: 5 })
  const leg = platformLeg(t, gw.url('/audio/x'), init(9203))
  t.equal((await leg.answer).command, 'CONNECTED')
  await stream(leg, 0, 40)
  t.ok(await until(() => a.sessions().length + b.sessions().length >= 2, 3000), 'a second session was opened')
  t.notOk(
    leg.messages.some(m => m.command === 'ERROR'),
    'no ERROR reached the platform'
  )
  t.equal(leg.ws.readyState, leg.ws.OPEN, 'the platform leg is open')
  leg.ws.close(1000)
})

t.test('transcribe: UnrecognizedClientException ends the leg with UPSTREAM_CLOSED', async t => {
  const emu = await emulator(t, {
    transcribeException: {
      afterAudioMs: 200,
      type: 'UnrecognizedClientException',
      message: 'The security token included in the request is invalid.'
    }
  })
  const gw = await gateway(t, [emu], 'mappings/amazon-transcribe.yaml')
  const { leg, closed } = await legUntilClosed(t, gw, init(9204))
  t.equal(closed.code, 1011)
  t.match(leg.messages.at(-1), { command: 'ERROR', messageType: 'UPSTREAM_CLOSED' })
  t.equal(emu.sessions().length, 1, 'no other session: the key is refused everywhere')
})
