import type { CompileAt, Expr } from './expr'
import type { GrpcMethod } from '../upstream/protos'
import type { GrpcStep } from './steps'

/** The one input object every audio expression sees (documented in schemas/mapping.schema.json). */
export interface MappingInput {
  init: Record<string, unknown>
  leg: { id: string; route: string; perspective: string; contactId: string; busNo: string; requestId: string | null }
  route: { name: string; params: Readonly<Record<string, unknown>>; checksToken: boolean }
  /**
   * The replica. `textPath`, the path of its text URL without trailing slashes ("" for none), is set for
   * health probes (an `http` probe aimed at the text URL is appended to it, as text requests are).
   */
  upstream: { name: string; audio: string | null; credential: string | null; hasCredential: boolean; textPath?: string }
  /** The vendor socket being opened: a fresh id per socket (failover and rotation open new ones). */
  session?: { id: string; state?: Readonly<Record<string, unknown>>; audio?: ControlAudioView }
  /** The results of the mapping's setup steps so far (`audio.setup`), by step name: only with a gRPC mapping's steps. */
  steps?: Record<string, unknown>
  /** The vendor socket a new one continues (a control rule's `reconnect`, rotation): absent otherwise. */
  previous?: PreviousSession
  /**
   * The leg came back after another instance drained it: that instance's last vendor socket on this
   * replica (its `session.id` and frame counters). Absent otherwise.
   */
  continued?: { id: string; seq: number; serverseq: number; chunk: number; audioMs: number }
  msg?: unknown
  /** A result's audio stretch on the call's timeline, in seconds (`audio.time`): only in a result's `emit`. */
  time?: { start: number; end: number; duration: number; final: boolean }
  /** One item of a result rule's `each` (a result of its own): only in that rule's `emit` and in `audio.time`. */
  item?: unknown
}

/** The input of one vendor socket's expressions: with its `session`. */
export type SocketInput = MappingInput & { readonly session: NonNullable<MappingInput['session']> }

/**
 * What control expressions read of the vendor socket's audio timeline (`session.audio`), in ms:
 * `paused` the vendor has audio held or discarded now, `positionMs` audio on the timeline (sent, and
 * discarded once a resume reported it), `discardedMs` discarded and reported in all, `pauseStartMs` where
 * the current or last pause began (null: none yet), `pauseDiscardedMs` discarded since.
 */
export interface ControlAudioView {
  paused: boolean
  positionMs: number
  discardedMs: number
  pauseStartMs: number | null
  pauseDiscardedMs: number
}

/** `previous`: the session id, the last `seq` sent and `serverseq` seen, and the control state of the old socket. */
export interface PreviousSession {
  id: string
  seq: number
  serverseq: number
  state: Readonly<Record<string, unknown>>
}

/** One `audio.control` rule, compiled (schemas/mapping.schema.json `audio.control`). */
export interface ControlRule {
  when: Expr
  set: Expr | null
  reply: Expr | null
  emit: Expr | null
  audio: 'pause' | 'discard' | 'resume' | null
  end: 'failover' | 'leg' | null
  reconnect: boolean
}

/** What a mapping's `audio.frames` asks for (schemas/mapping.schema.json). */
export interface FramesSpec {
  /** event-stream: every binary message on the socket, both ways, is an AWS event-stream message (mapping/event-stream.ts). */
  framing: 'binary' | 'json-base64' | 'event-stream'
  encoding: 'mulaw' | 'pcm16'
  sampleRate: 8000 | 16000 | 24000
  /** Vendor chunk length; null: one vendor frame per platform frame. */
  chunkMs: number | null
  /** 1: one leg's mono audio; 2: a joined contact's stereo, interleaved sample by sample (route `join`). */
  channels?: 1 | 2
}

/** The audio section of a mapping file, compiled (format: schemas/mapping.schema.json `audio`). */
export interface AudioMapping {
  url: Expr | null
  headers: Expr | null
  /** `sign`: the URL is signed with the replica's `signing` keys (mapping/vendor-target.ts); absent in hand-built mappings. */
  sign?: UrlSigning | null
  open: Expr | null
  /** Null: not given, or without a `when` (a problem: the mapping is not used). */
  ready: { when: Expr; refused: Expr | null; reason: Expr | null; parameters: Expr | null } | null
  frames: FramesSpec
  template: Expr | null
  /** event-stream framing: the headers of every audio message (`frames.headers`), evaluated once per socket. */
  eventHeaders?: Expr | null
  keepalive: { everyMs: number; when: 'idle' | 'always'; frame: Expr; set?: Expr | null } | null
  /** Vendor control rules, read before `results` (absent in hand-built mappings: none). */
  control?: ControlRule[]
  /**
   * `channel`: which leg of a joined session a result goes to (a channel number; else both). `each`: the
   * items of a message that are results of their own (`emit` and `time` evaluated once per item, as `item`).
   */
  results: { when: Expr; emit: Expr; channel?: Expr | null; each?: Expr | null }[]
  pause: Expr | null
  resume: Expr | null
  close: Expr | null
  closeWhen: Expr | null
  closeTimeoutMs: number
  closeCode: number
  rotateAfterMs: number | null
  /** The mapping's `rotateAfterAudioSeconds` in ms of audio (null or absent: no rotation by audio). */
  rotateAfterAudioMs?: number | null
  /** Its own ping interval and pong timeout (`liveness`), instead of the config's; null: the config's. */
  liveness: { pingSeconds?: number; timeoutSeconds?: number } | null
  /** A call may move to a new vendor session on another replica mid-call (`movable`): load rebalancing. */
  movable: boolean
  /** Highest replay rate (× real time) the vendor takes: `replayRate`, 1 when `realTimeOnly`, else null (the gateway's). */
  replayRate: number | null
  /** The vendor's close codes by meaning (`closeCodes`). */
  closeCodes: Readonly<Record<number, CloseClass>>
  /** Where on the audio a result is (`time`); null: the vendor gives no result times (absent in hand-built mappings: null). */
  time?: ResultTime | null
  /** A gRPC vendor: the streaming method each session is one call of (`audio.grpc`); absent or null: WebSocket. */
  grpc?: GrpcMethod | null
  /** Unary calls before each stream opens (`audio.setup`) and when the leg ends (`audio.teardown`): mapping/steps.ts. */
  setup?: readonly GrpcStep[]
  teardown?: readonly GrpcStep[]
  /** How long the contact's shared step results are kept (`grpc.shareSeconds`), in ms. */
  shareMs?: number
}

