/**
 * The last scrape of a process that drained (shutdown.metricsLingerSeconds). Counters of the legs closed
 * in a drain's last seconds exist only in this process: if it exits before Prometheus scrapes it once
 * more, they are never seen. After the drain the metrics listener stays until a scrape that began after
 * the drain finished has been answered, or until the linger runs out, whichever comes first.
 */
export class FinalScrape {
  private finishedAt = -1
  private seen: (() => void) | null = null
  private stop: (() => void) | null = null
  private cancelled = false

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** The drain finished: from now on the counters are final. */
  finished(): void {
    if (this.finishedAt < 0) this.finishedAt = this.now()
  }

  /** A scrape's start, to hand back to `answered` once its answer is sent. */
  begin(): number {
    return this.now()
  }

  /** A scrape that began at `startedAt` was answered: the final one when it began after the drain. */
  answered(startedAt: number): void {
    if (this.finishedAt >= 0 && startedAt >= this.finishedAt) this.seen?.()
  }

  /** Resolves on the final scrape or after `maxMs` (at once when 0 or cancelled), saying which. */
  async wait(maxMs: number): Promise<'scraped' | 'timeout' | 'cancelled'> {
    if (this.cancelled) return 'cancelled'
    if (maxMs <= 0) return 'timeout'
    return await new Promise(resolve => {
      const timer = setTimeout(() => done('timeout'), maxMs)
      const done = (how: 'scraped' | 'timeout' | 'cancelled'): void => {
        clearTimeout(timer)
        this.seen = this.stop = null
        resolve(how)
      }
      this.seen = () => done('scraped')
      this.stop = () => done('cancelled')
    })
  }

  /** A second signal: no lingering, now or later. */
  cancel(): void {
    this.cancelled = true
    this.stop?.()
  }
}

/**
 * How long a drained process may linger for its final scrape: `metricsLingerSeconds`, but never past the
 * drain deadline counted from the signal, so the process still exits by `shutdown.deadlineSeconds` (the
 * orchestrator's grace period is sized from it).
 */
export function lingerMs(
  settings: { metricsLingerSeconds: number; deadlineSeconds: number },
  sinceSignalMs: number
): number {
  return Math.max(0, Math.min(settings.metricsLingerSeconds * 1000, settings.deadlineSeconds * 1000 - sinceSignalMs))
}
