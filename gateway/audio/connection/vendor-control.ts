import type { AudioMapping, ControlAudioView, ControlRule, PreviousSession } from '../../mapping/audio'
import type { Expr } from '../../mapping/expr'
import { type MappingInput, run, type SocketInput } from '../../mapping/run'
import type { ConnectionContext } from './connection-contract'
import type { FrameCounters } from '../feed/encoder'
import {
  type ResultPlace,
  emitted,
  type ReadPhase,
  type Reading,
  readVendorMessage,
  type Verdict
} from './vendor-message'

/**
 * Audio towards the vendor, as the vendor's control messages set it. open: audio flows. held: the feed
 * queues it (bounded, `audio.bufferBytes`, the backpressure policy) until a resume; what reaches the
 * connection anyway (a close's drain, a park's partial chunk) is discarded as below, never sent. discard: it is
 * dropped at the connection (counted, reason `vendor_paused`) and joins the stream timeline
 * (`{{position}}`) right after the resume rule's reply, as protocols that report discarded audio want
 * (AudioHook's `resumed {start, discarded}` is sent at `start`; the discarded stretch follows it).
 */
export type AudioGate = 'open' | 'paused' | 'discard'

/** A control rule of the mapping that matched a vendor message, and its place in the list. */
export interface Matched {
  readonly rule: ControlRule
  readonly index: number
}

/**
 * What one vendor message asks of its connection, step by step, in order (audio/connection/vendor-connection.ts acts
 * on each as it comes): `end` (a rule ends the session on the vendor's word), the mapping's `reading`
 * (closeWhen, readiness, results), `reply` frames to send, platform messages (`emit`, or its failure),
 * `resume` (the audio gate opens now: after the reply, so AudioHook's `resumed` goes out before the
 * audio), `reconnect`.
 */
export type ControlStep =
  | { readonly kind: 'end'; readonly after: 'failover' | 'leg'; readonly vendorMessage: string | undefined }
  | { readonly kind: 'reading'; readonly reading: Reading }
  | { readonly kind: 'reply'; readonly value: unknown }
  | { readonly kind: 'emit'; readonly verdict: Verdict }
  | { readonly kind: 'resume' }
  | { readonly kind: 'reconnect' }

/**
 * The control state of one vendor connection: the mapping's per-session `state` object
 * (`session.state`, updated by a rule's `set`), the audio gate and the audio timeline of pauses.
 * A message is matched (`match`), its rule's immediate part applied (`atOnce`), and the rest returned as
 * steps (`rest`) that the connection acts on; nothing here touches a socket.
 */
export class VendorControl {
  gate: AudioGate = 'open'
  state: Readonly<Record<string, unknown>> = {}
  private discardedMs = 0
  private pauseStartMs: number | null = null
  private pauseDiscardedMs = 0
  /** A resume rule of a discarding pause is under way: the discarded stretch joins the timeline at its `resume`. */
  private resumingDiscard = false

  private readonly rules: readonly ControlRule[]

  constructor(
    private readonly audio: AudioMapping,
    private readonly frames: FrameCounters,
    private readonly ctx: ConnectionContext
  ) {
    this.rules = audio.control ?? []
  }

  /**
   * Read one vendor message, as steps the connection acts on one by one (a step is acted on before the
   * next is worked out: an `end` takes the audio away before any later expression runs). Control rules
   * first; then, unless the matched rule ends the session, the mapping's reading (results only when no
   * rule matched); then the rest of the matched rule. While closing only a rule with `end` is tried, and
   * only its `set` applies: the close frame, when still to be built, tells the vendor's reason (AudioHook:
   * a `disconnect` read after the gateway decided to close still makes it close {reason: "disconnect"}).
   * `base`: the connection's input.
   */
  async *read(
    msg: unknown,
    phase: ReadPhase,
    base: SocketInput,
    place: ResultPlace | null = null
  ): AsyncGenerator<ControlStep> {
    const input = this.input(base, msg)
    const matched = await this.match(input, phase)
    if (phase === 'closing') {
      if (matched !== null && matched.rule.set !== null) await this.apply(matched.rule.set, input, matched.index)
      yield { kind: 'reading', reading: await readVendorMessage(this.audio, input, phase, matched === null, place) }
      return
    }
    const end = matched === null ? null : this.atOnce(matched, msg)
    if (end !== null) yield { kind: 'end', ...end }
    else yield { kind: 'reading', reading: await readVendorMessage(this.audio, input, phase, matched === null, place) }
    if (matched !== null) yield* await this.rest(matched, msg, base)
  }

  /**
   * The control rule that answers a vendor message (`input` holds it as `msg`): the first whose `when`
   * holds; a failing `when` is reported and read as false. While the connection is closing, only rules
   * that end the session are tried.
   */
  private async match(input: MappingInput, phase: ReadPhase): Promise<Matched | null> {
    for (const [index, rule] of this.rules.entries()) {
      if (phase === 'closing' && rule.end === null) continue
      const when = await run(rule.when, input)
      if (!when.ok) this.failed(index, 'when', when.error)
      else if (when.value === true) return { rule, index }
    }
    return null
  }

