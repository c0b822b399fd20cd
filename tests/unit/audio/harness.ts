import { Writable } from 'node:stream'
import type {
  Connection,
  ConnectionEvents,
  ConnectionFactory,
  ConnectionState,
  VendorFailure
} from '../../../gateway/audio/connection/connection-contract'
import { AudioLeg } from '../../../gateway/audio/leg/leg'
import type { LegDeps } from '../../../gateway/audio/leg/leg-contract'
import { IDENTITY_FRAMES } from '../../../gateway/audio/feed/encoder'
import type { AudioSink } from '../../../gateway/audio/feed/feed'
import { SessionRegistry } from '../../../gateway/audio/session/registry'
import { VendorSession } from '../../../gateway/audio/session/session'
import type { SessionEvents } from '../../../gateway/audio/session/session-contract'
import { TenantCredentials } from '../../../gateway/auth/tenant-credentials'
import { anonymousOutcome } from '../../../gateway/auth/hook-auth'
import type { AudioSettings, HealthSettings, RouteConfig } from '../../../gateway/config/types'
import type { GatewayError } from '../../../gateway/errors'
import type { MappingInput } from '../../../gateway/mapping/run'
import type { RouteRuntime } from '../../../gateway/route'
import { MemoryStore } from '../../../gateway/store/memory'
import { createLogger, type Logger } from '../../../gateway/telemetry/log'
import { Metrics } from '../../../gateway/telemetry/metrics'
import { type Replica, UpstreamPool } from '../../../gateway/upstream/pool'
import { FakeClock } from '../../helpers/fake-clock'
import { fakePlatform } from '../../helpers/fake-platform'
import { loneGateway } from '../../helpers/leg-deps'
import { health, NO_PROBE, replica, routeOf } from '../../helpers/replicas'

// A vendor session on fake connections and a fake clock: the state machine alone, with no socket and
// no timer of the machine's. Frames are 160 bytes (20 ms of µ-law).

type AudioMapping = NonNullable<RouteRuntime['mapping']['audio']>

export const SETTINGS: AudioSettings = {
  handshakeTimeoutSeconds: 5,
  connectTimeoutSeconds: 2,
  readyTimeoutSeconds: 2,
  holdBufferBytes: 1600, // 10 frames
  bufferBytes: 3200, // 20 frames
  vendorHighWaterBytes: 1000,
  backpressurePolicy: 'drop-oldest',
  replaySeconds: 0.1, // 800 bytes: the last 5 frames
  failoverTimeoutSeconds: 2,
  reattachGraceSeconds: 5,
  vendorPingSeconds: 0,
  vendorPongTimeoutSeconds: 2,
  rebalance: { spread: 4, perSecond: 0, settleSeconds: 10 },
  replayRate: 0,
  coalesceMs: 0, // one write per frame: coalescing has its own tests (coalesce.test.ts)
  sessionBreaker: { quickLossSeconds: 0, quickLosses: 3, windowSeconds: 30, holdOffSeconds: 30 },
  recoveryBackoff: { baseMs: 100, maxMs: 2000, stableSeconds: 0 }
}

export const HEALTH: HealthSettings = health(NO_PROBE, 2)

export function audioMapping(over: Partial<AudioMapping> = {}): AudioMapping {
  return {
    url: null,
    headers: null,
    open: null,
    ready: null,
    frames: IDENTITY_FRAMES,
    template: null,
    keepalive: null,
    results: [],
    pause: null,
    resume: null,
    close: null,
    closeWhen: null,
    closeTimeoutMs: 1000,
    closeCode: 1000,
    rotateAfterMs: null,
    liveness: null,
    movable: false,
    replayRate: null,
    closeCodes: {},
    ...over
  }
}

export function routeConfig(replicas: readonly string[], audio: (name: string) => string | undefined): RouteConfig {
  return routeOf(
    replicas.map(name => replica(name, 100, { audio: audio(name), text: undefined })),
    'test.yaml'
  )
}

export function route(
  clock: FakeClock,
  replicas: readonly string[],
  audio: Partial<AudioMapping> = {},
  url: (name: string) => string | undefined = name => `ws://${name}.invalid/`
): RouteRuntime {
  const config = routeConfig(replicas, url)
  return {
    name: 'r',
    config,
    mapping: {
      file: 'test.yaml',
      vendor: 'test',
      audio: audioMapping(audio),
      text: null,
      samples: { audio: [], text: [] }
    },
    audioAuth: TenantCredentials.single(undefined, 'r'),
    textAuth: TenantCredentials.single(undefined, 'r'),
    tenants: [],
    clients: new Map(),
    anonymous: anonymousOutcome('r'),
    pool: new UpstreamPool(config, new MemoryStore('test'), HEALTH, clock)
  } as RouteRuntime
}

