import type { IncomingMessage } from 'node:http'
import { round3 } from './cadence'
import type { VendorSession, Verdict } from './session'
import { header, isObject, safeEqual, type Json } from './wire'

// The AudioHook emulator's checks (audiohook.ts): the upgrade's API key and session headers, the
// `open` parameters and media offers, the shape of every client message, as the reference server
// validates them (see audiohook.ts for the sources), and the values they are written in.

const UUID_RE =
  /^(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-5][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000)$/
const DURATION_RE = /^PT(?:\d*\.)?\d+S$/
export const AH_LANG_RE = /^[a-z]{2,3}-[A-Za-z]{2,3}$/
export const AH_CLOSE_REASONS = ['end', 'error', 'disconnect', 'reconnect']
export const AH_ERROR_CODES = [400, 405, 408, 409, 413, 415, 429, 500, 503]

/** ISO-8601 duration in seconds, as AudioHook writes it ("PT1.23S"). */
export function isoDuration(seconds: number): string {
  return `PT${round3(seconds)}S`
}

export function parseIsoDuration(d: string): number {
  return Number(d.slice(2, -1))
}

export function isDuration(v: unknown): v is string {
  return typeof v === 'string' && DURATION_RE.test(v)
}

function isSeq(v: unknown): v is number {
  return Number.isInteger(v) && (v as number) >= 0
}

export function audiohookUpgrade(req: IncomingMessage, apiKey: string | undefined): Verdict {
  if (apiKey !== undefined) {
    const key = header(req, 'x-api-key')
    if (key === undefined || !safeEqual(key, apiKey))
      return { ok: false, status: 401, error: key === undefined ? 'X-API-KEY missing' : 'X-API-KEY invalid' }
  }
  return { ok: true }
}

/** The session headers the reference server requires to be UUIDs (checked after the upgrade), each one wrong. */
export function headerProblems(req: IncomingMessage): string[] {
  const problems: string[] = []
  for (const name of ['Audiohook-Session-Id', 'Audiohook-Correlation-Id', 'Audiohook-Organization-Id']) {
    const v = header(req, name.toLowerCase())
    if (v === undefined || !UUID_RE.test(v)) problems.push(`Missing or invalid "${name.toLowerCase()}" header field`)
  }
  return problems
}

/** Returns the first problem with `open` parameters, or null. */
export function checkOpenParams(p: Json, orgId: string): string | null {
  if (typeof p.organizationId !== 'string' || !UUID_RE.test(p.organizationId))
    return 'open: organizationId must be a UUID'
  if (p.organizationId.toLowerCase() !== orgId.toLowerCase())
    return 'open: organizationId does not match the Audiohook-Organization-Id header'
  if (typeof p.conversationId !== 'string' || !UUID_RE.test(p.conversationId))
    return 'open: conversationId must be a UUID'
  const part = p.participant
  if (!isObject(part)) return 'open: participant must be an object'
  if (typeof part.id !== 'string' || !UUID_RE.test(part.id)) return 'open: participant.id must be a UUID'
  for (const k of ['ani', 'aniName', 'dnis'])
    if (typeof part[k] !== 'string') return `open: participant.${k} must be a string`
  if (!Array.isArray(p.media)) return 'open: media must be an array'
  for (const [i, m] of (p.media as unknown[]).entries()) {
    const bad = checkMediaOffer(m, i)
    if (bad !== null) return bad
  }
  if ('language' in p && (typeof p.language !== 'string' || !AH_LANG_RE.test(p.language)))
    return 'open: language must look like "en-US"'
  if ('supportedLanguages' in p && typeof p.supportedLanguages !== 'boolean')
    return 'open: supportedLanguages must be a boolean'
  if ('customConfig' in p && !isObject(p.customConfig)) return 'open: customConfig must be an object'
  if ('continuedSessions' in p) {
    const cs = p.continuedSessions
    const session = (c: unknown): boolean =>
      isObject(c) && typeof c.id === 'string' && UUID_RE.test(c.id) && isSeq(c.serverseq) && isSeq(c.clientseq)
    if (!Array.isArray(cs) || !(cs as unknown[]).every(session))
      return 'open: continuedSessions must be [{id, serverseq, clientseq}]'
  }
  return null
}

function checkMediaOffer(m: unknown, i: number): string | null {
  if (!isObject(m)) return `open: media[${i}] must be an object`
  if (m.type !== 'audio') return `open: media[${i}].type must be "audio"`
  if (m.format !== 'PCMU' && m.format !== 'L16') return `open: media[${i}].format must be PCMU or L16`
  if (m.rate !== 8000) return `open: media[${i}].rate must be 8000`
  const ch = m.channels
  if (
    !Array.isArray(ch) ||
    ch.length < 1 ||
    ch.length > 2 ||
    !(ch as unknown[]).every(c => c === 'external' || c === 'internal')
  )
    return `open: media[${i}].channels must be 1–2 of "external" / "internal"`
  return null
}

/** Whether a parsed text is a well-formed client message (version "2", id, type, seq, serverseq, position, parameters). */
export function isClientMessage(
  m: unknown
): m is Json & { type: string; seq: number; serverseq: number; position: string; id: string } {
  return (
    isObject(m) &&
    m.version === '2' &&
    typeof m.id === 'string' &&
    UUID_RE.test(m.id) &&
    typeof m.type === 'string' &&
    isSeq(m.seq) &&
    isObject(m.parameters) &&
    isDuration(m.position) &&
    isSeq(m.serverseq)
  )
}

const NULL_UUID = '00000000-0000-0000-0000-000000000000'

/**
 * Genesys' connection probe: an `open` whose conversationId is the null UUID, answered like any open
 * (opened, then closed on close). It is recorded as a probe, not a billable session.
 */
export function markConnectionProbe(s: VendorSession, p: Json): void {
  if (p.conversationId === NULL_UUID) s.probe = true
}
