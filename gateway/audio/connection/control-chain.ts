/**
 * A session's control work (mapping evaluations, control frames, vendor messages of all its
 * connections) runs here in arrival order, one task at a time, so vendor order is kept across awaits.
 * The audio path never waits on it. A task that throws is a bug: `onBug` hears of it, the chain goes on.
 */
export class ControlChain {
  private tail: Promise<void> = Promise.resolve()

  constructor(private readonly onBug: (err: unknown) => void) {}

  run(task: () => Promise<void>): void {
    this.tail = this.tail.then(task).catch(this.onBug)
  }
}
