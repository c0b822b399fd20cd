import type { AudioMapping } from '../../mapping/audio'
import { unhandled } from '../../result'
import type { ConnectionContext } from './connection-contract'
import type { ControlStep } from './vendor-control'
import type { Verdict } from './vendor-message'
import { incomingBinary } from './vendor-wire'

/**
 * What a vendor connection (audio/connection/vendor-connection.ts) does with what it reads: each step of a
 * vendor message to its action, and where its own state is not at stake, binary frames decoded or dropped
 * and the verdicts that carry results.
 */

/**
 * What a connection does for each kind of step of a vendor message (audio/connection/vendor-control.ts `read`):
 * one action a kind, so a new kind is a compile error where the actions are listed, never a silent reconnect.
 */
export type StepActions = {
  readonly [K in ControlStep['kind']]: (step: Extract<ControlStep, { readonly kind: K }>) => void
}

/** The action of `step`'s kind. Per vendor message, not per audio frame. */
export function actOnStep(step: ControlStep, on: StepActions): void {
  // `on[step.kind]` takes exactly this kind of step: TypeScript does not relate the two by itself.
  ;(on[step.kind] as (s: ControlStep) => void)(step)
}

/** What a vendor message means once the connection's own state is not at stake (all but ready and refused). */
export type ResultVerdict = Exclude<Verdict, { kind: 'ready' } | { kind: 'refused' }>

/**
 * A result-side verdict of a vendor message (audio/connection/vendor-message.ts): its messages go to the
 * platform through `emit`, in order; the rest is counted, and a result the mapping failed on is logged.
 */
export function actOnResult(
  ctx: ConnectionContext,
  v: ResultVerdict,
  emit: (text: string, channel: number | null | undefined) => void
): void {
  const { route, metrics } = ctx
  switch (v.kind) {
    case 'result':
      for (const m of v.messages) emit(m, v.channel)
      return
    case 'unmatched':
      metrics.vendorMessages.inc({ route: route.name, result: 'unmatched' })
      return
    case 'failed':
      metrics.vendorMessages.inc({ route: route.name, result: 'error' })
      metrics.mappingErrors.inc({ route: route.name, stage: `result_${v.stage}` })
      ctx.log.warn(
        { event: 'mapping_error', stage: v.stage, mapping: route.mapping.file, error: v.error },
        'a vendor result could not be mapped; the leg goes on'
      )
      return
    case 'silent':
      return
    case 'before-delivered':
      // A replay transcribed again what the platform has a final for (audio/feed/result-timeline.ts).
      metrics.vendorMessages.inc({ route: route.name, result: 'before_delivered' })
      return
    default:
      return unhandled(v)
  }
}

/**
 * The messages of a binary vendor frame (audio/connection/vendor-wire.ts `incomingBinary`): null when the
 * socket reads none (dropped, counted); none when the frame is unreadable (counted, logged).
 */
export function binaryMessages(ctx: ConnectionContext, audio: AudioMapping, data: Uint8Array): unknown[] | null {
  const messages = incomingBinary(audio, data)
  if (messages === null) {
    ctx.counters.dropVendorBinary++
    ctx.counters.bytesFromVendor += data.length
    return null
  }
  if (Array.isArray(messages)) return messages
  ctx.metrics.vendorMessages.inc({ route: ctx.route.name, result: 'error' })
  ctx.log.warn({ event: 'vendor_frame_invalid', error: messages.error }, 'a vendor frame was unreadable')
  return []
}
