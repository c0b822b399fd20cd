/**
 * What one exchange with a text replica came to: a usable answer, or a failure with its code, its bounded
 * `upstream_requests_total{result}` label and, when the vendor answered, its status. Read here, once.
 */
import { GatewayError } from '../errors'
import { translate, type RawAnswer, type UpstreamResult } from './http-exchange'
import type { Replica } from './pool'

/** A vendor's 2xx answer: body parsed when it says JSON, else its text (null when empty); `json` is the JSON text as received. */
export interface Answer {
  status: number
  headers: Record<string, string>
  body: unknown
  json: string | null
}

/** How an exchange ended, or why none was made (`result` null: the deadline passed first, or shutting down). */
export type Exchanged =
  | { ok: true; replica: Replica; answer: Answer }
  | {
      ok: false
      replica: Replica | null
      error: GatewayError
      result: UpstreamResult | null
      vendorStatus?: number
      /** A 429's `retry-after`, in ms from when it came (absent: none, or not a delay or date). */
      retryAfterMs?: number
      unbuilt?: undefined
    }

/** What the caller reads from a 2xx answer: `json`, a JSON body (anything else is UPSTREAM_ANSWER_NOT_JSON); `any`. */
export type AnswerKind = 'json' | 'any'

const JSON_TYPE = /[/+]json\b/i
/** A media type as it may be quoted back (`text/event-stream`); anything else is not quoted. */
const MEDIA_TYPE = /^[a-z0-9!#$&^_.+-]{1,64}\/[a-z0-9!#$&^_.+-]{1,64}$/i

/**
 * The outcome of a gathered exchange. A non-2xx answer's body is not kept: it is not ours to pass on, and
 * may echo what was sent. A 2xx answer whose content type says JSON is parsed; when the caller expects JSON
 * (`kind` json), a 2xx answer that is not (another content type such as `text/event-stream`, an empty body,
 * a body that does not parse) is UPSTREAM_ANSWER_NOT_JSON with the vendor's status: never an empty success.
 */
export function readAnswer(raw: RawAnswer, replica: Replica, kind: AnswerKind): Exchanged {
  if (raw.error !== null) {
    const [result, code, detail] = translate(raw.error, raw.timedOut)
    return { ok: false, replica, error: new GatewayError(code, { detail, cause: raw.error }), result }
  }
  if (raw.status < 200 || raw.status > 299)
    return {
      ok: false,
      replica,
      error: new GatewayError('UPSTREAM_BAD_ANSWER', { detail: `the vendor answered ${raw.status}` }),
      result: raw.status >= 500 ? 'status_5xx' : 'status_4xx',
      vendorStatus: raw.status,
      ...(raw.status === 429 ? retryAfter(raw.headers['retry-after']) : {})
    }
  const text = raw.chunks.length === 1 ? raw.chunks[0].toString('utf8') : Buffer.concat(raw.chunks).toString('utf8')
  const type = raw.headers['content-type'] ?? ''
  const saysJson = JSON_TYPE.test(type)
  if (kind === 'json' && (!saysJson || text === '')) return notJson(raw, replica, type, text === '')
  if (text === '' || !saysJson)
    return { ok: true, replica, answer: { status: raw.status, headers: raw.headers, body: text || null, json: null } }
  try {
    return {
      ok: true,
      replica,
      answer: { status: raw.status, headers: raw.headers, body: JSON.parse(text), json: text }
    }
  } catch {
    if (kind === 'json') return notJson(raw, replica, type, false)
    const error = new GatewayError('UPSTREAM_BAD_ANSWER', { detail: 'the vendor said JSON but its answer is not JSON' })
    return { ok: false, replica, error, result: 'bad_answer' }
  }
}

function notJson(raw: RawAnswer, replica: Replica, contentType: string, empty: boolean): Exchanged {
  const media = contentType.split(';')[0].trim()
  const what = empty
    ? 'an empty body'
    : JSON_TYPE.test(media)
      ? `${media} that does not parse`
      : MEDIA_TYPE.test(media)
        ? `content-type ${media.toLowerCase()}`
        : media === ''
          ? 'no content-type'
          : 'another content-type'
  return {
    ok: false,
    replica,
    error: new GatewayError('UPSTREAM_ANSWER_NOT_JSON', {
      detail: `the vendor answered ${raw.status} with ${what}, not the JSON the mapping reads`
    }),
    result: 'bad_answer',
    vendorStatus: raw.status
  }
}

/** RFC 9110 `retry-after`: delay-seconds, or an HTTP-date (against the wall clock); anything else: none. */
export function retryAfter(value: string | undefined, wallNow = Date.now()): { retryAfterMs?: number } {
  if (value === undefined) return {}
  const v = value.trim()
  if (/^\d{1,9}$/.test(v)) return { retryAfterMs: Number(v) * 1000 }
  const at = /[a-z]/i.test(v) ? Date.parse(v) : Number.NaN
  return Number.isNaN(at) ? {} : { retryAfterMs: Math.max(0, at - wallNow) }
}
