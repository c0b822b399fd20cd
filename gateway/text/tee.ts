import type { TextInput } from '../mapping/text'
import type { Metrics } from '../telemetry/metrics'
import type { TraceSpan } from '../telemetry/tracing'
import type { DeliveryQueue } from './delivery-queue'

/** What a delivery reports (text/utterance.ts `TextResult` has this shape). */
type Delivered = { readonly ok: true } | { readonly ok: false; readonly error: { readonly code: string } }

/** One tee vendor of a route's text hook: how to reach it (`target`: its own mapping and pool) and its queue. */
export interface TextTee<R> {
  readonly name: string
  /** The primary route's name (the metric label). */
  readonly route: string
  readonly target: R
  /** `route` of the tee's mapping input: the primary route's name and token rule, the tee's params. */
  readonly inputRoute: TextInput['route']
  /** Its own bounded background queue (text.asyncQueueSize, text.asyncConcurrency). */
  readonly queue: DeliveryQueue
}

/**
 * The text fan-out of one route: each accepted utterance is offered to every tee's own delivery queue
 * and delivered in the background (fire-and-forget). The primary answer never waits for a tee and is
 * never changed by one; a full queue drops the tee's copy (counted). A tee delivery starts on a later
 * turn of the event loop than the primary's own call.
 */
export class TextTees<R> {
  constructor(
    private readonly tees: readonly TextTee<R>[],
    private readonly deliver: (target: R, input: TextInput, span: TraceSpan, namespace: string) => Promise<Delivered>,
    private readonly metrics: Metrics
  ) {}

  /** Deliveries accepted and not yet finished (a drain waits for them). */
  get outstanding(): number {
    let n = 0
    for (const t of this.tees) n += t.queue.outstanding
    return n
  }

  get targets(): readonly R[] {
    return this.tees.map(t => t.target)
  }

  /**
   * Offer `input` (already checked and normalized) to every tee. Never throws, never waits. `namespace`: the
   * tenant's on the route (route.ts `namespaceOf`); a tee's shared setup results are kept under its own name in it.
   */
  send(input: TextInput, span: TraceSpan, namespace: string): void {
    for (const tee of this.tees) {
      // Its own input: the request builder writes `upstream` (and the answer `response`) into it.
      const own: TextInput = { ...input, route: tee.inputRoute }
      const accepted = tee.queue.offer(async () => {
        await new Promise<void>(resolve => setImmediate(resolve))
        const step = span.child('tee', { 'assist_gateway.tee': tee.name })
        const out = await this.deliver(tee.target, own, step, `${namespace}/${tee.name}`)
        step.end(out.ok ? undefined : out.error.code)
        this.count(tee, out.ok ? 'ok' : out.error.code.toLowerCase())
      })
      if (!accepted) this.count(tee, 'queue_full')
    }
  }

  private count(tee: TextTee<R>, result: string): void {
    this.metrics.textTeeDeliveries.inc({ route: tee.route, tee: tee.name, result })
  }
}
