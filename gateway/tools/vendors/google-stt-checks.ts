import { createPublicKey, verify } from 'node:crypto'
import { status as Status } from '@grpc/grpc-js'
import type { ProtoSet } from '../../upstream/protos'

// What Google Cloud Speech-to-Text v2 refuses in a StreamingRecognize call, each check with the section of
// the published material it follows:
//  [proto]  google/cloud/speech/v2/cloud_speech.proto (googleapis; as google-proto-files ships it), the
//           comments of StreamingRecognizeRequest, StreamingRecognitionConfig, RecognitionConfig and
//           ExplicitDecodingConfig;
//  [rpc]    the RPC reference, cloud.google.com/speech-to-text/v2/docs/reference/rpc/google.cloud.speech.v2;
//  [quotas] "Quotas and limits" (v2): streaming audio per stream 5 minutes;
//  [auth]   "Authenticate to Cloud services using client libraries" / "Service account authorization
//           without OAuth" (self-signed JWTs: iss = sub = the service account's email, aud = the API's
//           https://speech.googleapis.com/, RS256, at most an hour), and API keys in x-goog-api-key.
// A refusal is a gRPC status with the API's code; the emulator records it in the stream's report.

/** A refusal: the status the call ends with and its details. */
export interface Refusal {
  readonly code: Status
  readonly details: string
}

const refuse = (code: Status, details: string): Refusal => ({ code, details })

/** The emulator's recognizers hold no configuration: `_` is "an empty implicit Recognizer" [proto recognizer]. */
const RECOGNIZER = /^projects\/([^/]+)\/locations\/([^/]+)\/recognizers\/([^/]+)$/

/** Encodings the emulator decodes (headerless audio). Others are valid enum values it refuses (choice). */
const RAW_ENCODINGS = ['LINEAR16', 'MULAW', 'ALAW']

/** The audio field's limit [proto StreamingRecognizeRequest.audio: "Maximum size for this field is 15 KB"]. */
export const MAX_AUDIO_BYTES = 15 * 1024

/**
 * Field numbers a message does not have, anywhere in `buf` (the wire form, walked against the protos).
 * (Choice: the API's front end refuses unknown fields in JSON; over gRPC an unknown field number is a
 * client built against other protos, which the emulator refuses too, INVALID_ARGUMENT.)
 */
export function unknownFields(set: ProtoSet, type: string, buf: Uint8Array, path = ''): string[] {
  const byNumber = new Map([...(set.fields(type)?.values() ?? [])].map(f => [f.number, f]))
  const out: string[] = []
  let at = 0
  const varint = (): number => {
    let v = 0
    let mul = 1
    for (;;) {
      const b = buf[at++] ?? 0
      v += (b & 0x7f) * mul
      if (b < 0x80 || at >= buf.length) return v
      mul *= 128
    }
  }
  while (at < buf.length) {
    const tag = varint()
    const n = Math.floor(tag / 8)
    const wire = tag & 7
    const f = byNumber.get(n)
    if (f === undefined) out.push(`${path}/#${n}`)
    if (wire === 0) varint()
    else if (wire === 1) at += 8
    else if (wire === 5) at += 4
    else if (wire === 2) {
      const len = varint()
      if (f?.message != null && !set.isMapEntry(f.message))
        out.push(...unknownFields(set, f.message, buf.subarray(at, at + len), `${path}/${f.name}`))
      at += len
    } else return [...out, `${path}/(wire type ${wire})`]
  }
  return out
}

/** The first request's recognizer [proto StreamingRecognizeRequest.recognizer: Required, its format]. */
export function recognizerProblem(recognizer: unknown, location: string): Refusal | null {
  if (typeof recognizer !== 'string' || recognizer === '')
    return refuse(Status.INVALID_ARGUMENT, 'The first request must name a recognizer (recognizer is required).')
  const m = RECOGNIZER.exec(recognizer)
  if (m === null)
    return refuse(
      Status.INVALID_ARGUMENT,
      `Invalid resource field value in the request: recognizer "${recognizer}" is not ` +
        'projects/{project}/locations/{location}/recognizers/{recognizer}.'
    )
  if (m[2] !== location)
    return refuse(
      Status.INVALID_ARGUMENT,
      `Expected resource location to be ${location}, but found ${m[2]} in resource name.`
    )
  return null
}

/**
 * The first request's configuration. [proto StreamingRecognizeRequest]: the first message carries a
 * recognizer and a streaming_config "and must not contain audio"; the config "can be omitted if the
 * Recognizer being used has a default_recognition_config" (the emulator's recognizers have none).
 * [proto ExplicitDecodingConfig]: encoding required; sample_rate_hertz 8000-48000, required for LINEAR16,
 * MULAW, ALAW; audio_channel_count 1-8. [proto RecognitionConfig]: model and language_codes, which the
 * implicit recognizer `_` does not hold.
 */
