import type { Admission } from '../auth/admission'
import type { GatewayError } from '../errors'
import type { RouteRuntime } from '../route'
import type { TraceSpan } from '../telemetry/tracing'
import type { Problem } from '../validate/compile'

// What the text hook (text/utterance.ts) takes from the server and gives back to it.

/** One text hook request, copied out of the server's request object. */
export interface IncomingUtterance {
  route: RouteRuntime
  body: Buffer
  /** The Authorization header ('' when absent). */
  authorization: string
  requestId: string
  /** The utterance's span: each step is a child of it, and the vendor call carries the trace on (telemetry/tracing.ts). */
  span: TraceSpan
  /** The platform's address: the failure budget's key. */
  address: string
  /** The gateway's failure budget (auth/admission.ts): it judges the credential step. */
  admission: Admission
  /** Whose utterance it is: set by the text hook once its credential is accepted (the access line's `tenant`). */
  tenant?: string
}

/**
 * What the server renders: a JSON answer (already encoded), or a catalogued error as problem+json. `quiet`:
 * a refusal whose `text_refused` line the flood cap left out (telemetry/log-limit.ts): its access line is too.
 */
export type TextResult =
  | { ok: true; status: 200 | 202; json: string; upstream?: string }
  | {
      ok: false
      error: GatewayError
      problems: readonly Problem[]
      extra: Record<string, unknown>
      upstream?: string
      quiet?: boolean
    }
