import type { ChannelReport } from './stereo'
import type { Clock } from '../../clock'
import type { EmulatorHandle, RecordedSession } from './recorder'

/** The public shapes of the strict real-vendor emulators (see ../real-vendors.ts for what each checks). */

/** AWS keys the amazon-transcribe emulator accepts (a real account's; tests pass their own). */
export interface AwsKeys {
  accessKeyId: string
  secretAccessKey: string
  sessionToken?: string
}

export type RealVendorKind =
  | 'deepgram'
  | 'assemblyai'
  | 'twilio-media'
  | 'audiohook'
  | 'amazon-transcribe'
  | 'speechmatics'
  | 'openai'

export interface RealVendorOptions {
  kind: RealVendorKind
  /** 0 = ephemeral (default). */
  port?: number
  /** Default 127.0.0.1. */
  host?: string
  /**
   * Required credential; absent: none checked. deepgram: `Authorization: Token|Bearer <key>`
   * (or subprotocol `token, <key>`); assemblyai: `Authorization: <key>`; twilio-media:
   * `Authorization: Bearer <key>` or a valid `X-Twilio-Signature` made with this key as auth token;
   * audiohook: `X-API-KEY: <key>`. amazon-transcribe: see `aws`.
   */
  apiKey?: string
  /** amazon-transcribe: the AWS keys a presigned URL must be signed with (absent: signatures not checked). */
  aws?: AwsKeys
  /** openai: answer the first `first` chat completion requests 429 with `retry-after: retryAfterSeconds`. */
  chatRateLimit?: { first: number; retryAfterSeconds: number }
  /**
   * openai: where the HTTP API lives (default `/v1`, as at api.openai.com): `<basePath>/chat/completions` and
   * `<basePath>/models`, e.g. `/proxy/openai/v1` for a server behind a path prefix. Any other path is answered
   * 404 and recorded (`httpRequests`), so a test sees where a client went.
   */
  basePath?: string
  /**
   * openai: answer chat completions with a server-sent event stream (`text/event-stream`: chat.completion.chunk
   * events, then `data: [DONE]`) whatever the request asked, as a proxy that forces streaming would.
   */
  chatEventStream?: boolean
  /** speechmatics: RecognitionStarted this long after StartRecognition (default 0). */
  startDelayMs?: number
  /** amazon-transcribe: after this much audio, send this exception (then close), as the service does on an error. */
  transcribeException?: { afterAudioMs: number; type: string; message: string }
  /** Results cadence, in milliseconds of audio received. Default 1000; 0 = never. */
  resultEveryMs?: number
  /** speechmatics: after this much audio in a session, an Error (internal_error) and close 1011, as on a server fault. */
  failAfterAudioMs?: number
  /**
   * deepgram, speechmatics, amazon-transcribe, assemblyai, audiohook: transcribe what it hears (issue 32): a
   * result's transcript names the platform frames it covers, "frames A-B", read from each 20 ms frame's marker
   * (4 zero bytes, then the frame number as a 32-bit big-endian integer; frames without one are not named),
   * per channel on a stereo session, with the vendor's own time fields (tools/vendors/hearing.ts).
   */
  transcribeFrames?: boolean
  /**
   * deepgram: close 1011 (NET-0001) after this long with neither audio nor KeepAlive. Default
   * 10000, like the real service. amazon-transcribe: no audio for this long → BadRequestException (default
   * 15000, like the real service). assemblyai: inactivity timeout when the client did not ask for
   * one with `inactivity_timeout` (only if this option is given; the real service has none by default).
   */
  idleCloseMs?: number
  /**
   * assemblyai: when the client asked for `inactivity_timeout` (seconds, 5-3600), close after this
   * many milliseconds instead. Default: the client's value, like the real service; tests shorten it.
   */
  inactivityTimeoutMs?: number
  /** assemblyai: session cap (real: 3 h, close 3008). Default 3 h. openai: the session's cap (default 30 min). */
  sessionMaxMs?: number
  /** audiohook: what the server does on its own (startPaused, pause/resume, disconnect, reconnect, events). */
  audiohook?: AudioHookScript
  /** Where timers are armed and idle time is read. Default: wall time (tests may pass a fake clock). */
  clock?: Clock
  /** Default: no logging. */
  log?: (line: string) => void
  /** This emulator's name, in every session report (`vendor`) and log line: tells a route's tee vendors apart. */
  name?: string
  /**
   * Read the audio as sequenced frames (bytes 0-7 send time, 8-11 sequence number, 12-15 stream id in each
   * 160-byte frame; see sequence.ts) and report, per session, which numbers arrived and when (`sequence`).
   * For loss accounting under faults (`npm run bench -- soak`). Default false.
   */
  sequencedFrames?: boolean
  /** Keep the first N binary frames each session receives, as base64, in its report (`rawFrames`): for wire-format checks. */
  recordFrames?: number
}

