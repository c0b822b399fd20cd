import type { NonceTaken, UsedNonces } from '../auth/relay-token'
import type { RelayNonceMessage } from './protocol'

/**
 * A worker's record of the relay tokens taken (auth/relay-token.ts): the instance's one record is kept by the
 * main process, so a token taken by one worker is refused by the others (they share the fleet port, and the
 * kernel picks which of them a connection reaches). One IPC round trip per relayed leg; when the main process
 * is gone, every token is refused ('busy': the worker stops at once anyway).
 */
export class RelayNonceClient implements UsedNonces {
  private readonly waiting = new Map<number, (taken: NonceTaken) => void>()
  private nextId = 1

  constructor(private readonly send: (m: RelayNonceMessage) => void) {}

  take(nonce: string, untilMs: number): Promise<NonceTaken> {
    const id = this.nextId++
    this.send({ t: 'relay-take', id, nonce, untilMs })
    return new Promise(resolve => this.waiting.set(id, resolve))
  }

  /** The main process answered `take`. */
  taken(id: number, taken: NonceTaken): void {
    const resolve = this.waiting.get(id)
    this.waiting.delete(id)
    resolve?.(taken)
  }

  /** The main process is gone: every token still waiting is refused. */
  close(): void {
    for (const resolve of this.waiting.values()) resolve('busy')
    this.waiting.clear()
  }
}
