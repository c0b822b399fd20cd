import { join } from 'node:path'
import { UsageError, help, integer, parseCommand, positive, requireUrl } from './cli-usage'
import { packageRoot } from './paths'
import { readAudioClip } from './tools/audio-file'
import { simulateAudio } from './tools/simulate'
import { simulateText } from './tools/simulate-text'
import { REAL_VENDOR_PATHS, startRealVendor, type RealVendorKind } from './tools/real-vendors'
import { startVendorEmulator, type EmulatorKind } from './tools/vendor-emulator'

/** The tool commands: `simulate audio|text` (act as the platform) and `vendor` (run an emulator). */

export async function cmdSimulate(argv: string[]): Promise<number> {
  const [kind, ...rest] = argv
  if (kind === 'text') return await cmdSimulateText(rest)
  if (kind === '--help' || kind === '-h') return help('simulate')
  if (kind !== 'audio')
    throw new UsageError(
      kind === undefined ? 'simulate: "audio" or "text"' : `simulate ${kind}: "audio" or "text"`,
      'simulate'
    )
  const line = parseCommand('simulate audio', rest, {
    url: { type: 'string' },
    token: { type: 'string' },
    file: { type: 'string' },
    perspective: { type: 'string', default: 'TX' },
    legs: { type: 'string', default: '1' },
    seconds: { type: 'string' },
    insecure: { type: 'boolean', default: false },
    stereo: { type: 'boolean', default: false },
    contact: { type: 'string' }
  })
  if (line === null) return 0
  const { values, usage } = line
  const url = requireUrl(values.url, ['ws:', 'wss:'], usage)
  const perspective = values.perspective as 'TX' | 'RX' | 'MIX'
  if (!['TX', 'RX', 'MIX'].includes(perspective)) throw usage('--perspective must be TX, RX or MIX')
  const legs = integer(values.legs!, '--legs', 1, usage)
  const seconds = values.seconds === undefined ? undefined : positive(values.seconds, '--seconds', usage)
  // The contacts are N, N+1, … (one per leg, or per stereo pair): all must be valid ids.
  const contactIdBase =
    values.contact === undefined
      ? undefined
      : integer(values.contact, '--contact', 1, usage, Number.MAX_SAFE_INTEGER - legs)
  const clipFile = values.file ?? join(packageRoot(), 'examples', 'hello.ulaw')
  let clip: Buffer
  try {
    clip = readAudioClip(clipFile)
  } catch (err) {
    throw usage(`--file ${clipFile}: ${(err as Error).message}`)
  }
  const results = await simulateAudio({
    url,
    token: values.token,
    clip,
    perspective,
    legs,
    seconds,
    insecure: values.insecure,
    stereo: values.stereo,
    contactIdBase,
    print: line => console.log(line)
  })
  const failed = results.filter(
    l => l.error !== undefined || (l.answer as { command?: string } | null)?.command !== 'CONNECTED' || l.cut
  )
  if (failed.length === 0) return 0
  const why = failed.map(l => {
    if (l.error !== undefined) return `leg ${l.index}: ${l.error}`
    if ((l.answer as { command?: string } | null)?.command !== 'CONNECTED') return `leg ${l.index}: not connected`
    return `leg ${l.index}: cut (closed ${l.closeCode ?? '?'} after ${l.framesSent} frames)`
  })
  console.error(`assist-gateway: ${failed.length} of ${results.length} leg(s) failed: ${why.join('; ')}`)
  return 1
}

/** simulate text: one utterance; prints the status and the answer; exit 0 on a 2xx, else 1. */
async function cmdSimulateText(argv: string[]): Promise<number> {
  const line = parseCommand('simulate text', argv, {
    url: { type: 'string' },
    token: { type: 'string' },
    'auth-header': { type: 'boolean', default: false },
    participant: { type: 'string', default: 'patron' },
    text: { type: 'string' },
    'contact-id': { type: 'string' },
    'bus-no': { type: 'string' },
    tenant: { type: 'string' },
    insecure: { type: 'boolean', default: false }
  })
  if (line === null) return 0
  const { values, usage } = line
  const url = requireUrl(values.url, ['http:', 'https:'], usage)
  if (values.text === undefined) throw usage('--text is required')
  const participant = values.participant as 'patron' | 'agent' | 'system'
  if (!['patron', 'agent', 'system'].includes(participant)) throw usage('--participant must be patron, agent or system')
  const contactId = values['contact-id']
  const busNo = values['bus-no']
  const result = await simulateText({
    url,
    token: values.token,
    authHeader: values['auth-header'],
    participant,
    text: values.text,
    insecure: values.insecure,
    contactId: contactId === undefined ? undefined : integer(contactId, '--contact-id', 1, usage),
    busNo: busNo === undefined ? undefined : integer(busNo, '--bus-no', 1, usage),
    tenantId: values.tenant,
    print: line => console.log(line)
  })
  return result.status >= 200 && result.status < 300 ? 0 : 1
}