export function configProblem(first: Record<string, any>): Refusal | null {
  if (first.audio !== undefined)
    return refuse(Status.INVALID_ARGUMENT, 'The first request must not contain audio (audio before config).')
  const config = first.streamingConfig?.config as Record<string, any> | undefined
  if (config === undefined)
    return refuse(
      Status.INVALID_ARGUMENT,
      'The first request must contain a streaming_config: the recognizer has no default_recognition_config.'
    )
  const d = config.explicitDecodingConfig as Record<string, any> | undefined
  if (d === undefined)
    return refuse(
      Status.INVALID_ARGUMENT,
      'Headerless audio needs explicit_decoding_config (auto_decoding_config detects WAV, FLAC, MP3 and the like).'
    )
  if (d.encoding === undefined || d.encoding === 'AUDIO_ENCODING_UNSPECIFIED')
    return refuse(Status.INVALID_ARGUMENT, 'explicit_decoding_config.encoding is required.')
  if (!RAW_ENCODINGS.includes(d.encoding))
    return refuse(
      Status.INVALID_ARGUMENT,
      `Audio encoding ${d.encoding} is not supported by this emulator for streaming.`
    )
  const rate = d.sampleRateHertz
  if (typeof rate !== 'number' || rate < 8000 || rate > 48000)
    return refuse(Status.INVALID_ARGUMENT, `sample_rate_hertz must be 8000-48000 for ${d.encoding} (got ${rate}).`)
  const channels = d.audioChannelCount ?? 1
  if (channels < 1 || channels > 8)
    return refuse(Status.INVALID_ARGUMENT, `audio_channel_count must be 1-8 (got ${channels}).`)
  if (typeof config.model !== 'string' || config.model === '')
    return refuse(Status.INVALID_ARGUMENT, 'model is required: the recognizer does not set one.')
  if (!Array.isArray(config.languageCodes) || config.languageCodes.length === 0)
    return refuse(Status.INVALID_ARGUMENT, 'language_codes is required: the recognizer does not set them.')
  return null
}

/** A later request [proto StreamingRecognizeRequest]: "must contain audio and must not contain a streaming_config". */
export function laterProblem(req: Record<string, any>, bytes: number): Refusal | null {
  if (req.streamingConfig !== undefined)
    return refuse(Status.INVALID_ARGUMENT, 'Only the first request may contain a streaming_config.')
  if (req.audio === undefined || bytes === 0)
    return refuse(Status.INVALID_ARGUMENT, 'Every request after the first must contain audio.')
  if (bytes > MAX_AUDIO_BYTES)
    return refuse(
      Status.INVALID_ARGUMENT,
      `Audio of ${bytes} bytes in one request is over the ${MAX_AUDIO_BYTES} byte limit.`
    )
  return null
}

/** Who may call: an API key, or a self-signed JWT of the service account [auth]. Null when allowed. */
export function authProblem(
  metadata: { get(key: string): unknown[] },
  accept: { apiKey?: string; serviceAccount?: { email: string; publicKeyPem: string } },
  now: number
): Refusal | null {
  if (accept.apiKey === undefined && accept.serviceAccount === undefined) return null
  const key = metadata.get('x-goog-api-key')[0]
  const bearer = /^Bearer (.+)$/.exec(String(metadata.get('authorization')[0] ?? ''))?.[1]
  if (key !== undefined) {
    if (accept.apiKey !== undefined && key === accept.apiKey) return null
    // The API answers a wrong key 400 INVALID_ARGUMENT, reason API_KEY_INVALID.
    return refuse(Status.INVALID_ARGUMENT, 'API key not valid. Please pass a valid API key.')
  }
  if (bearer === undefined || accept.serviceAccount === undefined)
    return refuse(
      Status.UNAUTHENTICATED,
      'Request is missing required authentication credential. Expected OAuth 2 access token or other valid credential.'
    )
  return jwtProblem(bearer, accept.serviceAccount, now)
}

function jwtProblem(token: string, sa: { email: string; publicKeyPem: string }, now: number): Refusal | null {
  const bad = refuse(Status.UNAUTHENTICATED, 'Request had invalid authentication credentials.')
  const parts = token.split('.')
  if (parts.length !== 3) return bad
  const [h, p, sig] = parts as [string, string, string]
  let header: { alg?: string }
  let claims: { iss?: string; sub?: string; aud?: string; exp?: number; iat?: number }
  try {
    header = JSON.parse(Buffer.from(h, 'base64url').toString('utf8'))
    claims = JSON.parse(Buffer.from(p, 'base64url').toString('utf8'))
  } catch {
    return bad
  }
  if (header.alg !== 'RS256') return bad
  const signed = verify(
    'RSA-SHA256',
    Buffer.from(`${h}.${p}`),
    createPublicKey(sa.publicKeyPem),
    Buffer.from(sig, 'base64url')
  )
  if (!signed || claims.iss !== sa.email || claims.sub !== sa.email) return bad
  if (claims.aud !== 'https://speech.googleapis.com/') return bad
  const secs = now / 1000
  if (typeof claims.exp !== 'number' || claims.exp <= secs || (claims.iat ?? 0) > secs + 300) return bad
  if (claims.exp - (claims.iat ?? claims.exp) > 3600) return bad
  return null
}
