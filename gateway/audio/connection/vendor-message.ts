import { type MappingInput, run, truthy } from '../../mapping/run'
import type { RouteRuntime } from '../../route'
import { FRAME_MS, type ResultTimeline } from '../feed/result-timeline'
import { parseIsoDuration } from '../../mapping/iso-duration'
import { validator } from '../../validate/compile'

type AudioMapping = NonNullable<RouteRuntime['mapping']['audio']>

/** Where the connection a vendor message came on stands: it decides which rules are read. */
export type ReadPhase = 'awaiting-ready' | 'ready' | 'closing'

/**
 * What one vendor message means, as a value. ready / refused: the answer to the open (only while
 * awaiting it). result: PlatformWebSocketMessages for the platform (JSON text each, in order). silent: a rule matched
 * and emitted nothing. unmatched: no rule matched. failed: a result rule's expression failed (`stage`
 * when or emit; `error` is the expression's text: for logs only, never for the platform).
 */
export type Verdict =
  | { readonly kind: 'ready'; readonly params: Record<string, unknown> }
  | { readonly kind: 'refused'; readonly vendorMessage: string | undefined }
  | { readonly kind: 'result'; readonly messages: readonly string[]; readonly channel?: number | null }
  | { readonly kind: 'silent' }
  | { readonly kind: 'before-delivered' }
  | { readonly kind: 'unmatched' }
  | { readonly kind: 'failed'; readonly stage: 'when' | 'emit'; readonly error: string }

export interface Reading {
  readonly verdict: Verdict
  /** Closing, and the mapping's `closeWhen` matched: the vendor said its goodbye. */
  readonly closeMatched: boolean
  /** The `ready.when` expression failed (counted; the message is then read as a result). */
  readonly readyFailed: boolean
}

const SILENT: Verdict = { kind: 'silent' }
const UNMATCHED: Verdict = { kind: 'unmatched' }
const BEFORE_DELIVERED: Verdict = { kind: 'before-delivered' }

/** A vendor text frame as the mapping sees it (`msg`): its JSON, or `{ text }` when it is not JSON. */
export function parseVendorText(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return { text }
  }
}

/**
 * Read one vendor message against the mapping: `closeWhen` while closing; `ready.refused`, `ready.when`
 * while awaiting readiness; then the result rules, first match wins. Evaluates expressions and nothing
 * else: no socket, no timer, no counter (the connection acts on the verdict). A message that comes
 * before readiness and is not about it is read as a result: it goes out after CONNECTED, in order.
 * `results` false: a control rule answered for the message (audio/connection/vendor-control.ts); results are not read.
 */
export async function readVendorMessage(
  audio: AudioMapping,
  input: MappingInput,
  phase: ReadPhase,
  results = true,
  timeline: ResultPlace | null = null
): Promise<Reading> {
  const closeMatched = phase === 'closing' && audio.closeWhen !== null && truthy(await run(audio.closeWhen, input))
  let readyFailed = false
  if (phase === 'awaiting-ready' && audio.ready !== null) {
    if (audio.ready.refused !== null && truthy(await run(audio.ready.refused, input))) {
      const reason = audio.ready.reason === null ? null : await run(audio.ready.reason, input)
      const vendorMessage = reason?.ok && typeof reason.value === 'string' ? reason.value.slice(0, 512) : undefined
      return { verdict: { kind: 'refused', vendorMessage }, closeMatched, readyFailed }
    }
    const ready = await run(audio.ready.when, input)
    readyFailed = !ready.ok
    if (truthy(ready)) {
      let params: Record<string, unknown> = {}
      if (audio.ready.parameters !== null) {
        const p = await run(audio.ready.parameters, input)
        if (p.ok && p.value !== null && typeof p.value === 'object' && !Array.isArray(p.value))
          params = p.value as Record<string, unknown>
      }
      return { verdict: { kind: 'ready', params }, closeMatched, readyFailed }
    }
  }
  return { verdict: results ? await readResult(audio, input, timeline) : SILENT, closeMatched, readyFailed }
}

/** Where a connection's results land on the call: its first frame, and the leg's delivered finals. */
export interface ResultPlace {
  readonly startFrame: number
  readonly leg: ResultTimeline
}