  /** An expression of rule `index` (-1: the keepalive's `set`) failed: counted and logged; the rule goes on. */
  private failed(index: number, stage: 'when' | 'set' | 'reply' | 'emit', error: string): void {
    const { metrics, route, log } = this.ctx
    metrics.mappingErrors.inc({ route: route.name, stage: `control_${stage}` })
    const at = index < 0 ? 'keepalive/set' : `control/${index}/${stage}`
    log.warn({ event: 'mapping_error', stage: at, error }, 'a control expression failed')
  }

  /** Per-frame path while discarding: counters only. Platform audio is 8 kHz µ-law: 8 bytes per ms. */
  discard(bytes: number): void {
    this.pauseDiscardedMs += bytes / 8
    this.ctx.counters.dropVendorPaused++
  }

  /** What a session that continues this one (reconnect, rotation) is told of it: mapping input `previous`. */
  handover(id: string): PreviousSession {
    return { id, seq: this.frames.seq, serverseq: this.frames.serverseq, state: this.state }
  }

  /** `base` with this socket's control state (`session.state`, `session.audio`) and `msg` (when given). */
  input(base: SocketInput, msg?: unknown): SocketInput {
    const session = { id: base.session.id, state: this.state, audio: this.timeline() }
    return msg === undefined ? { ...base, session } : { ...base, session, msg }
  }

  private timeline(): ControlAudioView {
    return {
      paused: this.gate !== 'open',
      positionMs: this.frames.audioMs,
      discardedMs: this.discardedMs,
      pauseStartMs: this.pauseStartMs,
      pauseDiscardedMs: this.pauseDiscardedMs
    }
  }

  /**
   * Evaluate a `set` (a rule's, or the keepalive's: `index` -1) and merge its object into the state
   * (shallow; null changes nothing). A failure or a non-object is reported and changes nothing.
   */
  async apply(set: Expr, input: MappingInput, index = -1): Promise<void> {
    const out = await run(set, input)
    if (!out.ok) return this.failed(index, 'set', out.error)
    const patch = out.value
    if (patch === null || patch === undefined) return
    if (typeof patch !== 'object' || Array.isArray(patch)) return this.failed(index, 'set', 'did not produce an object')
    this.state = { ...this.state, ...(patch as Record<string, unknown>) }
  }

  /**
   * What a matched rule does at once, before any other expression runs (audio may not wait on them):
   * audio stops (held or discarded) before a reply such as AudioHook's `paused` can go out. Returns the
   * rule's `end` (audio leaves this session now: the connection ends it; its close frame still follows
   * the rule's `set` and `reply`), or null.
   */
  private atOnce(m: Matched, msg: unknown): { after: 'failover' | 'leg'; vendorMessage: string | undefined } | null {
    const rule = m.rule
    if ((rule.audio === 'pause' || rule.audio === 'discard') && this.gate === 'open') {
      this.gate = rule.audio === 'pause' ? 'paused' : 'discard'
      this.pauseStartMs = this.frames.audioMs
      this.pauseDiscardedMs = 0
    }
    return rule.end === null ? null : { after: rule.end, vendorMessage: vendorText(msg) }
  }

  /**
   * The rest of a matched rule: `set` now (later expressions see the new state), then the steps for the
   * connection in order: `reply`, `emit`, `resume`, `reconnect`. A failing `set`/`reply`/`emit` is reported
   * and skipped; the other steps still come. `base`: the connection's mapping input.
   */
  private async rest(m: Matched, msg: unknown, base: SocketInput): Promise<ControlStep[]> {
    const { rule, index } = m
    const steps: ControlStep[] = []
    // Audio arriving while the resume's reply is built is held, not discarded. What was discarded (a
    // discarding pause, or held audio that reached the connection: a park's partial chunk) joins the timeline.
    if (rule.audio === 'resume' && this.gate !== 'open') {
      this.resumingDiscard = this.gate === 'discard' || this.pauseDiscardedMs > 0
      this.gate = 'paused'
    }
    if (rule.set !== null) await this.apply(rule.set, this.input(base, msg), index)
    if (rule.reply !== null) {
      const out = await run(rule.reply, this.input(base, msg))
      if (out.ok) steps.push({ kind: 'reply', value: out.value })
      else this.failed(index, 'reply', out.error)
    }
    if (rule.emit !== null) {
      const out = await run(rule.emit, this.input(base, msg))
      steps.push({
        kind: 'emit',
        verdict: out.ok ? emitted(out.value) : { kind: 'failed', stage: 'emit', error: out.error }
      })
    }
    if (rule.audio === 'resume') steps.push({ kind: 'resume' })
    if (rule.reconnect && rule.end === null) steps.push({ kind: 'reconnect' })
    return steps
  }

  /** A `resume` step: audio flows again; what was discarded joins the timeline (AudioHook: `resumed` is at `start`). */
  resume(): void {
    if (this.resumingDiscard) {
      this.frames.audioMs += this.pauseDiscardedMs
      this.discardedMs += this.pauseDiscardedMs
      this.resumingDiscard = false
    }
    this.gate = 'open'
  }
}

/** A short human text from a vendor control message, for logs and the ERROR's `vendorMessage` (never parsed). */
function vendorText(msg: unknown): string | undefined {
  const p = (msg as { parameters?: Record<string, unknown> } | null)?.parameters
  const text = p?.info ?? p?.reason ?? (msg as { reason?: unknown } | null)?.reason
  return typeof text === 'string' ? text.slice(0, 512) : undefined
}
