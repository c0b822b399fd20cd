import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { decodeMessages, encodeMessage, type EventMessage, type TypedHeader } from '../../mapping/event-stream'
import { queryPairs, querySignature, signingKey } from '../../mapping/sigv4'
import { Cadence, phrase, round3 } from './cadence'
import { Hearing } from './hearing'
import type { Context, Protocol, VendorSession, Verdict } from './session'
import type { AwsKeys } from './types'
import { header } from './wire'

// Amazon Transcribe streaming over WebSocket (/stream-transcription-websocket)
//
// Sources: Amazon Transcribe developer guide, "Setting up a WebSocket stream" (the presigned URL, the event
// stream frames, "Handling WebSocket streaming errors"), "Event stream encoding", the API reference of
// StartStreamTranscription (request parameters, TranscriptEvent), "Transcribing streaming audio" (formats:
// PCM s16le, FLAC, Ogg-Opus; 50-200 ms chunks recommended; partial results).
//
// Upgrade: a SigV4 presigned GET: X-Amz-Algorithm AWS4-HMAC-SHA256, X-Amz-Credential
// <key id>/<YYYYMMDD>/<region>/transcribe/aws4_request, X-Amz-Date, X-Amz-Expires (1-300, the guide's maximum),
// X-Amz-SignedHeaders including host, X-Amz-Security-Token when the key is temporary, X-Amz-Signature,
// recomputed here from the request as received (host header included). Refusals are HTTP answers before the
// upgrade (choice: the guide lists UnrecognizedClientException for a wrong key among the exceptions sent as
// frames, and the HTTP API answers 403; this emulator answers 403 at the upgrade, with the exception name
// in x-amzn-ErrorType): an unknown key id → 403 UnrecognizedClientException; a wrong signature →
// 403 InvalidSignatureException; an expired or future-dated URL → 403 (choice: 5 minutes of skew allowed).
// Query: media-encoding (pcm | ogg-opus | flac) and sample-rate (8000-48000) required, language-code
// required unless identify-language/identify-multiple-languages; booleans true|false, partial-results-stability
// high|medium|low, number-of-channels 2 only with enable-channel-identification. Bad query → 400
// BadRequestException (choice: the HTTP form of the same exception).
// After the upgrade every client frame must be a binary event-stream message with :message-type event,
// :event-type AudioEvent, :content-type application/octet-stream; its payload is the audio (PCM: a whole
// number of 16-bit samples). Anything else (a text frame, a broken frame, other headers) → the exception
// frame BadRequestException {"Message": …} then a close frame (choice: code 1000, the guide names none).
// An empty AudioEvent ends the stream: final results for what is pending, then close 1000.
// Audio faster than real time is taken (the service "processes audio chunks in realtime"; the only documented
// failure, in the Python SDK's StartStreamTranscription notes, is HTTP/2 event signing past 5 minutes, and
// the WebSocket API signs no events).
// A chunk of more than 1 s of audio → BadRequestException "Your stream is too big" (choice: the threshold is
// not published). 15 s without audio (idleCloseMs) → BadRequestException "Your request timed out because
// no new audio was received for 15 seconds." then close.
// Results: a partial TranscriptEvent (IsPartial true) half-way through every resultEveryMs of audio and the
// final one at its end, each {"Transcript": {"Results": [{ResultId, StartTime, EndTime, IsPartial,
// Alternatives: [{Transcript, Items}]}]}}; `transcribeException` scripts an exception after some audio.

export const TRANSCRIBE_IDLE_CLOSE_MS = 15000
const MAX_EXPIRES = 300
const SKEW_MS = 5 * 60 * 1000
const BOOLEAN_PARAMS = [
  'enable-partial-results-stabilization',
  'show-speaker-label',
  'enable-channel-identification',
  'identify-language',
  'identify-multiple-languages'
]

function refusal(status: number, type: string, message: string): Verdict {
  return { ok: false, status, error: `${type}: ${message}`, headers: { 'x-amzn-ErrorType': type }, body: { message } }
}

/** The upgrade: the presigned URL's signature, date and expiry, then the query. */
export function transcribeUpgrade(
  req: IncomingMessage,
  q: URLSearchParams,
  keys: AwsKeys | undefined,
  now: number
): Verdict {
  if (keys !== undefined) {
    const bad = signatureProblem(req, q, keys, now)
    if (bad !== null) return bad
  }
  const problem = queryProblem(q)
  return problem === null ? { ok: true } : refusal(400, 'BadRequestException', problem)
}

