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
export type ServerEvent = 'listening' | 'drain' | 'delay-over' | 'drained' | 'deadline' | 'stop-now' | 'close'

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

/** Every event in every stage: what is done, and the stage after it. */
export const SERVER_STEPS: { readonly [s in ServerStage]: { readonly [e in ServerEvent]: ServerStep } } = {
  // Closed before it listens (a stop or a close while starting): nothing is drained, what opens closes at once.
  starting: {
    listening: ['serve', 'serving'],
    drain: ['finish', 'closed'],
    'delay-over': ['ignore', 'starting'],
    drained: ['ignore', 'starting'],
    deadline: ['ignore', 'starting'],
    'stop-now': ['finish', 'closed'],
    close: ['finish', 'closed']
  },
  serving: {
    listening: ['ignore', 'serving'],
    drain: ['begin-drain', 'leaving'],
    'delay-over': ['ignore', 'serving'],
    drained: ['ignore', 'serving'],
    deadline: ['ignore', 'serving'],
    'stop-now': ['finish', 'closed'],
    close: ['finish', 'closed']
  },
  leaving: {
    listening: ['ignore', 'leaving'],
    drain: ['join', 'leaving'],
    'delay-over': ['stop-accepting', 'draining'],
    // Still serving new work for the delay: an idle moment is not the end of the drain.
    drained: ['ignore', 'leaving'],
    deadline: ['end-drain', 'closed'],
    'stop-now': ['end-drain', 'closed'],
    close: ['end-drain', 'closed']
  },
  draining: {
    listening: ['ignore', 'draining'],
    drain: ['join', 'draining'],
    'delay-over': ['ignore', 'draining'],
    drained: ['end-drain', 'closed'],
    deadline: ['end-drain', 'closed'],
    'stop-now': ['end-drain', 'closed'],
    close: ['end-drain', 'closed']
  },
  closed: {
    listening: ['finish', 'closed'],
    drain: ['join', 'closed'],
    'delay-over': ['ignore', 'closed'],
    drained: ['ignore', 'closed'],
    deadline: ['ignore', 'closed'],
    'stop-now': ['ignore', 'closed'],
    close: ['ignore', 'closed']
  }
}

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