const EMULATOR_KINDS: readonly string[] = ['passthrough', 'json-events']
/** gRPC emulators (a server of their own, not on the WebSocket emulators' session recorder). */
const GRPC_KINDS: readonly string[] = ['google-stt-v2', 'dialogflow']
const REAL_VENDOR_KINDS: readonly string[] = Object.keys(REAL_VENDOR_PATHS)

/**
 * A vendor emulator in the foreground: the bundled demo vendors (passthrough, json-events) or a strict
 * emulator of a real streaming API (deepgram, assemblyai, twilio-media, audiohook, amazon-transcribe…; `--api-key` makes it
 * check the credential, `--result-every-frames` counts 20 ms frames of audio between results, 0 for none).
 */
export async function cmdVendor(argv: string[]): Promise<number> {
  const line = parseCommand('vendor', argv, {
    kind: { type: 'string' },
    port: { type: 'string' },
    host: { type: 'string', default: '127.0.0.1' },
    'result-every-frames': { type: 'string', default: '50' },
    'transcribe-frames': { type: 'boolean', default: false },
    'api-key': { type: 'string' },
    'max-stream-seconds': { type: 'string' },
    location: { type: 'string' }
  })
  if (line === null) return 0
  const { values, usage } = line
  const kind = values.kind ?? ''
  const real = REAL_VENDOR_KINDS.includes(kind)
  if (!real && !EMULATOR_KINDS.includes(kind) && !GRPC_KINDS.includes(kind))
    throw usage(`--kind must be one of ${[...EMULATOR_KINDS, ...REAL_VENDOR_KINDS, ...GRPC_KINDS].join(', ')}`)
  if (values.port === undefined) throw usage('--port is required')
  const port = integer(values.port, '--port', 0, usage, 65535)
  const everyFrames = integer(values['result-every-frames']!, '--result-every-frames', 0, usage)
  const apiKey = values['api-key']
  if (GRPC_KINDS.includes(kind)) {
    const max = values['max-stream-seconds']
    // Imported here: the gRPC emulators load @grpc/grpc-js, which the other kinds never need.
    const start =
      kind === 'dialogflow'
        ? (await import('./tools/vendors/dialogflow')).startDialogflow
        : (await import('./tools/vendors/google-stt')).startGoogleStt
    const emulator = await start({
      port,
      host: values.host,
      apiKey,
      location: values.location,
      resultEveryMs: everyFrames * 20,
      transcribeFrames: values['transcribe-frames'] === true,
      ...(max === undefined ? {} : { maxStreamAudioMs: integer(max, '--max-stream-seconds', 1, usage) * 1000 })
    })
    return serveEmulator(kind, emulator, apiKey)
  }
  if (!real && apiKey !== undefined) throw usage(`--api-key applies to ${REAL_VENDOR_KINDS.join(', ')}`)
  // Amazon Transcribe signs with two keys: --api-key <access key id>:<secret access key>.
  const split = kind === 'amazon-transcribe' && apiKey !== undefined ? apiKey.indexOf(':') : -1
  if (kind === 'amazon-transcribe' && apiKey !== undefined && split < 1)
    throw usage('--api-key for amazon-transcribe is <access key id>:<secret access key>')
  const aws =
    split > 0 && apiKey !== undefined
      ? { accessKeyId: apiKey.slice(0, split), secretAccessKey: apiKey.slice(split + 1) }
      : undefined
  const log = (line: string): void => console.log(line)
  const emulator: { url: string; httpUrl: string; close: () => Promise<void> } = real
    ? await startRealVendor({
        kind: kind as RealVendorKind,
        port,
        host: values.host,
        ...(aws === undefined ? { apiKey } : { aws }),
        resultEveryMs: everyFrames * 20,
        ...(values['transcribe-frames'] === true ? { transcribeFrames: true } : {}),
        log
      })
    : await startVendorEmulator({
        kind: kind as EmulatorKind,
        port,
        host: values.host,
        resultEveryFrames: everyFrames,
        resultsByAudio: true,
        log
      })
  return serveEmulator(kind, emulator, apiKey)
}

/** Prints where the emulator listens and runs it until SIGTERM or SIGINT. */
function serveEmulator(
  kind: string,
  emulator: { url: string; httpUrl: string; close: () => Promise<void> },
  apiKey: string | undefined
): number {
  const credential = apiKey !== undefined ? '; credential required' : ''
  console.log(`${kind} vendor emulator on ${emulator.url} (reports: ${emulator.httpUrl}/sessions)${credential}`)
  const stop = (): void => {
    emulator.close().finally(() => process.exit(0))
  }
  process.once('SIGTERM', stop)
  process.once('SIGINT', stop)
  return -1
}