function signatureProblem(req: IncomingMessage, q: URLSearchParams, keys: AwsKeys, now: number): Verdict | null {
  const get = (n: string): string => q.get(n) ?? ''
  if (get('X-Amz-Algorithm') !== 'AWS4-HMAC-SHA256')
    return refusal(403, 'IncompleteSignatureException', 'X-Amz-Algorithm must be AWS4-HMAC-SHA256')
  const cred = /^([^/]+)\/(\d{8})\/([a-z0-9-]+)\/([a-z0-9-]+)\/aws4_request$/.exec(get('X-Amz-Credential'))
  if (cred === null) return refusal(403, 'IncompleteSignatureException', 'X-Amz-Credential is malformed')
  const [, keyId, short, region, service] = cred
  if (keyId !== keys.accessKeyId)
    return refusal(403, 'UnrecognizedClientException', 'The security token included in the request is invalid.')
  if (service !== 'transcribe') return refusal(403, 'InvalidSignatureException', `credential scope names ${service}`)
  if ((keys.sessionToken ?? '') !== get('X-Amz-Security-Token'))
    return refusal(403, 'UnrecognizedClientException', 'The security token included in the request is invalid.')
  const date = get('X-Amz-Date')
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(date)
  if (m === null || date.slice(0, 8) !== short)
    return refusal(403, 'IncompleteSignatureException', 'X-Amz-Date is malformed or not the credential date')
  const signedAt = Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6])
  const expires = Number(get('X-Amz-Expires'))
  if (!Number.isInteger(expires) || expires < 1 || expires > MAX_EXPIRES)
    return refusal(403, 'IncompleteSignatureException', `X-Amz-Expires must be 1-${MAX_EXPIRES}`)
  if (now > signedAt + expires * 1000) return refusal(403, 'AccessDeniedException', 'Signature expired')
  if (signedAt > now + SKEW_MS) return refusal(403, 'AccessDeniedException', 'Signature not yet current')
  const signed = get('X-Amz-SignedHeaders').split(';')
  if (!signed.includes('host')) return refusal(403, 'IncompleteSignatureException', 'host must be signed')
  if (signed.length !== 1)
    return refusal(403, 'InvalidSignatureException', 'this emulator checks presigned URLs that sign host only')
  const url = new URL(req.url ?? '/', 'http://emulator')
  const pairs = queryPairs(url.search).filter(([k]) => k !== 'X-Amz-Signature')
  const expected = querySignature({
    host: header(req, 'host') ?? '',
    pathname: url.pathname,
    pairs,
    longDate: date,
    scope: `${short}/${region}/${service}/aws4_request`,
    key: signingKey(keys.secretAccessKey, short, region, service)
  })
  if (expected !== get('X-Amz-Signature'))
    return refusal(
      403,
      'InvalidSignatureException',
      'The request signature we calculated does not match the signature you provided.'
    )
  return null
}

function queryProblem(q: URLSearchParams): string | null {
  const encoding = q.get('media-encoding')
  if (encoding === null) return 'media-encoding is required (pcm, ogg-opus or flac)'
  if (!['pcm', 'ogg-opus', 'flac'].includes(encoding)) return `media-encoding ${encoding} is not pcm, ogg-opus or flac`
  const rate = Number(q.get('sample-rate'))
  if (!Number.isInteger(rate) || rate < 8000 || rate > 48000) return 'sample-rate must be an integer from 8000 to 48000'
  for (const name of BOOLEAN_PARAMS) {
    const v = q.get(name)
    if (v !== null && v !== 'true' && v !== 'false') return `${name} must be true or false`
  }
  const identify = q.get('identify-language') === 'true' || q.get('identify-multiple-languages') === 'true'
  if (!identify && !/^[a-z]{2}-[A-Z]{2}$/.test(q.get('language-code') ?? ''))
    return 'language-code is required (e.g. en-US) unless identify-language is true'
  const stability = q.get('partial-results-stability')
  if (stability !== null && !['high', 'medium', 'low'].includes(stability))
    return 'partial-results-stability must be high, medium or low'
  const channels = q.get('number-of-channels')
  if (channels !== null && (channels !== '2' || q.get('enable-channel-identification') !== 'true'))
    return 'number-of-channels must be 2, with enable-channel-identification=true'
  return null
}

const str = (value: string): TypedHeader => ({ type: 'string', value })

/** One Transcribe stream after the upgrade. */
export class TranscribeStream implements Protocol {
  private readonly rate: number
  private readonly pcm: boolean
  private readonly cadence: Cadence
  private readonly idleMs: number
  private lastAudio: number
  private audioMs = 0
  private ended = false
  private results = 0
  private resultId = randomUUID()
  private scripted = false
  /** `transcribeFrames`: the platform frames heard (results name them). */
  private readonly hearing: Hearing | null

  constructor(
    private readonly s: VendorSession,
    private readonly ctx: Context
  ) {
    this.rate = Number(s.params.get('sample-rate'))
    this.pcm = s.params.get('media-encoding') === 'pcm'
    this.cadence = new Cadence(ctx.resultEveryMs / 2)
    this.idleMs = ctx.opts.idleCloseMs ?? TRANSCRIBE_IDLE_CLOSE_MS
    this.lastAudio = ctx.clock.now()
    this.hearing = ctx.opts.transcribeFrames === true ? new Hearing(1, this.pcm) : null
  }