/** The result's audio stretch on the call's timeline (ms) and whether it is final; null when it says none. */
async function placed(
  audio: AudioMapping,
  input: MappingInput,
  startFrame: number
): Promise<{ start: number; end: number; final: boolean } | null> {
  const t = audio.time
  if (t == null) return null
  const num = async (e: typeof t.start | null): Promise<number | null> => {
    if (e === null) return null
    const r = await run(e, input)
    if (!r.ok) return null
    // iso8601: "PT1.23S" (AudioHook), read as ms; else a number in the mapping's unit.
    const v = t.iso8601 === true && typeof r.value === 'string' ? parseIsoDuration(r.value) : r.value
    return typeof v === 'number' && Number.isFinite(v) ? v * t.unitMs : null
  }
  const start = await num(t.start)
  const end = t.end !== null ? await num(t.end) : start === null ? null : start + ((await num(t.duration)) ?? NaN)
  if (start === null || end === null || Number.isNaN(end)) return null
  const fin = await run(t.final, input)
  const offset = startFrame * FRAME_MS
  // Whole ms: vendors give seconds with 3 decimals, and no float noise reaches the platform.
  return { start: Math.round(offset + start), end: Math.round(offset + end), final: fin.ok && fin.value === true }
}

type ResultRule = AudioMapping['results'][number]

async function readResult(audio: AudioMapping, input: MappingInput, timeline: ResultPlace | null): Promise<Verdict> {
  for (const rule of audio.results) {
    const when = await run(rule.when, input)
    if (!when.ok) return { kind: 'failed', stage: 'when', error: when.error }
    if (when.value !== true) continue
    // A joined (stereo) session: which leg the messages go to (audio/session/join.ts); not a channel number: both.
    let channel: number | null | undefined
    if (rule.channel != null) {
      const ch = await run(rule.channel, input)
      channel = ch.ok && typeof ch.value === 'number' ? ch.value : null
    }
    if (rule.each == null) {
      const verdict = await readOne(rule, audio, input, timeline, channel ?? null)
      return channel === undefined || verdict.kind !== 'result' ? verdict : { ...verdict, channel }
    }
    // `each`: every item is a result of its own (its own time, its own emit), in order.
    const items = await run(rule.each, input)
    if (!items.ok) return { kind: 'failed', stage: 'emit', error: items.error }
    const list =
      items.value === undefined || items.value === null ? [] : Array.isArray(items.value) ? items.value : [items.value]
    const messages: string[] = []
    let before = 0
    for (const item of list) {
      const v = await readOne(rule, audio, { ...input, item }, timeline, channel ?? null)
      if (v.kind === 'failed') return v
      if (v.kind === 'before-delivered') before++
      if (v.kind === 'result') messages.push(...v.messages)
    }
    if (messages.length === 0) return before > 0 ? BEFORE_DELIVERED : SILENT
    return channel === undefined ? { kind: 'result', messages } : { kind: 'result', messages, channel }
  }
  return UNMATCHED
}

/**
 * One result (a message, or an item of it): on the call's timeline, a result wholly before the delivered
 * finals is not emitted; the emit sees `time` (seconds on the call's timeline). One without times is
 * emitted as it is.
 */
async function readOne(
  rule: ResultRule,
  audio: AudioMapping,
  input: MappingInput,
  timeline: ResultPlace | null,
  channel: number | null
): Promise<Verdict> {
  if (timeline !== null) {
    const at = await placed(audio, input, timeline.startFrame)
    if (at !== null) {
      if (!timeline.leg.admit(at.end, at.final, channel)) return BEFORE_DELIVERED
      const time = { start: at.start / 1000, end: at.end / 1000, duration: (at.end - at.start) / 1000 }
      input = { ...input, time: { ...time, final: at.final } }
    }
  }
  const out = await run(rule.emit, input)
  if (!out.ok) return { kind: 'failed', stage: 'emit', error: out.error }
  return emitted(out.value)
}

/**
 * What an `emit` produced, as a verdict: one PlatformWebSocketMessage, an array of them (several
 * messages in order; null items are skipped), or null (nothing). Anything else fails the whole emit.
 */
export function emitted(value: unknown): Verdict {
  const items = Array.isArray(value) ? value : [value]
  const messages: string[] = []
  for (const v of items) {
    if (v === null || v === undefined) continue
    if (!validator('platform-websocket-message')(v))
      return { kind: 'failed', stage: 'emit', error: 'the emitted value is not a PlatformWebSocketMessage' }
    messages.push(JSON.stringify(v))
  }
  return messages.length === 0 ? SILENT : { kind: 'result', messages }
}
