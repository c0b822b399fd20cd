import type { UtteranceTaken } from '../auth/admission'
import type { LegLimit } from '../auth/leg-limits'
import type { QuotaRefusal } from '../auth/quotas'
import type { NonceTaken } from '../auth/relay-token'
import type { HealthRecord, Store } from '../store/port'

/**
 * The messages between `serve --workers N`'s main process (workers/supervisor.ts) and its worker
 * processes (workers/child.ts), over the IPC channel with `advanced` serialization. Only what needs the
 * main process crosses it: the in-memory store the workers share, the gateway's admission (failure
 * budget and leg limits, counted once for every worker), metrics, reload and signals. No audio: a leg
 * whose session another worker holds is relayed to that worker's loopback fleet listener
 * (audio/placement/relay-link.ts), as between instances.
 */

/** The Store methods a worker calls on the main process's memory store: writes (no answer), and asks. */
type WriteOp = 'setAffinity' | 'deleteAffinity' | 'refreshOwners' | 'releaseOwner' | 'publishCalls' | 'removeCall'
type AskOp =
  | 'getAffinity'
  | 'revokeToken'
  | 'isTokenRevoked'
  | 'countFailure'
  | 'claimOwner'
  | 'findCalls'
  | 'swapShared'
  | 'dropShared'
  | 'countMembers'

/**
 * One call on the main process's memory store: the Store method's name and its arguments, as the worker
 * made it on its own store (workers/worker-store.ts); the main process makes the same call.
 */
export type StoreCall<Op extends WriteOp | AskOp = WriteOp | AskOp> = {
  [K in Op]: { op: K; args: Parameters<Store[K]> }
}[Op]

/** A worker's calls on the main process's memory store with no answer, and those that answer. */
export type StoreWriteCall = StoreCall<WriteOp>
export type StoreAsk = StoreCall<AskOp>

/** A worker's writes to the main process's memory store (no answer), and its asks. */
export type StoreWrite =
  | { t: 'streams'; counts: [string, number][] }
  | { t: 'health'; key: string; record: HealthRecord }
  | { t: 'store-write'; call: StoreWriteCall }
  | { t: 'store-ask'; id: number; ask: StoreAsk }

/** A worker's asks of the gateway's admission (auth/admission.ts), counted in the main process. */
export type AdmissionMessage =
  | { t: 'admit'; id: number; address: string; failed: boolean }
  | { t: 'slot-take'; id: number; route: string; caller: string; force: boolean; tenant: string }
  | { t: 'utterance-take'; id: number; route: string; tenant: string }
  | { t: 'slot-release'; slot: number }

/** A relay token's nonce, taken in the instance's one record (workers/relay-nonces.ts). */
export type RelayNonceMessage = { t: 'relay-take'; id: number; nonce: string; untilMs: number }

export type ToMain =
  | { t: 'ready'; port: number; adminPort: number; pid: number }
  | RelayNonceMessage
  | { t: 'failed'; message: string }
  | StoreWrite
  | AdmissionMessage
  | { t: 'metrics'; id: number; json: unknown[] }
  /** A drained worker's last counters, sent before it exits: the main process serves them until it exits. */
  | { t: 'final-metrics'; json: unknown[] }
  | { t: 'reloaded'; id: number; ok: boolean; report: unknown }

/** What a worker is handed before it serves (never in its environment or command line). */
export interface Hello {
  t: 'hello'
  /** The main process's instance id: the worker's group, which its own id extends. */
  group: string
  /** How many workers the group has. */
  workers: number
  /** The public port (the main process picked it when the config says 0), shared by every worker. */
  port: number
  /** The fleet listener's port, shared likewise. */
  fleetPort: number
  /** The fleet key's material (hex) and where it came from (auth/fleet-key.ts). */
  fleetKey: string
  fleetKeySource: 'fleet.secret' | 'config secrets' | 'main process'
  /** The bearer token of the workers' internal admin listeners (the main process forwards to them with it). */
  adminToken: string
}

export type ToWorker =
  | Hello
  | { t: 'sync'; health: [string, HealthRecord][]; others: [string, number][]; leader: boolean }
  | { t: 'store-answer'; id: number; value: unknown; error?: string }
  | { t: 'admitted'; id: number; address: string; verdict: true | number }
  | { t: 'slot-taken'; id: number; slot: number | null; limit?: LegLimit | QuotaRefusal }
  | { t: 'utterance-taken'; id: number; taken: UtteranceTaken }
  | { t: 'relay-taken'; id: number; taken: NonceTaken }
  | { t: 'metrics'; id: number }
  | { t: 'reload'; id: number; trigger: string }
  | { t: 'drain'; signal: string }
  | { t: 'stop'; why: string }

/** The environment variable that makes `serve` a worker of a main process (its index). */
export const WORKER_ENV = 'ASSIST_GATEWAY_WORKER'

/** The IPC channel of a worker process, typed. */
export interface Channel {
  send: (m: ToMain) => void
  on: (fn: (m: ToWorker) => void) => void
}

export function processChannel(): Channel {
  return {
    send: m => {
      // The main process may be gone already (its `disconnect` stops this worker): nothing to tell it then.
      if (process.connected) process.send?.(m, undefined, undefined, () => {})
    },
    on: fn => {
      process.on('message', m => fn(m as ToWorker))
    }
  }
}
