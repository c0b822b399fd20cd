/**
 * What one vendor session has been through, for its legs' summary lines and call records
 * (audio/leg/leg-call.ts): the replica audio goes to, every replica that carried it, how often it failed
 * over and how long audio reached no vendor. Written on the session's control path (ready, loss,
 * hand-over), never per frame.
 */
export class SessionStats {
  /** The replica (its config name) audio goes to now; '' before the first is ready. */
  replica = ''
  /** Every replica that carried audio, in order. */
  readonly replicas: string[] = []
  /** Vendor connections lost mid-call (each began a failover). */
  failovers = 0
  /** Time audio reached no vendor: from each loss to the replacement's ready (or the session's end). */
  gapMs = 0

  /** Audio flows to `replica` (the first ready, a failover's replacement, a rotation or a move). */
  flowsTo(replica: string): void {
    this.replica = replica
    if (!this.replicas.includes(replica)) this.replicas.push(replica)
  }

  lost(): void {
    this.failovers++
    this.replica = ''
  }

  gap(seconds: number): void {
    this.gapMs += Math.round(seconds * 1000)
  }
}
