import { byEvent, orStay, type Row } from '../state-table'

// The stages of one server process (server/lifecycle.ts) and what every event does in each: total tables,
// so a new stage or a new event does not compile until every row says what it does there.

/**
 * - starting: its listeners are being opened (nothing is served yet; the process cannot be signalled to it).
 * - serving: listening; new legs and requests are taken, /readyz is ready.
 * - leaving: a drain has begun: /readyz answers 503 while new work is still served (shutdown.drainDelaySeconds).
 * - draining: the public listener is closed and new work gets SHUTTING_DOWN; live legs end one by one
 *   (shutdown.legDrainSeconds) while text requests in flight are answered.
 * - closed: everything is closed but the metrics listener, which may linger for a final scrape. Final.
 */
export type ServerStage = 'starting' | 'serving' | 'leaving' | 'draining' | 'closed'

/**
 * - listening: every listener is open (it brings what closes them).
 * - drain: a stop signal (or the main process's drain): the graceful drain.
 * - delay-over: shutdown.drainDelaySeconds have passed since the drain began.
 * - drained: no leg and no text request is left.
 * - deadline: shutdown.deadlineSeconds have passed since the drain began.
 * - stop-now: a second signal (or the main process gone): stop at once.
 * - close: the process is done with the server (after its drain, or at a failure).
 */
export const SERVER_EVENTS = ['listening', 'drain', 'delay-over', 'drained', 'deadline', 'stop-now', 'close'] as const
export type ServerEvent = (typeof SERVER_EVENTS)[number]

/**
 * - serve: the listeners opened: serving.
 * - begin-drain: /readyz 503, the drain's timers armed.
 * - stop-accepting: the public listener closed, the live legs drained one by one.
 * - end-drain: the legs left drained (handed off), everything closed, the drain's promise resolved.
 * - finish: everything closed, with no drain to end (listeners that open after it close at once).
 * - join: nothing new (a drain asked again gets the running drain's promise).
 * - ignore: nothing (the event cannot matter in this stage).
 */
export type ServerAction = 'serve' | 'begin-drain' | 'stop-accepting' | 'end-drain' | 'finish' | 'join' | 'ignore'

export type ServerStep = readonly [ServerAction, ServerStage]

// The steps that leave the stage, named after what they do (a bare action keeps the stage).
const SERVE: ServerStep = ['serve', 'serving']
const BEGIN_DRAIN: ServerStep = ['begin-drain', 'leaving']
const STOP_ACCEPTING: ServerStep = ['stop-accepting', 'draining']
const END_DRAIN: ServerStep = ['end-drain', 'closed']
const FINISH: ServerStep = ['finish', 'closed']

/**
 * Every event in every stage: what is done, and the stage after it (a bare action keeps the stage). Closed
 * before it listens (a stop or a close while starting), nothing is drained and what opens closes at once.
 * While leaving, new work is still served for the delay: an idle moment (drained) is not the end of the drain.
 */
// biome-ignore format: a row per stage, a cell per event of SERVER_EVENTS, in its order
const ROWS: { readonly [s in ServerStage]: Row<typeof SERVER_EVENTS, Record<ServerEvent, ServerStep | ServerAction>> } = {
  //         listening drain        delay-over      drained    deadline   stop-now   close
  starting: [SERVE,    FINISH,      'ignore',       'ignore',  'ignore',  FINISH,    FINISH],
  serving:  ['ignore', BEGIN_DRAIN, 'ignore',       'ignore',  'ignore',  FINISH,    FINISH],
  leaving:  ['ignore', 'join',      STOP_ACCEPTING, 'ignore',  END_DRAIN, END_DRAIN, END_DRAIN],
  draining: ['ignore', 'join',      'ignore',       END_DRAIN, END_DRAIN, END_DRAIN, END_DRAIN],
  closed:   [FINISH,   'join',      'ignore',       'ignore',  'ignore',  'ignore',  'ignore']
}

/** SERVER_STEPS[stage][event]: the rows above, keyed by event. */
export const SERVER_STEPS: { readonly [s in ServerStage]: { readonly [e in ServerEvent]: ServerStep } } = byEvent(
  SERVER_EVENTS,
  ROWS,
  orStay
)

/** /readyz answers 503 (the instance is leaving the load balancer's rotation). */
export const LEAVING: Record<ServerStage, boolean> = {
  starting: false,
  serving: false,
  leaving: true,
  draining: true,
  closed: true
}

/** New upgrades and text requests get SHUTTING_DOWN (`ServerState.draining`). */
export const REFUSES_NEW_WORK: Record<ServerStage, boolean> = {
  starting: false,
  serving: false,
  leaving: false,
  draining: true,
  closed: true
}
