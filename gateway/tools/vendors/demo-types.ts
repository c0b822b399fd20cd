import type { Clock } from '../../clock'
import type { EmulatorHandle, RecordedSession } from './recorder'

/** The public shapes of the bundled demo vendors (passthrough, json-events): see ../vendor-emulator.ts. */

export type EmulatorKind = 'passthrough' | 'json-events'

export interface EmulatorOptions {
  kind: EmulatorKind
  /** 0 = ephemeral (default). */
  port?: number
  /** Default 127.0.0.1. */
  host?: string
  /** Default 50; 0 = never. */
  resultEveryFrames?: number
  /** Count resultEveryFrames in 20 ms of µ-law audio (160 bytes) rather than in messages; default false. */
  resultsByAudio?: boolean
  /** Default 0: delay before the ready answer. */
  readyDelayMs?: number
  /** passthrough: required authenticationToken. */
  token?: string
  /**
   * Default 0: results sent right after the open message, before the ready answer (a vendor that
   * answers before its handshake); json-events `transcript` / passthrough MESSAGE, text "early <n>".
   */
  earlyResults?: number
  /**
   * Default false: echo what the session received (upgrade URL, headers, open message, unredacted) in
   * the ready answer's parameters (passthrough), in a result right after ready, and in refusals, like a
   * careless vendor that reflects its input. For tests that the gateway never passes a secret on.
   */
  echo?: boolean
  /** Where the ready delay is armed. Default: wall time (tests may pass a fake clock). */
  clock?: Clock
  /** Default: no logging. */
  log?: (line: string) => void
  /** Text endpoints: how to answer (changeable later with setText). */
  text?: TextBehaviour
  /** This emulator's name, in every session report (`vendor`) and log line: tells a route's tee vendors apart. */
  name?: string
  /** Answer every WebSocket upgrade with this HTTP status (e.g. 403): a vendor that refuses sessions. */
  refuseUpgrade?: number
}

/**
 * How the text endpoints answer. Text requests: passthrough takes the platform's JSON
 * (WebHooksMessagesRequest) by POST on any path but the report paths and answers a
 * PlatformWebSocketMessage-shaped JSON; json-events takes its own REST shape,
 * `POST /v1/conversations/{conversationId}/messages` with `{conversationId, businessUnit, tenant,
 * role: customer|agent|system, text, attachments?, config?}` (strict: unknown fields, wrong types or a
 * conversationId unlike the path's are 400) and answers `{data: {conversationId, role, reply,
 * suggestions}, meta}`.
 */
export interface TextBehaviour {
  /** Wait this long before answering (default 0). */
  delayMs?: number
  /** Never answer: the request stays open until the client gives up or the emulator closes. */
  hang?: boolean
  /** Answer every valid request with this status (e.g. 500, 502) and a JSON error body. */
  status?: number
  /** Required credential: json-events `authorization: Bearer <token>`; passthrough body `authorizationHeader`. 401 otherwise. */
  token?: string
}

export interface TextRequestReport {
  id: number
  method: string
  path: string
  /** Request headers as received, with authorization redacted. */
  headers: Record<string, string>
  /** Parsed JSON (authorizationHeader redacted), or {unparsed: "<n> chars"}. */
  body: unknown
  /** Status answered; null while unanswered (slow or hanging). */
  status: number | null
  /** The validation problem, when the request was refused as malformed. */
  error: string | null
  receivedAt: number
}

/** A demo session: what every emulator records (frames, bytes, sha256 of the binary payloads, texts after
 * the first, errors, close) plus the opening message and when frames came. */
export interface SessionReport extends RecordedSession {
  id: number
  kind: EmulatorKind
  path: string
  /** First text message, parsed; authenticationToken replaced by "[REDACTED]". */
  open: unknown
  ready: boolean
  firstFrameAt: number | null
  lastFrameAt: number | null
}

/** A demo emulator (`url`: ws://host:port/stream). */
export interface VendorEmulator extends EmulatorHandle<EmulatorKind> {
  sessions(): SessionReport[]
  /** Text requests received (the last 10,000), oldest first. */
  textRequests(): TextRequestReport[]
  /** Change how the text endpoints answer from now on. */
  setText(behaviour: TextBehaviour): void
  /** WebSocket upgrades refused (option refuseUpgrade). */
  refusedUpgrades(): number
}
