import WebSocket from 'ws'
import { request } from 'undici'
import { type Clock, systemClock, type TimerHandle } from '../clock'
import type { HealthSettings } from '../config/types'
import type { Store } from '../store/port'
import type { Replica, UpstreamPool } from './pool'

export interface ProbeEvents {
  /** One probe ran: `ok` and, on failure, why. */
  checked: (replica: Replica, ok: boolean) => void
  /** The replica's verdict changed. */
  changed: (replica: Replica, state: 'up' | 'down', reason: string) => void
}

/**
 * Active health: every `intervalSeconds` each replica is probed (`ws`: the upgrade answers 101, then we
 * close 1000; `http`: GET answers 2xx/3xx). Down after `unhealthyThreshold` failures in a row, up after
 * `healthyThreshold` successes. With a shared store only the lease holder probes, and writes its
 * verdicts for the fleet; every other instance reads them on its store sync.
 */
export class Prober {
  private timer: TimerHandle | null = null
  private readonly streak = new Map<
    string,
    { ok: number; fail: number; state: 'up' | 'down'; since: number; reason: string }
  >()
  private running = false

  constructor(
    private readonly pools: readonly UpstreamPool[],
    private readonly settings: HealthSettings['active'],
    private readonly store: Store,
    private readonly events: ProbeEvents,
    private readonly clock: Clock = systemClock
  ) {}

  start(): void {
    if (this.settings.kind === 'none') return
    this.timer = this.clock.setInterval(() => {
      void this.round()
    }, this.settings.intervalSeconds * 1000)
    void this.round()
  }

  stop(): void {
    if (this.timer !== null) this.clock.clearInterval(this.timer)
    this.timer = null
  }

  /** One probe of every replica, concurrently. Skipped while another instance holds the lease. */
  async round(): Promise<void> {
    if (this.running || !this.store.isLeader()) return
    this.running = true
    try {
      await Promise.all(this.pools.flatMap(p => p.replicas).map(async r => await this.probeOne(r)))
    } finally {
      this.running = false
    }
  }

  private async probeOne(r: Replica): Promise<void> {
    const failure = await this.probe(r)
    const ok = failure === null
    this.events.checked(r, ok)
    // `since` is wall-clock time on purpose: the fleet reads it (/admin/upstreams), unlike the timers.
    let s = this.streak.get(r.key)
    if (s === undefined) {
      const shared = this.store.sharedHealth().get(r.key)
      s = {
        ok: 0,
        fail: 0,
        state: shared?.state ?? 'up',
        since: shared?.since ?? Date.now(),
        reason: shared?.reason ?? 'not probed yet'
      }
      this.streak.set(r.key, s)
    }
    if (ok) {
      s.ok++
      s.fail = 0
    } else {
      s.fail++
      s.ok = 0
    }
    if (s.state === 'up' && s.fail >= this.settings.unhealthyThreshold) {
      s.state = 'down'
      s.since = Date.now()
      s.reason = `${s.fail} failed probes: ${failure}`
      this.events.changed(r, 'down', s.reason)
    } else if (s.state === 'down' && s.ok >= this.settings.healthyThreshold) {
      s.state = 'up'
      s.since = Date.now()
      s.reason = `${s.ok} good probes`
      this.events.changed(r, 'up', s.reason)
    }
    // Written every round, so a verdict survives a Redis restart and a new leader starts from it.
    this.store.writeHealth(r.key, { state: s.state, reason: s.reason, since: s.since, by: this.store.instanceId })
  }

  /** null when healthy, else a short reason (never a URL: it may hold credentials). */
  private async probe(r: Replica): Promise<string | null> {
    const timeoutMs = this.settings.timeoutSeconds * 1000
    const kind = this.settings.kind
    if (kind === 'http' || (kind === 'ws' && r.config.audio === undefined)) {
      const base = r.config.text ?? r.config.audio!.replace(/^ws/, 'http')
      try {
        const res = await request(new URL(this.settings.path, base), {
          method: 'GET',
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
          headers: r.config.headers
        })
        await res.body.dump()
        return res.statusCode < 400 ? null : `HTTP ${res.statusCode}`
      } catch (err) {
        return (err as { code?: string }).code ?? 'request failed'
      }
    }
    return await new Promise<string | null>(resolve => {
      const ws = new WebSocket(r.config.audio!, {
        headers: r.config.headers,
        handshakeTimeout: timeoutMs,
        perMessageDeflate: false,
        followRedirects: false
      })
      let done = false
      const finish = (result: string | null): void => {
        if (done) return
        done = true
        resolve(result)
      }
      ws.on('open', () => {
        ws.close(1000, 'health probe')
        finish(null)
      })
      ws.on('unexpected-response', (_req, res) => {
        finish(`upgrade answered ${res.statusCode ?? '?'}`)
        ws.terminate()
      })
      ws.on('error', (err: Error & { code?: string }) => finish(err.code ?? 'connect failed'))
      ws.on('close', () => finish('closed before open'))
    })
  }
}
