import { byEvent, orStay, type Row } from '../state-table'

// The stages of the main process of `serve --workers N` (workers/supervisor-lifecycle.ts) and of each of
// its worker slots (workers/worker-slots.ts), with what every event does in each: total tables, so a new
// stage or event does not compile until every row says what it does there.

/**
 * - starting: the workers are being forked; the start fails if one fails or exits before serving.
 * - serving: every worker served once; one that exits is restarted (with backoff).
 * - stopped: told to stop at once with no drain (a second signal before any drain); no worker is restarted.
 * - draining: every worker drains; /readyz answers 503; no worker is restarted; the final scrape may linger.
 * - closed: every worker has exited and the listeners are closed, or the start failed. Final.
 */
export type SupervisorStage = 'starting' | 'serving' | 'stopped' | 'draining' | 'closed'

/**
 * - all-ready: every worker reported ready.
 * - start-failed: a worker failed or exited before serving, or the main process's listeners could not open.
 * - drain: a stop signal: the graceful drain on every worker.
 * - stop-now: a second signal: every worker stops at once (no lingering for a final scrape).
 * - drained: every worker exited, the final scrape was answered or given up on, the listeners closed.
 */
export const SUPERVISOR_EVENTS = ['all-ready', 'start-failed', 'drain', 'stop-now', 'drained'] as const
export type SupervisorEvent = (typeof SUPERVISOR_EVENTS)[number]

/**
 * - serve: the start succeeded.
 * - abandon: every worker killed; a start under way fails.
 * - begin-drain: every worker told to drain; /readyz 503.
 * - stop-workers: every worker told to stop at once; no lingering.
 * - close: the drain is over.
 * - join: nothing new (a drain asked again gets the running drain's promise).
 * - ignore: nothing.
 */
export type SupervisorAction = 'serve' | 'abandon' | 'begin-drain' | 'stop-workers' | 'close' | 'join' | 'ignore'

export type SupervisorStep = readonly [SupervisorAction, SupervisorStage]

/**
 * Every event in every stage: what is done, and the stage after it (a bare action keeps the stage). Signals
 * are installed once the start has succeeded: a stop during the start can only come from a caller.
 */
// biome-ignore format: a row per stage, a cell per event of SUPERVISOR_EVENTS, in its order
const ROWS: {
  readonly [s in SupervisorStage]: Row<typeof SUPERVISOR_EVENTS, Record<SupervisorEvent, SupervisorStep | SupervisorAction>>
} = {
  //         all-ready             start-failed           drain                        stop-now                     drained
  starting: [['serve', 'serving'], ['abandon', 'closed'], ['abandon', 'closed'],       ['abandon', 'closed'],       'ignore'],
  serving:  ['ignore',             ['abandon', 'closed'], ['begin-drain', 'draining'], ['stop-workers', 'stopped'], 'ignore'],
  stopped:  ['ignore',             'ignore',              ['begin-drain', 'draining'], 'stop-workers',              'ignore'],
  draining: ['ignore',             'ignore',              'join',                      'stop-workers',              ['close', 'closed']],
  closed:   ['ignore',             'ignore',              'join',                      'ignore',                    'ignore']
}

/** SUPERVISOR_STEPS[stage][event]: the rows above, keyed by event. */
export const SUPERVISOR_STEPS: {
  readonly [s in SupervisorStage]: { readonly [e in SupervisorEvent]: SupervisorStep }
} = byEvent(SUPERVISOR_EVENTS, ROWS, orStay)

/** A worker process exits: restarted, the start failed (unless it had served), or let go (the gateway is stopping). */
export const ON_WORKER_EXIT: Record<SupervisorStage, 'restart' | 'fail-start-unless-up' | 'let-go'> = {
  starting: 'fail-start-unless-up',
  serving: 'restart',
  stopped: 'let-go',
  draining: 'let-go',
  closed: 'let-go'
}

/** A worker's restart falls due (after its backoff): forked, or skipped because the gateway is stopping. */
export const ON_RESTART_DUE: Record<SupervisorStage, 'spawn' | 'skip'> = {
  starting: 'spawn',
  serving: 'spawn',
  stopped: 'skip',
  draining: 'skip',
  closed: 'skip'
}

/** A worker says it could not start (`failed`): the start fails, or nothing (its exit decides). */
export const ON_WORKER_FAILED: Record<SupervisorStage, 'fail-start' | 'ignore'> = {
  starting: 'fail-start',
  serving: 'ignore',
  stopped: 'ignore',
  draining: 'ignore',
  closed: 'ignore'
}

/** The main process's /readyz answers 503 (leaving the load balancer's rotation). */
export const LEAVING: Record<SupervisorStage, boolean> = {
  starting: false,
  serving: false,
  stopped: false,
  draining: true,
  closed: true
}

/**
 * A worker slot: never started, its process starting (forked, not yet ready), up (serving), or exited
 * (its restart may be due).
 */
export type SlotStage = 'unstarted' | 'starting' | 'up' | 'exited'

/** Whether a slot's worker counts as up: its admin listener is reached, it is synced and asked for metrics. */
export const SLOT_UP: Record<SlotStage, boolean> = {
  unstarted: false,
  starting: false,
  up: true,
  exited: false
}