/**
 * `audio.time`: a result's audio stretch, from the start of its vendor session's audio, in `unitMs`
 * (1000: seconds; 1: milliseconds), or as ISO 8601 durations (`iso8601`: "PT1.23S", mapping/iso-duration.ts);
 * `end` or `duration` is given; `final`: the result will not be revised. Evaluated per result: per item of a
 * result rule with `each` (the item as `item`), else per message.
 */
export interface ResultTime {
  readonly start: Expr
  readonly end: Expr | null
  readonly duration: Expr | null
  readonly unitMs: number
  readonly iso8601?: boolean
  readonly final: Expr
}

/** The units `audio.time` takes (schemas/mapping.schema.json): ms per unit; iso8601 strings are read as ms. */
const TIME_UNIT_MS: Readonly<Record<string, number>> = { seconds: 1000, milliseconds: 1, iso8601: 1 }

/** `audio.sign`: how the vendor URL is signed (schemas/mapping.schema.json). */
export interface UrlSigning {
  scheme: 'aws-sigv4'
  service: string
  region: Expr
  expiresSeconds: number
}

/** What a vendor close code means (mapping `audio.closeCodes`). */
export type CloseClass = 'auth' | 'bad-request' | 'rate-exceeded' | 'transient'

/** Records what the schema cannot say about the section: the pointer and why. */
type Problem = (pointer: string, message: string) => void

/**
 * Compile the audio section, as the validator leaves it: valid against schemas/mapping.schema.json, with
 * the schema's defaults filled in (their one home; validate/compile.ts `useDefaults`). `expr` records an
 * expression that does not compile; `problem` records what the schema cannot say.
 */
export function compileAudio(
  a: Record<string, any>,
  expr: CompileAt,
  problem: Problem,
  grpc: GrpcMethod | null = null,
  defaultCloseCodes: Readonly<Record<number, CloseClass>> = {}
): AudioMapping {
  // A section built by hand (tests), not by the validator, may have no frames at all.
  const f: Record<string, any> = a.frames ?? {}
  const frames = compileFrames(f, problem)
  // In this order: a problem list names expressions that do not compile in the order of the section's keys.
  const url = expr('/audio/url', a.url)
  const headers = expr('/audio/headers', a.headers)
  const sign = compileSign(a.sign, expr)
  const open = expr('/audio/open', a.open)
  const ready = compileReady(a.ready, expr)
  const audio: AudioMapping = {
    url,
    headers,
    sign,
    open,
    ready: ready.ready,
    frames,
    template: frames.framing === 'json-base64' ? expr('/audio/frames/template', f.template) : null,
    eventHeaders: frames.framing === 'event-stream' ? expr('/audio/frames/headers', f.headers) : null,
    keepalive: compileKeepalive(a.keepalive, expr),
    pause: expr('/audio/pause', a.pause),
    resume: expr('/audio/resume', a.resume),
    closeWhen: expr('/audio/closeWhen', a.closeWhen),
    closeTimeoutMs: a.closeTimeoutSeconds * 1000,
    rotateAfterMs: a.rotateAfterSeconds === undefined ? null : a.rotateAfterSeconds * 1000,
    rotateAfterAudioMs: a.rotateAfterAudioSeconds === undefined ? null : a.rotateAfterAudioSeconds * 1000,
    liveness: a.liveness ?? null,
    movable: a.movable === true,
    results: a.results.map((r: Record<string, any>, i: number) => compileResult(r, `/audio/results/${i}`, expr)),
    control: a.control.map((r: Record<string, any>, i: number) => compileControl(r, `/audio/control/${i}`, expr)),
    close: expr('/audio/close', a.close),
    closeCode: a.closeCode,
    replayRate: a.realTimeOnly === true ? 1 : (a.replayRate ?? null),
    closeCodes: {
      ...defaultCloseCodes,
      ...Object.fromEntries(Object.entries(a.closeCodes ?? {}).map(([k, v]) => [Number(k), v as CloseClass]))
    },
    grpc,
    time: compileTime(a.time, expr)
  }
  timeProblems(a.time, problem)
  if (ready.whenMissing) problem('/audio/ready/when', 'is required when ready is given')
  return audio
}