/** Log lines, parsed. */
/** A mapping's input for a leg `l` of route `r` (contact 1, bus 2, TX) on replica `a` without a credential. */
export const LEG_INPUT = {
  init: {},
  leg: { id: 'l', route: 'r', perspective: 'TX', contactId: '1', busNo: '2', requestId: null },
  route: { name: 'r', params: {}, checksToken: false },
  upstream: { name: 'a', audio: null, credential: null, hasCredential: false }
} as MappingInput

/** An audio sink that keeps every write (a copy: the relay's view is only valid during the call). */
export function recordingSink(): AudioSink & { writes: Buffer[]; bufferedAmount: number } {
  const writes: Buffer[] = []
  return {
    writes,
    bufferedAmount: 0,
    writeAudio: data => {
      writes.push(Buffer.from(data instanceof Uint8Array ? data : new Uint8Array(data)))
    }
  }
}

export class Lines {
  readonly lines: Record<string, unknown>[] = []
  readonly log: Logger = createLogger({
    level: 'debug',
    secrets: [],
    destination: new Writable({
      write: (chunk: Buffer, _enc, cb) => {
        for (const l of chunk.toString('utf8').split('\n')) if (l !== '') this.lines.push(JSON.parse(l))
        cb()
      }
    })
  })
  events(): unknown[] {
    return this.lines.map(l => l.event)
  }
}

/** A vendor connection the test drives: it only records what the session asks and tells what the test says. */
export class FakeConnection implements Connection {
  state: ConnectionState = 'OPENING'
  bufferedAmount = 0
  readonly written: Buffer[] = []
  readonly controls: string[] = []
  private controlDone: (() => void)[] = []

  constructor(
    readonly replica: Replica,
    readonly input: MappingInput,
    private readonly events: ConnectionEvents
  ) {}

  writeAudio(data: ArrayBuffer | Uint8Array): void {
    this.written.push(Buffer.from(data instanceof Uint8Array ? data : new Uint8Array(data)))
  }
  takeOver(): number {
    return 0
  }
  takeRemainder(): Uint8Array | null {
    return null
  }
  control(kind: 'pause' | 'resume', done: () => void = () => {}): void {
    this.controls.push(kind)
    this.controlDone.push(done)
  }
  /** The control frames asked for are out. */
  controlsSent(): void {
    const done = this.controlDone
    this.controlDone = []
    for (const d of done) d()
  }
  pause(): void {}
  resume(): void {}
  goodbye(): void {
    this.state = 'CLOSING'
  }
  abort(): void {
    this.state = 'CLOSED'
  }

  ready(params: Record<string, unknown> = {}): void {
    this.state = 'READY'
    this.events.ready(this, params)
  }
  /** It fails: before readiness the session hears `refused`, after it `lost`. */
  failWith(failure: VendorFailure): void {
    const when = this.state === 'READY' ? 'lost' : 'refused'
    this.state = 'CLOSED'
    this.events[when](this, failure)
  }
  result(text: string): void {
    this.events.result(text)
  }
  lossReport?: () => { bytesSinceLife: number; unreadBytes: number; lastLifeAt: number }
  /** When set, `confirm` waits for `confirmed()` (the vendor's pong); else it confirms at once. */
  confirmWaits = false
  private confirmation: (() => void) | null = null
  confirm(done: () => void): void {
    if (this.confirmWaits) this.confirmation = done
    else done()
  }
  /** The vendor's pong to the confirming ping. */
  confirmed(): void {
    const done = this.confirmation
    this.confirmation = null
    done?.()
  }
  /** Its goodbye ended without the vendor's close, `bytes` of audio unread (connection-contract.ts `unconfirmed`). */
  goodbyeUnconfirmed(bytes: number): void {
    this.lossReport = () => ({ bytesSinceLife: bytes, unreadBytes: 0, lastLifeAt: 0 })
    this.state = 'CLOSED'
    this.events.unconfirmed?.(this)
  }
  /** The replicas' frames, as indexes of `frame(i)`. */
  get frames(): number[] {
    return this.written.map(b => b[0])
  }
}

export class FakeLeg implements SessionEvents {
  readonly readies: Record<string, unknown>[] = []
  readonly failures: { error: GatewayError; extra: Record<string, unknown> }[] = []
  readonly delivered: string[] = []
  supersededCount = 0
  sessionReady(p: Record<string, unknown>): void {
    this.readies.push(p)
  }
  sessionFailed(error: GatewayError, extra: Record<string, unknown>): void {
    this.failures.push({ error, extra })
  }
  deliver(text: string): void {
    this.delivered.push(text)
  }
  superseded(): void {
    this.supersededCount++
  }
  readonly events: { name: string; attributes: Record<string, unknown> }[] = []
  sessionEvent(name: string, attributes: Record<string, unknown>): void {
    this.events.push({ name, attributes })
  }
}

