import type { Affinity, HealthRecord, JoinOwner } from '../store/port'

/** A worker's calls on the main process's memory store that answer: token revocation, failure budget, join owners. */
export type StoreAsk =
  | { op: 'revoke'; jti: string; untilEpochMs: number; nowMs: number }
  | { op: 'revoked'; jti: string; nowMs: number }
  | { op: 'fail'; key: string; windowMs: number; nowMs: number }
  | { op: 'join-claim'; key: string; owner: JoinOwner; ttlMs: number; replacing?: string }
  | { op: 'join-release'; key: string; instance: string }

/**
 * The messages between `serve --workers N`'s main process (workers/supervisor.ts) and its worker
 * processes (workers/child.ts), over the IPC channel with `advanced` serialization (ArrayBuffers pass as
 * they are). Nothing here is on the per-frame path of a leg served by one worker; only the frames of a
 * leg that re-attached on another worker than its vendor session's cross it (`relay`).
 */

/** Between the two ends of a cross-worker leg: the platform side (B) and the vendor session's worker (A). */
export type LinkMessage =
  // B → A
  | { t: 'attach'; key: string; init: Record<string, unknown>; caller: string }
  | { t: 'audio'; data: ArrayBuffer }
  | { t: 'park' }
  | { t: 'close'; graceful: boolean }
  | { t: 'handOff'; reason: string; ttlSeconds: number }
  | { t: 'pause' }
  | { t: 'resume' }
  // A → B
  | { t: 'ready'; parameters: Record<string, unknown> }
  | { t: 'deliver'; text: string }
  | { t: 'failed'; code: string; extra: Record<string, unknown> }
  | { t: 'superseded' }
  | { t: 'gone' }

export type ToMain =
  | { t: 'ready'; port: number; adminPort: number; pid: number }
  | { t: 'failed'; message: string }
  | { t: 'streams'; counts: [string, number][] }
  | { t: 'health'; key: string; record: HealthRecord }
  | { t: 'aff-set'; key: string; affinity: Affinity; ttlSeconds: number }
  | { t: 'aff-del'; key: string; legId: string }
  | { t: 'aff-get'; id: number; key: string }
  | { t: 'store-ask'; id: number; ask: StoreAsk }
  | { t: 'dir-add'; key: string; caller: string }
  | { t: 'dir-del'; key: string }
  | { t: 'relay'; to: number; link: string; m: LinkMessage }
  | { t: 'metrics'; id: number; json: unknown[] }
  | { t: 'reloaded'; id: number; ok: boolean; report: unknown }

export type ToWorker =
  | { t: 'sync'; health: [string, HealthRecord][]; others: [string, number][]; leader: boolean }
  | { t: 'aff'; id: number; affinity: Affinity | null }
  | { t: 'store-answer'; id: number; value: unknown; error?: string }
  | { t: 'dir'; entries: [string, number, string][] }
  | { t: 'dir-add'; key: string; worker: number; caller: string }
  | { t: 'dir-del'; key: string; worker: number }
  | { t: 'relay'; from: number; link: string; m: LinkMessage }
  | { t: 'worker-gone'; worker: number }
  | { t: 'metrics'; id: number }
  | { t: 'reload'; id: number; trigger: string }
  | { t: 'drain'; signal: string }
  | { t: 'stop'; why: string }

/** The environment variable that makes `serve` a worker of a main process (its index). */
export const WORKER_ENV = 'ASSIST_GATEWAY_WORKER'
/** The public port every worker listens on (the main process picked it when the config says 0). */
export const WORKER_PORT_ENV = 'ASSIST_GATEWAY_WORKER_PORT'
/** The main process's instance id, which each worker's id extends. */
export const WORKER_INSTANCE_ENV = 'ASSIST_GATEWAY_WORKER_INSTANCE'

/** The IPC channel of a worker process, typed. */
export interface Channel {
  send: (m: ToMain) => void
  on: (fn: (m: ToWorker) => void) => void
}

export function processChannel(): Channel {
  return {
    send: m => {
      // The main process may be gone already (its `disconnect` stops this worker): nothing to tell it then.
      if (process.connected) process.send!(m, undefined, undefined, () => {})
    },
    on: fn => {
      process.on('message', m => fn(m as ToWorker))
    }
  }
}
