import { SessionRegistry } from '../audio/registry'
import type { AudioRelay } from '../audio/relay'
import type { Session, SessionOwner, SessionState } from '../audio/session-contract'
import { CODES, GatewayError, type ErrorCode } from '../errors'
import type { Logger } from '../telemetry/log'
import { LegCounters } from '../telemetry/metrics'
import type { LinkMessage, ToMain } from './protocol'

/**
 * Sessions across the workers of one `serve --workers N` process. Every vendor session a worker opens
 * is announced to the main process, which keeps a directory (leg identity → worker, caller) that every
 * worker holds a copy of. A leg that re-attaches on another worker than its session's (B, the session on
 * A) claims it through that directory: B gets a RemoteSession, A attaches a RemoteOwner, and only this
 * leg's frames and results pass between the two (through the main process, in order). The session
 * stays on its worker.
 */
export class WorkerRegistry extends SessionRegistry {
  /** Leg identity → worker and caller, for sessions of the other workers. */
  private readonly directory = new Map<string, { worker: number; caller: string }>()
  /** The sessions this worker announced (to withdraw them when they close). */
  private readonly announced = new Map<string, Session>()
  /** Links this worker serves as A (vendor side) or B (platform side), by link id. */
  private readonly owners = new Map<string, RemoteOwner>()
  private readonly remotes = new Map<string, RemoteSession>()
  private nextLink = 1

  constructor(
    readonly worker: number,
    private readonly send: (m: ToMain) => void,
    private readonly log: Logger
  ) {
    super()
  }

  override add(s: Session, caller = ''): void {
    super.add(s, caller)
    this.announced.set(s.key, s)
    this.send({ t: 'dir-add', key: s.key, caller })
  }

  override closed(s: Session): void {
    super.closed(s)
    if (this.announced.get(s.key) !== s) return
    this.announced.delete(s.key)
    this.send({ t: 'dir-del', key: s.key })
  }

  override claim(
    key: string,
    owner: SessionOwner,
    init: Record<string, unknown>,
    log: Logger,
    caller = ''
  ): Session | null | 'refused' {
    const local = super.claim(key, owner, init, log, caller)
    if (local !== null) return local
    const there = this.directory.get(key)
    if (there === undefined || there.worker === this.worker) return null
    if (there.caller !== caller) return 'refused'
    const link = `${this.worker}:${this.nextLink++}`
    const remote = new RemoteSession(
      key,
      link,
      there.worker,
      owner,
      m => this.relay(there.worker, link, m),
      () => {
        this.remotes.delete(link)
      }
    )
    this.remotes.set(link, remote)
    this.relay(there.worker, link, { t: 'attach', key, init, caller })
    log.info(
      { event: 'reattached_across_workers', worker: there.worker },
      'leg re-attached to a session on another worker'
    )
    return remote
  }

  // ---- from the main process --------------------------------------------------------------------

  directoryAll(entries: [string, number, string][]): void {
    this.directory.clear()
    for (const [key, worker, caller] of entries) this.directory.set(key, { worker, caller })
  }
  directoryAdd(key: string, worker: number, caller: string): void {
    this.directory.set(key, { worker, caller })
  }
  directoryDel(key: string, worker: number): void {
    if (this.directory.get(key)?.worker === worker) this.directory.delete(key)
  }

  /** A worker process ended: its sessions are gone, and the legs it served here lose their peer. */
  workerGone(worker: number): void {
    for (const [key, e] of this.directory) if (e.worker === worker) this.directory.delete(key)
    for (const r of [...this.remotes.values()]) if (r.peer === worker) r.peerGone()
    for (const o of [...this.owners.values()]) if (o.peer === worker) o.peerGone()
  }

  /** A message on a cross-worker link. */
  linked(from: number, link: string, m: LinkMessage): void {
    if (m.t === 'attach') return this.attachFrom(from, link, m.key, m.init, m.caller)
    const owner = this.owners.get(link)
    if (owner !== undefined) return owner.fromPlatformSide(m)
    this.remotes.get(link)?.fromVendorSide(m)
  }

  private attachFrom(from: number, link: string, key: string, init: Record<string, unknown>, caller: string): void {
    const owner = new RemoteOwner(
      from,
      m => this.relay(from, link, m),
      () => {
        this.owners.delete(link)
      }
    )
    const s = super.claim(key, owner, init, this.log.child({ worker: from, link }), caller)
    if (s === null || s === 'refused') {
      this.relay(from, link, { t: 'gone' })
      return
    }
    owner.session = s
    this.owners.set(link, owner)
  }

  private relay(to: number, link: string, m: LinkMessage): void {
    this.send({ t: 'relay', to, link, m })
  }
}