/** A 160-byte frame whose every byte is `i` (frames are told apart by their first byte). */
export function frame(i: number): ArrayBuffer {
  return new Uint8Array(160).fill(i).buffer
}

/** A `connect` (LegDeps, SessionDeps) on connections the test drives: each one opened, a `Kind`, is pushed to `conns`. */
export function connectInto<C extends Connection>(
  conns: C[],
  Kind: new (replica: Replica, input: MappingInput, events: ConnectionEvents) => C
): ConnectionFactory {
  return (_ctx, replica, input, events) => {
    const c = new Kind(replica, input, events)
    conns.push(c)
    return c
  }
}

/**
 * A platform leg's deps (LegDeps) in one lone process (`gw`: helpers/leg-deps.ts loneGateway) on the fake
 * clock: SETTINGS, leg id leg-1, 1 MiB platform high water, fake vendor connections pushed to `conns`.
 * `over` replaces any of them.
 */
export function fakeLegDeps(
  w: {
    clock: FakeClock
    route: RouteRuntime
    gw: Omit<LegDeps, 'route' | 'settings' | 'metrics' | 'log' | 'clock' | 'legId' | 'platformHighWaterBytes'>
    metrics: Metrics
    log: Logger
    conns: FakeConnection[]
  },
  over: Partial<LegDeps> = {}
): LegDeps {
  return {
    route: w.route,
    settings: SETTINGS,
    metrics: w.metrics,
    ...w.gw,
    log: w.log,
    clock: w.clock,
    legId: 'leg-1',
    platformHighWaterBytes: 1 << 20,
    connect: connectInto(w.conns, FakeConnection),
    ...over
  }
}

/** Platform legs on fake sockets (helpers/fake-platform.ts) in one lone process on route `r`; `leg` opens one (leg-1, leg-2, ...). */
export function legWorld(clock: FakeClock, r: RouteRuntime) {
  const gw = loneGateway(clock)
  const metrics = new Metrics()
  const logs = new Lines()
  const conns: FakeConnection[] = []
  let n = 0
  const leg = (over: Partial<LegDeps> = {}) => {
    const p = fakePlatform()
    const deps = fakeLegDeps({ clock, route: r, gw, metrics, log: logs.log, conns }, { legId: `leg-${++n}`, ...over })
    const l = new AudioLeg(p.socket, deps)
    p.bind(l)
    return { leg: l, ...p }
  }
  return { clock, registry: gw.registry, metrics, logs, conns, leg }
}

export interface Harness {
  clock: FakeClock
  route: RouteRuntime
  session: VendorSession
  owner: FakeLeg
  registry: SessionRegistry
  metrics: Metrics
  logs: Lines
  conns: FakeConnection[]
  /** The last connection opened. */
  conn: () => FakeConnection
  replica: (name: string) => Replica
}

export function harness(
  opts: {
    replicas?: string[]
    settings?: Partial<AudioSettings>
    audio?: Partial<AudioMapping>
    /** Backoff jitter; default 1: every wait at the top of its range. */
    random?: () => number
  } = {}
): Harness {
  const clock = new FakeClock()
  const r = route(clock, opts.replicas ?? ['a', 'b'], opts.audio)
  const owner = new FakeLeg()
  const registry = new SessionRegistry()
  const metrics = new Metrics()
  const logs = new Lines()
  const conns: FakeConnection[] = []
  const input = { init: {}, leg: {}, route: {}, upstream: {} } as unknown as MappingInput
  const session = new VendorSession(
    {
      route: r,
      settings: { ...SETTINGS, ...opts.settings },
      metrics,
      store: new MemoryStore('test'),
      clock,
      host: registry,
      namespace: 'r',
      log: logs.log,
      random: opts.random ?? (() => 1),
      connect: connectInto(conns, FakeConnection)
    },
    owner,
    input,
    'r:1:2:TX',
    'leg-1'
  )
  registry.add(session)
  return {
    clock,
    route: r,
    session,
    owner,
    registry,
    metrics,
    logs,
    conns,
    conn: () => conns[conns.length - 1],
    replica: name => r.pool.byName(name)!
  }
}

/** A harness whose session has started and whose first vendor connection is ready (STREAMING). */
export function readyHarness(opts: Parameters<typeof harness>[0] = {}): Harness {
  const h = harness(opts)
  h.session.start(null)
  h.conn().ready()
  return h
}