/** `audio.frames`, and what the schema cannot say of how its keys go together. */
function compileFrames(f: Record<string, any>, problem: Problem): FramesSpec {
  const frames: FramesSpec = {
    framing: f.framing,
    encoding: f.encoding,
    sampleRate: f.sampleRate,
    chunkMs: f.chunkMs ?? null,
    channels: f.channels
  }
  if (frames.channels === 2 && frames.sampleRate !== 8000)
    problem('/audio/frames/sampleRate', 'two channels are sent at 8000 Hz (the platform rate; no stereo resampling)')
  if (frames.encoding === 'mulaw' && frames.sampleRate !== 8000)
    problem('/audio/frames/sampleRate', 'mulaw is sent at 8000 Hz; use pcm16 for 16000 or 24000')
  if (frames.framing === 'json-base64' && (f.template === undefined || f.template === null))
    problem('/audio/frames/template', 'is required for json-base64 framing')
  if (frames.framing === 'event-stream' && (f.headers === undefined || f.headers === null))
    problem('/audio/frames/headers', 'is required for event-stream framing')
  return frames
}

/**
 * `audio.ready` (null: not given). `whenMissing`: it has no `when`, which is a problem of its own unless a
 * `ready` expression that is given did not compile (that is already one).
 */
function compileReady(
  r: Record<string, any> | undefined,
  expr: CompileAt
): { ready: AudioMapping['ready']; whenMissing: boolean } {
  if (r === undefined) return { ready: null, whenMissing: false }
  let failed = false
  const one = (key: 'when' | 'refused' | 'reason' | 'parameters'): Expr | null => {
    const compiled = expr(`/audio/ready/${key}`, r[key])
    if (compiled === null && r[key] !== undefined && r[key] !== null) failed = true
    return compiled
  }
  const when = one('when')
  const rest = { refused: one('refused'), reason: one('reason'), parameters: one('parameters') }
  return when === null ? { ready: null, whenMissing: !failed } : { ready: { when, ...rest }, whenMissing: false }
}

function compileSign(s: Record<string, any> | undefined, expr: CompileAt): UrlSigning | null {
  if (s === undefined) return null
  return {
    scheme: s.scheme,
    service: s.service,
    region: expr('/audio/sign/region', s.region) as Expr,
    expiresSeconds: s.expiresSeconds
  }
}

function compileKeepalive(k: Record<string, any> | undefined, expr: CompileAt): AudioMapping['keepalive'] {
  if (k === undefined) return null
  return {
    everyMs: k.everySeconds * 1000,
    when: k.when,
    frame: expr('/audio/keepalive/frame', k.frame) as Expr,
    set: expr('/audio/keepalive/set', k.set)
  }
}

function compileResult(r: Record<string, any>, at: string, expr: CompileAt): AudioMapping['results'][number] {
  return {
    when: expr(`${at}/when`, r.when) as Expr,
    emit: expr(`${at}/emit`, r.emit) as Expr,
    channel: expr(`${at}/channel`, r.channel),
    each: expr(`${at}/each`, r.each)
  }
}

/** What the schema cannot say of `audio.time`: it is required, and gives exactly one of end and duration. */
function timeProblems(t: Record<string, any> | undefined, problem: Problem): void {
  if (t !== undefined && t.none === undefined && (t.end === undefined) === (t.duration === undefined))
    problem('/audio/time', 'needs exactly one of end and duration')
  if (t === undefined)
    problem(
      '/audio/time',
      'is required: say where on the audio a result is ({start, end or duration, unit, final}) or that the vendor ' +
        'cannot say ({none: why}); see "What the platform sees on failover" in docs/concepts/replicas-and-failover.md'
    )
}

/** `audio.time` compiled; null when the mapping says the vendor gives no result times (`none`). */
function compileTime(t: Record<string, any> | undefined, expr: CompileAt): ResultTime | null {
  if (t === undefined || t.none !== undefined) return null
  return {
    start: expr('/audio/time/start', t.start) as Expr,
    end: expr('/audio/time/end', t.end),
    duration: expr('/audio/time/duration', t.duration),
    unitMs: TIME_UNIT_MS[t.unit] ?? 1000,
    iso8601: t.unit === 'iso8601',
    final: expr('/audio/time/final', t.final) as Expr
  }
}

function compileControl(r: Record<string, any>, at: string, expr: CompileAt): ControlRule {
  return {
    when: expr(`${at}/when`, r.when) as Expr,
    set: expr(`${at}/set`, r.set),
    reply: expr(`${at}/reply`, r.reply),
    emit: expr(`${at}/emit`, r.emit),
    audio: r.audio ?? null,
    end: r.end ?? null,
    reconnect: r.reconnect === true
  }
}
