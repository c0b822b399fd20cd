import type { TextSettings } from '../config/types'
import type { RouteRuntime } from '../route'
import type { IncomingUtterance, TextResult } from '../text/exchange-types'
import type { TextHook } from '../text/utterance'

/**
 * The text hook of the current config snapshot, and those a reload replaced while they still answer
 * requests that started before it (or deliver an asynchronous route's queue). A replaced hook closes
 * its vendor HTTP pools once nothing is in flight on it and its longest exchange has had time to end.
 */
export class TextHooks {
  private readonly retired = new Set<TextHook>()
  private readonly timers = new Set<NodeJS.Timeout>()

  constructor(
    private current: TextHook,
    private settings: TextSettings
  ) {}

  serves(route: RouteRuntime): boolean {
    return this.current.serves(route)
  }

  /** Requests in flight and accepted asynchronous deliveries, on every hook (a drain waits for them). */
  get pending(): number {
    let n = this.current.backlog + this.current.active
    for (const h of this.retired) n += h.backlog + h.active
    return n
  }

  /** The hook counts its own requests in flight (TextHook.active): no wrapper promise per request here. */
  handle(req: IncomingUtterance): Promise<TextResult> {
    if (this.current.serves(req.route)) return this.current.handle(req)
    return ([...this.retired].find(h => h.serves(req.route)) ?? this.current).handle(req)
  }

  replace(next: TextHook, settings: TextSettings): void {
    const old = this.current
    const grace = (this.settings.timeoutSeconds * (this.settings.retries + 1) + 5) * 1000
    this.current = next
    this.settings = settings
    this.retired.add(old)
    const later = (): void => {
      if (old.active > 0 || old.backlog > 0) {
        arm(1000)
        return
      }
      this.retired.delete(old)
      old.close().catch(() => {})
    }
    const arm = (ms: number): void => {
      const timer = setTimeout(() => {
        this.timers.delete(timer)
        later()
      }, ms)
      timer.unref()
      this.timers.add(timer)
    }
    arm(grace)
  }

  async close(): Promise<void> {
    for (const t of this.timers) clearTimeout(t)
    this.timers.clear()
    const all = [this.current, ...this.retired]
    this.retired.clear()
    await Promise.all(all.map(async h => await h.close()))
  }
}
