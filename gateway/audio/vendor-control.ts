import type { AudioMapping, ControlAudioView, ControlRule, PreviousSession } from '../mapping/audio'
import type { Expr } from '../mapping/expr'
import { type MappingInput, run } from '../mapping/run'
import type { ConnectionContext } from './connection-contract'
import type { FrameCounters } from './encoder'
import { emitted, type ReadPhase, type Reading, readVendorMessage, type Verdict } from './vendor-message'

/**
 * Audio towards the vendor, as the vendor's control messages set it. open: audio flows. held: the relay
 * queues it (bounded, `audio.bufferBytes`, the backpressure policy) until a resume. discard: it is
 * dropped at the connection (counted, reason `vendor_paused`) and joins the stream timeline
 * (`{{position}}`) right after the resume rule's reply, as protocols that report discarded audio want
 * (AudioHook's `resumed {start, discarded}` is sent at `start`; the discarded stretch follows it).
 */
export type AudioGate = 'open' | 'held' | 'discard'

/** What acting on a control rule needs of its vendor connection (audio/vendor-connection.ts). */
export interface ControlHost {
  /** The mapping input for `msg`, with the current `session.state` and `session.audio`. */
  input: (msg: unknown) => MappingInput
  /** Send frame(s) to the vendor, placeholders filled (an object, a string, an array, or null). */
  send: (value: unknown) => void
  /** Act on the mapping's reading of the message (readiness, closeWhen, results). */
  reading: (r: Reading) => void
  /** Platform messages (a `result` verdict) or a failed `emit`. */
  emit: (verdict: Verdict) => void
  /** End this vendor session: the mapping's close transaction, then failover or the end of the leg. */
  end: (then: 'failover' | 'leg', vendorMessage: string | undefined) => void
  /** Open a new vendor session on the same replica, make-before-break. */
  reconnect: () => void
}

/**
 * The control state of one vendor connection: the mapping's per-session `state` object
 * (`session.state`, updated by a rule's `set`), the audio gate and the audio timeline of pauses.
 * Rules are read by `match` and acted on by `act`; nothing here touches a socket.
 */
export class VendorControl {
  gate: AudioGate = 'open'
  state: Readonly<Record<string, unknown>> = {}
  private discardedMs = 0
  private pauseStartMs: number | null = null
  private pauseDiscardedMs = 0

  private readonly rules: readonly ControlRule[]

  constructor(
    private readonly audio: AudioMapping,
    private readonly frames: FrameCounters,
    private readonly ctx: ConnectionContext
  ) {
    this.rules = audio.control ?? []
  }

  /**
   * Read one vendor message: control rules first (not while closing), then, unless a matched rule ends
   * the session, the mapping's reading (closeWhen, readiness; results only when no rule matched), then
   * the rest of the matched rule. A matched rule answers for the message.
   */
  async read(msg: unknown, phase: ReadPhase, host: ControlHost): Promise<void> {
    const input = host.input(msg)
    const matched = phase === 'closing' ? null : await this.match(input)
    if (matched !== null) this.atOnce(matched.rule, msg, host)
    if (matched?.rule.end == null) host.reading(await readVendorMessage(this.audio, input, phase, matched === null))
    if (matched !== null) await this.act(matched.rule, matched.index, msg, host)
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
  input(base: MappingInput, msg?: unknown): MappingInput {
    const session = { id: base.session!.id, state: this.state, audio: this.timeline() }
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

  /** The first rule whose `when` holds (a failing `when` is reported and read as false), or null. */
  private async match(input: MappingInput): Promise<{ rule: ControlRule; index: number } | null> {
    for (const [index, rule] of this.rules.entries()) {
      const when = await run(rule.when, input)
      if (!when.ok) this.failed(index, 'when', when.error)
      else if (when.value === true) return { rule, index }
    }
    return null
  }

  /**
   * What a matched rule does at once, before any other expression runs (audio may not wait on them):
   * audio stops (held or discarded) before a reply such as AudioHook's `paused` can go out, and an `end`
   * takes the audio away from this session now (its close frame still follows the rule's `set` and
   * `reply`: it is sent on the control chain, after this message's work).
   */
  private atOnce(rule: ControlRule, msg: unknown, host: ControlHost): void {
    if ((rule.audio === 'pause' || rule.audio === 'discard') && this.gate === 'open') {
      this.gate = rule.audio === 'pause' ? 'held' : 'discard'
      this.pauseStartMs = this.frames.audioMs
      this.pauseDiscardedMs = 0
    }
    if (rule.end !== null) host.end(rule.end, vendorText(msg))
  }

  /**
   * The rest of a matched rule, in this order: `set` (later expressions see the new state), `reply`,
   * `emit`, resume (after the reply: AudioHook's `resumed` goes out before the audio; audio arriving
   * meanwhile is held, not discarded; discarded audio joins the timeline), then `reconnect`.
   * A failing `set`/`reply`/`emit` is reported and skipped; the actions still happen.
   */
  private async act(rule: ControlRule, index: number, msg: unknown, host: ControlHost): Promise<void> {
    // Audio arriving while the resume's reply is built is held, not discarded.
    const discarded = rule.audio === 'resume' && this.gate === 'discard'
    if (discarded) this.gate = 'held'
    if (rule.set !== null) await this.apply(rule.set, host.input(msg), index)
    if (rule.reply !== null) {
      const out = await run(rule.reply, host.input(msg))
      if (out.ok) host.send(out.value)
      else this.failed(index, 'reply', out.error)
    }
    if (rule.emit !== null) {
      const out = await run(rule.emit, host.input(msg))
      host.emit(out.ok ? emitted(out.value) : { kind: 'failed', stage: 'emit', error: out.error })
    }
    if (discarded) {
      // What was discarded joins the timeline after the reply (AudioHook: `resumed` is at `start`).
      this.frames.audioMs += this.pauseDiscardedMs
      this.discardedMs += this.pauseDiscardedMs
    }
    if (rule.audio === 'resume') this.gate = 'open'
    if (rule.reconnect && rule.end === null) host.reconnect()
  }
}

/** A short human text from a vendor control message, for logs and the ERROR's `vendorMessage` (never parsed). */
function vendorText(msg: unknown): string | undefined {
  const p = (msg as { parameters?: Record<string, unknown> } | null)?.parameters
  const text = p?.info ?? p?.reason ?? (msg as { reason?: unknown } | null)?.reason
  return typeof text === 'string' ? text.slice(0, 512) : undefined
}
