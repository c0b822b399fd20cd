import type { Clock } from '../clock'
import { grpcTarget, isGrpcUrl } from './grpc-url'
import type { GrpcMethod } from './protos'
import { type VendorEvents, VendorSocket } from './ws-leg'

/**
 * One vendor session's transport as a vendor connection (audio/connection/vendor-connection.ts) drives it:
 * a WebSocket (upstream/ws-leg.ts) or a gRPC stream (upstream/grpc-leg.ts) behind the same shape.
 */
export type VendorLeg = Pick<
  VendorSocket,
  | 'isOpen'
  | 'bufferedAmount'
  | 'bytesSent'
  | 'unreadAtLoss'
  | 'sendBinary'
  | 'sendText'
  | 'startHeartbeat'
  | 'pingNow'
  | 'pinging'
  | 'pause'
  | 'resume'
  | 'close'
  | 'terminate'
>

/**
 * Opens the transport `url` names: a call of the mapping's `audio.grpc` method for `grpcs://`/`grpc://`,
 * otherwise a WebSocket (`check` refuses a route whose replica URLs do not fit its mapping).
 */
export function openVendorLeg(
  url: string,
  opts: {
    headers: Record<string, string>
    connectTimeoutMs: number
    grpc: GrpcMethod | null
    /** The replica's credential: with `grpc.auth: google`, the call's credentials are made from it. */
    credential?: string
  },
  clock: Clock,
  events: VendorEvents
): VendorLeg {
  const method = opts.grpc
  if (isGrpcUrl(url) && method !== null) {
    // Required here, not imported: a process without a gRPC route never loads @grpc/grpc-js or
    // google-auth-library (about 0.3 s of start-up on a 2-core machine, paid by every worker).
    const { GrpcStream } = require('./grpc-leg') as typeof import('./grpc-leg')
    const { googleAuthHeaders } = require('./google-auth') as typeof import('./google-auth')
    const google = method.auth === 'google' && opts.credential !== undefined ? opts.credential : null
    // Built inside the stream's start, so a bad key fails that one call (reported as a refusal), never the process.
    const authHeaders =
      google === null ? undefined : async () => await googleAuthHeaders(google, grpcTarget(url).address)()
    return new GrpcStream(url, { ...opts, method, authHeaders }, clock, events)
  }
  return new VendorSocket(url, opts, clock, events)
}