/**
 * An AudioHook server's own moves, for tests. Times are ms after the session's `opened` on the emulator's
 * clock; each step applies to one session (`session`: the emulator's session id, 1 = the first; default 1).
 */
export interface AudioHookScript {
  /** Answer `open` with `opened {startPaused: true}` (the server sends `resume` when a step says so). */
  startPaused?: boolean
  /** Answer `open` with `disconnect {reason, info}` instead of `opened` (a refusal); then expect close → closed. */
  refuse?: { reason: 'unauthorized' | 'error' | 'completed'; info?: string }
  /** Server messages: pause, resume, disconnect {reason, info}, reconnect {info}, event {entities}. */
  steps?: readonly {
    afterMs: number
    type: 'pause' | 'resume' | 'disconnect' | 'reconnect' | 'event'
    parameters?: Record<string, unknown>
    session?: number
  }[]
}

/**
 * What the AudioHook emulator records of the server's own moves. `serverSent`: types of the server's
 * messages in order. `framesAfterPause` / `framesAfterDisconnect`: audio frames that arrived after the
 * server sent `pause` (before the client's `paused`) / after it sent `disconnect` (before `close`), allowed
 * in flight; any audio while paused or after `close` is a protocol error in `errors`.
 */
export interface AudioHookReport {
  serverSent: string[]
  framesAfterPause: number
  framesAfterDisconnect: number
}

/** A real-vendor session: what every emulator records plus the upgrade request and the vendor's own counters. */
export interface RealVendorSession extends RecordedSession {
  id: number
  kind: RealVendorKind
  path: string
  query: Record<string, string>
  /** Upgrade request headers, lower-cased; credential values replaced by "[REDACTED]". */
  headers: Record<string, string>
  /** Decoded payload bytes for JSON-base64 formats. */
  audioBytes: number
  /** deepgram: KeepAlive messages; audiohook: pings; the other kinds: 0. */
  keepalives: number
  /** audiohook: whether `Signature` and `Signature-Input` were both present (not verified); else null. */
  signed: boolean | null
  /** audiohook: a connection probe (open with the null conversation id), not a billable session; else false. */
  probe: boolean
  /** audiohook: the server's own moves (see AudioHookReport); absent for other kinds. */
  audiohook?: AudioHookReport
  /** A stereo session (deepgram multichannel=true&channels=2, audiohook two-channel media): each channel, deinterleaved. */
  channels?: ChannelReport[]
  /** The first audio frames received (option `recordFrames`): binary ones as base64, JSON audio events as their text. */
  rawFrames?: string[]
}

/** A real-vendor emulator (`url`: ws://host:port/<vendor path>); its close clears every timer too. */
export interface RealVendorEmulator extends EmulatorHandle<RealVendorKind> {
  /** Every session but connection probes (refused upgrades included). */
  sessions(): RealVendorSession[]
  /** audiohook: the connection-probe sessions (empty for the other vendors). */
  probes(): RealVendorSession[]
  /** HTTP requests answered on the vendor's own API paths (assemblyai /v3/token, openai /v1/chat/completions), in order. */
  httpRequests(): HttpRequestRecord[]
  /**
   * Stops reading every session socket, and those accepted from now on (a vendor that falls behind: the
   * sender's buffers fill up); upgrades and the HTTP side are still answered.
   */
  pauseAll(): void
  /** Open sessions now (connection probes included). */
  openSessions(): number
}

/** One request to a vendor's own HTTP API: its answer status, JSON body (parsed) and headers (credentials redacted). */
export interface HttpRequestRecord {
  method: string
  path: string
  status: number
  body?: unknown
  headers?: Record<string, string>
}

/** WebSocket path of each emulated API. */
export const REAL_VENDOR_PATHS: Readonly<Record<RealVendorKind, string>> = Object.freeze({
  deepgram: '/v1/listen',
  assemblyai: '/v3/ws',
  'twilio-media': '/media',
  audiohook: '/api/v1/audiohook/ws',
  'amazon-transcribe': '/stream-transcription-websocket',
  speechmatics: '/v2',
  openai: '/v1/realtime'
})