  open(): void {
    if (!this.pcm) this.s.note(`media-encoding ${this.s.params.get('media-encoding')}: this emulator checks PCM only`)
    const every = Math.max(100, Math.min(1000, Math.floor(this.idleMs / 4)))
    this.s.every(every, () => {
      if (this.ended || this.ctx.clock.now() - this.lastAudio < this.idleMs) return
      this.exception(
        'BadRequestException',
        `Your request timed out because no new audio was received for ${Math.round(this.idleMs / 1000)} seconds.`
      )
    })
  }

  text(text: string): void {
    this.s.texts.push({ unparsed: text.slice(0, 200) })
    this.refuse(`a text frame: every frame must be an event-stream message (got "${text.slice(0, 60)}")`)
  }

  binary(data: Buffer): void {
    if (this.ended) return
    let messages: EventMessage[]
    try {
      messages = decodeMessages(data)
    } catch (err) {
      return this.refuse(`a frame that is not event-stream encoded: ${(err as Error).message}`)
    }
    for (const m of messages) if (!this.ended) this.event(m, data.length)
  }

  closed(): void {
    this.ended = true
  }

  private event(m: EventMessage, wireBytes: number): void {
    const h = (n: string): unknown => m.headers[n]?.value
    if (
      h(':message-type') !== 'event' ||
      h(':event-type') !== 'AudioEvent' ||
      h(':content-type') !== 'application/octet-stream'
    )
      return this.refuse(
        `headers must be :message-type event, :event-type AudioEvent, :content-type application/octet-stream (got ${JSON.stringify(
          Object.fromEntries(Object.entries(m.headers).map(([k, v]) => [k, String(v.value)]))
        )})`
      )
    const audio = m.body
    if (audio.length === 0) {
      this.s.texts.push({ event: 'AudioEvent', empty: true })
      return this.finish()
    }
    if (this.pcm && audio.length % 2 !== 0)
      return this.refuse(`an AudioEvent of ${audio.length} bytes: not whole PCM samples`)
    const ms = this.pcm ? (audio.length / 2 / this.rate) * 1000 : 0
    if (ms > 1000) return this.refuse('Your stream is too big. Reduce the frame size and try your request again.')
    this.s.addAudio(wireBytes, audio)
    this.hearing?.add(audio)
    const now = this.ctx.clock.now()
    this.lastAudio = now
    this.audioMs += ms
    const crossed = this.cadence.add(ms)
    for (let i = 0; i < crossed; i++) {
      const at = this.cadence.boundary(i, crossed)
      this.transcript(this.cadence.start, at, ++this.cadence.ticks % 2 === 0)
    }
    const script = this.ctx.opts.transcribeException
    if (script !== undefined && !this.scripted && this.audioMs >= script.afterAudioMs) {
      this.scripted = true
      this.exception(script.type, script.message)
    }
  }

  private transcript(startMs: number, endMs: number, final: boolean): void {
    const n = final ? ++this.results : this.results + 1
    const words = this.hearing !== null ? this.hearing.words(startMs, endMs) : phrase(n)
    const step = words.length > 0 ? (endMs - startMs) / words.length : 0
    this.send(
      {
        ':content-type': str('application/json'),
        ':event-type': str('TranscriptEvent'),
        ':message-type': str('event')
      },
      {
        Transcript: {
          Results: [
            {
              ResultId: this.resultId,
              StartTime: round3(startMs / 1000),
              EndTime: round3(endMs / 1000),
              IsPartial: !final,
              Alternatives: [
                {
                  Transcript: words.join(' '),
                  Items: words.map((w, i) => ({
                    Content: w,
                    Type: 'pronunciation',
                    StartTime: round3((startMs + i * step) / 1000),
                    EndTime: round3((startMs + (i + 1) * step) / 1000),
                    VocabularyFilterMatch: false,
                    ...(final ? { Stable: true, Confidence: 0.97 } : {})
                  }))
                }
              ]
            }
          ]
        }
      }
    )
    if (final) {
      this.cadence.start = endMs
      this.resultId = randomUUID()
    }
  }

  /** A client error: recorded, then the exception frame and the close. */
  private refuse(why: string): void {
    this.s.note(why)
    this.exception('BadRequestException', why)
  }

  private exception(type: string, message: string): void {
    if (this.ended) return
    this.ended = true
    this.send(
      { ':content-type': str('application/json'), ':exception-type': str(type), ':message-type': str('exception') },
      { Message: message }
    )
    this.s.close(1000)
  }

  private finish(): void {
    this.ended = true
    if (this.cadence.pending) this.transcript(this.cadence.start, this.cadence.audioMs, true)
    this.s.close(1000)
  }

  private send(headers: Record<string, TypedHeader>, body: unknown): void {
    if (this.s.isOpen) this.s.ws?.send(encodeMessage({ headers, body: Buffer.from(JSON.stringify(body)) }))
  }
}