/** The platform side (worker B) of a leg whose vendor session lives on worker A. */
class RemoteSession implements Session {
  readonly id: string
  state: SessionState = 'OPENING'
  owner: SessionOwner | null
  readonly counters: LegCounters
  readonly relay: AudioRelay

  constructor(
    readonly key: string,
    link: string,
    readonly peer: number,
    owner: SessionOwner,
    private readonly send: (m: LinkMessage) => void,
    private readonly done: () => void
  ) {
    this.id = `worker-${peer}/${link}`
    this.owner = owner
    this.counters = new LegCounters(key.slice(0, key.indexOf(':')))
    // The leg's per-frame write: a copy of the frame goes to the session's worker.
    this.relay = {
      write: (data: ArrayBuffer) => {
        if (this.state !== 'CLOSED') send({ t: 'audio', data: data.slice(0) })
      }
    } as unknown as AudioRelay
  }

  start(): void {}
  attach(): void {}
  park(): void {
    this.end({ t: 'park' })
  }
  close(graceful: boolean): void {
    this.end({ t: 'close', graceful })
  }
  handOff(reason: string, ttlSeconds: number): void {
    this.end({ t: 'handOff', reason, ttlSeconds })
  }
  pauseVendor(): void {
    if (this.state !== 'CLOSED') this.send({ t: 'pause' })
  }
  resumeVendor(): void {
    if (this.state !== 'CLOSED') this.send({ t: 'resume' })
  }

  fromVendorSide(m: LinkMessage): void {
    const owner = this.owner
    if (owner === null || this.state === 'CLOSED') return
    if (m.t === 'ready') {
      this.state = 'READY'
      owner.sessionReady(m.parameters)
    } else if (m.t === 'deliver') owner.deliver(m.text)
    else if (m.t === 'failed') {
      this.finish()
      const code = (m.code in CODES ? m.code : 'INTERNAL') as ErrorCode
      owner.sessionFailed(new GatewayError(code), m.extra)
    } else if (m.t === 'superseded') {
      this.finish()
      owner.superseded()
    } else if (m.t === 'gone') {
      // The session closed before the claim reached it: the platform reconnects and opens a new one.
      this.finish()
      owner.sessionFailed(new GatewayError('UPSTREAM_CLOSED', { detail: 'the session ended on its worker' }), {})
    }
  }

  /** The session's worker ended: its vendor session is gone with it; the platform reconnects. */
  peerGone(): void {
    const owner = this.owner
    if (this.state === 'CLOSED' || owner === null) return
    this.finish()
    owner.sessionFailed(new GatewayError('SHUTTING_DOWN'), { detail: 'worker_exited' })
  }

  private end(m: LinkMessage): void {
    if (this.state === 'CLOSED') return
    this.send(m)
    this.finish()
  }

  private finish(): void {
    this.state = 'CLOSED'
    this.owner = null
    this.done()
  }
}

/** The vendor side (worker A): stands for the leg on worker B as its session's owner. */
class RemoteOwner implements SessionOwner {
  session: Session | null = null
  private over = false

  constructor(
    readonly peer: number,
    private readonly send: (m: LinkMessage) => void,
    private readonly done: () => void
  ) {}

  sessionReady(parameters: Record<string, unknown>): void {
    if (!this.over) this.send({ t: 'ready', parameters })
  }
  sessionFailed(error: GatewayError, extra: Record<string, unknown>): void {
    if (this.over) return
    this.send({ t: 'failed', code: error.code, extra })
    this.finish()
  }
  deliver(text: string): void {
    if (!this.over) this.send({ t: 'deliver', text })
  }
  superseded(): void {
    if (this.over) return
    this.send({ t: 'superseded' })
    this.finish()
  }

  fromPlatformSide(m: LinkMessage): void {
    const s = this.session
    if (s === null || this.over || s.owner !== this) return
    if (m.t === 'audio') s.relay.write(m.data)
    else if (m.t === 'pause') s.pauseVendor()
    else if (m.t === 'resume') s.resumeVendor()
    else if (m.t === 'park') {
      this.finish()
      s.park()
    } else if (m.t === 'close') {
      this.finish()
      s.close(m.graceful)
    } else if (m.t === 'handOff') {
      this.finish()
      s.handOff(m.reason, m.ttlSeconds)
    }
  }

  /** The platform side's worker ended: as if its platform socket closed (the session waits for a re-attach). */
  peerGone(): void {
    const s = this.session
    if (this.over || s === null) return
    this.finish()
    if (s.owner === this) s.park()
  }

  private finish(): void {
    this.over = true
    this.done()
  }
}
