import type { AudioMapping } from '../../mapping/audio'
import { unhandled } from '../../result'
import type { ConnectionContext } from './connection-contract'
import type { Verdict } from './vendor-message'
import { incomingBinary } from './vendor-wire'

/**
 * What a vendor connection (audio/connection/vendor-connection.ts) does with what it reads, where its own
 * state is not at stake: binary frames decoded or dropped, and the verdicts that carry results.
 */

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
