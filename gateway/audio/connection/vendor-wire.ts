import { frameOf, type MappingInput, run } from '../../mapping/run'
import {
  decodeMessages,
  encodeHeaders,
  eventStreamFrame,
  messageFromMapping,
  toMappingMessage
} from '../../mapping/event-stream'
import type { AudioMapping } from '../../mapping/audio'
import type { VendorTarget } from '../../mapping/vendor-target'
import type { Replica } from '../../upstream/pool'
import { openVendorLeg, type VendorLeg } from '../../upstream/vendor-leg'
import type { VendorEvents } from '../../upstream/ws-leg'
import { AudioEncoder, type FrameCounters, isIdentity, MediaTemplate } from '../feed/encoder'
import type { ConnectionContext } from './connection-contract'

/**
 * The wire of one vendor socket as its mapping's `frames.framing` sets it: frames the mapping produces
 * (open, keepalive, close, control replies) and binary frames the vendor sends. Plain sockets: objects
 * go as JSON text and binary vendor frames are not read (no audio flows towards the platform). An
 * event-stream socket (Amazon Transcribe): objects go as AWS event-stream messages, strings as text,
 * and binary vendor frames are decoded into `msg = {headers, body}`. Control path only.
 */

/** What sending needs of a vendor socket (upstream/ws-leg.ts VendorSocket). */
export interface FrameSink {
  readonly isOpen: boolean
  sendText(text: string): void
  sendBinary(data: Uint8Array): void
}

/**
 * Send the frame(s) a mapping expression produced (an array: several, in order), placeholders filled by
 * `fill`. A frame that cannot be built is skipped; the first such failure is returned (null: none).
 */
export function sendMapped(
  audio: AudioMapping,
  socket: FrameSink | null,
  value: unknown,
  fill: (text: string) => string
): string | null {
  let failure: string | null = null
  for (const v of Array.isArray(value) ? value : [value]) {
    let frame: string | Uint8Array | null
    try {
      frame = outgoingFrame(audio, v, fill)
    } catch (err) {
      failure ??= (err as Error).message
      continue
    }
    if (frame === null || socket?.isOpen !== true) continue
    if (typeof frame === 'string') socket.sendText(frame)
    else socket.sendBinary(frame)
  }
  return failure
}

/** One frame to send: text, binary, or nothing. Throws (EventStreamError) on an object that is not an event-stream message. */
export function outgoingFrame(
  audio: AudioMapping,
  value: unknown,
  fill: (text: string) => string
): string | Uint8Array | null {
  if (audio.frames.framing === 'event-stream') return eventStreamFrame(value, fill)
  const frame = frameOf(value)
  return frame === null ? null : fill(frame)
}

/**
 * The messages in a binary vendor frame: null when the socket does not read binary frames, an `error`
 * (the decoder's message) when the frame is malformed.
 */
export function incomingBinary(audio: AudioMapping, data: Uint8Array): unknown[] | null | { error: string } {
  if (audio.frames.framing !== 'event-stream') return null
  try {
    return decodeMessages(data).map(toMappingMessage)
  } catch (err) {
    return { error: (err as Error).message }
  }
}

/** The headers section of every audio message of an event-stream socket (`frames.headers`), once per socket; null otherwise. */
export async function audioEventHeaders(
  audio: AudioMapping,
  input: MappingInput
): Promise<{ ok: true; headers: Uint8Array | null } | { ok: false; error: string }> {
  if (audio.eventHeaders == null) return { ok: true, headers: null }
  const h = await run(audio.eventHeaders, input)
  if (!h.ok) return { ok: false, error: h.error }
  try {
    return { ok: true, headers: encodeHeaders(messageFromMapping({ headers: h.value }).headers) }
  } catch (err) {
    return { ok: false, error: `frames.headers: ${(err as Error).message}` }
  }
}

/**
 * The audio encoder of one socket: a media template's frames, event-stream messages with their headers,
 * or none (raw platform frames, written through). Built once the socket is open: the template reads the
 * mapping input.
 */
export async function socketEncoder(
  audio: AudioMapping,
  input: MappingInput,
  frames: FrameCounters,
  sink: FrameSink
): Promise<{ ok: true; encoder: AudioEncoder | null } | { ok: false; error: string }> {
  const to = { binary: (c: Uint8Array) => sink.sendBinary(c), text: (f: string) => sink.sendText(f) }
  if (audio.template !== null) {
    const t = await run(audio.template, input)
    if (!t.ok || t.value === null || typeof t.value !== 'object')
      return { ok: false, error: t.ok ? 'the template did not produce an object' : t.error }
    return { ok: true, encoder: new AudioEncoder(audio.frames, frames, new MediaTemplate(JSON.stringify(t.value)), to) }
  }
  if (isIdentity(audio.frames)) return { ok: true, encoder: null }
  const events = await audioEventHeaders(audio, input)
  if (!events.ok) return events
  return { ok: true, encoder: new AudioEncoder(audio.frames, frames, null, to, events.headers) }
}

/**
 * Opens the vendor leg of one connection (upstream/vendor-leg.ts) to `target`, the URL and headers its
 * mapping built for `replica`: with the call's `traceparent` unless the mapping set its own.
 */
export function openLeg(
  ctx: ConnectionContext,
  audio: AudioMapping,
  replica: Replica,
  target: Extract<VendorTarget, { ok: true }>,
  events: VendorEvents
): VendorLeg {
  const { url, headers } = target
  if (ctx.traceparent !== undefined && headers.traceparent === undefined) headers.traceparent = ctx.traceparent
  const connectTimeoutMs = ctx.settings.connectTimeoutSeconds * 1000
  const opts = { headers, connectTimeoutMs, grpc: audio.grpc ?? null, credential: replica.config.credential }
  return openVendorLeg(url, opts, ctx.clock, events)
}
