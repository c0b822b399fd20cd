// The states of one text hook request (server/text-exchange.ts) and what every event does in each: a total
// table, so a new state or event does not compile until every row says what it does there.

/**
 * - HEAD: the head is being checked (the exchange's constructor); nothing of the body is read.
 * - READING: the body is being read, up to text.maxBodyBytes.
 * - DRAINING: a declared body at most DRAIN_BYTES over the limit is read to its end; a 413 follows.
 * - PARSING: the body is read; the vendor call waits for uWS's parse pass (a pipelined request behind this
 *   one aborts it).
 * - DISPATCHED: the text hook has the utterance.
 * - DEFERRED: an answer that closes the connection waits for uWS's parse pass (front-door.ts, afterParse).
 * - ANSWERED: the answer was sent.
 * - GONE: the platform went away (uWS's onAborted): the response MUST never be touched again; an answer
 *   still coming is dropped.
 * - GONE_PARSING: the platform went away while its body waited for the parse pass: that pass counts it
 *   (`aborted_before_dispatch`), and the exchange is GONE.
 */
export type ExchangeState =
  | 'HEAD'
  | 'READING'
  | 'DRAINING'
  | 'PARSING'
  | 'DISPATCHED'
  | 'DEFERRED'
  | 'ANSWERED'
  | 'GONE'
  | 'GONE_PARSING'

/**
 * - read / drain: the head passed; its body is read, or drained (declared a little over the limit).
 * - body: the body was read whole. over: it went over the limit (read past it, or a drained body ended).
 * - parsed: uWS's parse pass after the body. defer: an answer that closes the connection is ready. answer: an
 *   answer goes now (one that does not close the connection, or a deferred one after the parse pass).
 * - abort: uWS's onAborted.
 */
export type ExchangeEvent = 'read' | 'drain' | 'body' | 'over' | 'parsed' | 'defer' | 'answer' | 'abort'

/**
 * What the exchange does on each event (`ignore`: nothing). `count-abort` counts and logs a request the
 * platform left before dispatch; `drop` logs an answer nobody waits for. Each event has its own few, so the
 * code that reads one switches over those alone, with no default.
 */
export interface ExchangeActions {
  read: 'read' | 'ignore'
  drain: 'drain' | 'ignore'
  body: 'await-parse' | 'ignore'
  over: 'too-large' | 'ignore'
  parsed: 'dispatch' | 'count-abort' | 'ignore'
  defer: 'defer' | 'ignore'
  answer: 'send' | 'drop' | 'ignore'
  abort: 'ignore'
}
export type ExchangeAction = ExchangeActions[ExchangeEvent]

export type ExchangeStep<E extends ExchangeEvent = ExchangeEvent> = readonly [
  action: ExchangeActions[E],
  to: ExchangeState
]

const IGNORE = (s: ExchangeState): readonly ['ignore', ExchangeState] => ['ignore', s]

/**
 * Every event in every state. An `ignore` in a live state is an event its code never raises there (a body
 * before the head passed, a parse pass without a body); in GONE it is the abort's whole point.
 */
export const NEXT: { readonly [S in ExchangeState]: { readonly [E in ExchangeEvent]: ExchangeStep<E> } } = {
  HEAD: {
    read: ['read', 'READING'],
    drain: ['drain', 'DRAINING'],
    body: IGNORE('HEAD'),
    over: IGNORE('HEAD'),
    parsed: IGNORE('HEAD'),
    defer: ['defer', 'DEFERRED'],
    answer: ['send', 'ANSWERED'],
    abort: IGNORE('GONE')
  },
  READING: {
    read: IGNORE('READING'),
    drain: IGNORE('READING'),
    body: ['await-parse', 'PARSING'],
    over: ['too-large', 'READING'],
    parsed: IGNORE('READING'),
    defer: ['defer', 'DEFERRED'],
    answer: ['send', 'ANSWERED'],
    abort: IGNORE('GONE')
  },
  DRAINING: {
    read: IGNORE('DRAINING'),
    drain: IGNORE('DRAINING'),
    body: IGNORE('DRAINING'),
    over: ['too-large', 'DRAINING'],
    parsed: IGNORE('DRAINING'),
    defer: ['defer', 'DEFERRED'],
    answer: ['send', 'ANSWERED'],
    abort: IGNORE('GONE')
  },
  PARSING: {
    read: IGNORE('PARSING'),
    drain: IGNORE('PARSING'),
    body: IGNORE('PARSING'),
    over: IGNORE('PARSING'),
    parsed: ['dispatch', 'DISPATCHED'],
    defer: ['defer', 'DEFERRED'],
    answer: ['send', 'ANSWERED'],
    abort: IGNORE('GONE_PARSING')
  },
  DISPATCHED: {
    read: IGNORE('DISPATCHED'),
    drain: IGNORE('DISPATCHED'),
    body: IGNORE('DISPATCHED'),
    over: IGNORE('DISPATCHED'),
    parsed: IGNORE('DISPATCHED'),
    defer: ['defer', 'DEFERRED'],
    answer: ['send', 'ANSWERED'],
    abort: IGNORE('GONE')
  },
  DEFERRED: {
    read: IGNORE('DEFERRED'),
    drain: IGNORE('DEFERRED'),
    body: IGNORE('DEFERRED'),
    over: IGNORE('DEFERRED'),
    parsed: IGNORE('DEFERRED'),
    defer: IGNORE('DEFERRED'),
    answer: ['send', 'ANSWERED'],
    abort: IGNORE('GONE')
  },
  ANSWERED: {
    read: IGNORE('ANSWERED'),
    drain: IGNORE('ANSWERED'),
    body: IGNORE('ANSWERED'),
    over: IGNORE('ANSWERED'),
    parsed: IGNORE('ANSWERED'),
    defer: IGNORE('ANSWERED'),
    answer: IGNORE('ANSWERED'),
    abort: IGNORE('ANSWERED')
  },
  // An answer still coming (a refusal, or the hook's) waits for the parse pass as it would have, then is dropped.
  GONE: {
    read: IGNORE('GONE'),
    drain: IGNORE('GONE'),
    body: IGNORE('GONE'),
    over: IGNORE('GONE'),
    parsed: IGNORE('GONE'),
    defer: ['defer', 'GONE'],
    answer: ['drop', 'GONE'],
    abort: IGNORE('GONE')
  },
  GONE_PARSING: {
    read: IGNORE('GONE_PARSING'),
    drain: IGNORE('GONE_PARSING'),
    body: IGNORE('GONE_PARSING'),
    over: IGNORE('GONE_PARSING'),
    parsed: ['count-abort', 'GONE'],
    defer: ['defer', 'GONE_PARSING'],
    answer: ['drop', 'GONE_PARSING'],
    abort: IGNORE('GONE_PARSING')
  }
}

/**
 * How the answer leaves the connection, known from the head: open (`keep`); closed because the client said
 * `connection: close` or its head was refused (`close`); closed after a declared body a little over the limit
 * was read to its end (`drain`). An answer that closes it goes after uWS's parse pass.
 */
export type Ending = 'keep' | 'close' | 'drain'
