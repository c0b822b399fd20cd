/**
 * Bounded background delivery: at most `size` jobs wait and `concurrency` run. `offer` is false when
 * full. Jobs report their own failures; a job that throws is a bug and must not stop the queue.
 */
export class DeliveryQueue {
  private waiting: (() => Promise<void>)[] = []
  private head = 0
  private running = 0

  constructor(
    private readonly size: number,
    private readonly concurrency: number
  ) {}

  get pending(): number {
    return this.waiting.length - this.head
  }

  /** Jobs not yet finished: waiting and running (a drain waits for them). */
  get outstanding(): number {
    return this.pending + this.running
  }

  offer(job: () => Promise<void>): boolean {
    if (this.pending >= this.size) return false
    this.waiting.push(job)
    this.pump()
    return true
  }

  private pump(): void {
    while (this.running < this.concurrency && this.pending > 0) {
      const job = this.waiting[this.head++]
      if (this.head > 1024 && this.head * 2 > this.waiting.length) {
        this.waiting = this.waiting.slice(this.head)
        this.head = 0
      }
      this.running++
      job()
        .catch(() => {})
        .finally(() => {
          this.running--
          this.pump()
        })
    }
  }
}
