import { byEvent, orStay, type Row } from '../state-table'

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
export const EXCHANGE_EVENTS = ['read', 'drain', 'body', 'over', 'parsed', 'defer', 'answer', 'abort'] as const
export type ExchangeEvent = (typeof EXCHANGE_EVENTS)[number]

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

// The steps that leave the state, named after what they do (a bare action keeps the state).
const READ: ExchangeStep<'read'> = ['read', 'READING']
const DRAIN: ExchangeStep<'drain'> = ['drain', 'DRAINING']
const AWAIT_PARSE: ExchangeStep<'body'> = ['await-parse', 'PARSING']
const DISPATCH: ExchangeStep<'parsed'> = ['dispatch', 'DISPATCHED']
const COUNT_ABORT: ExchangeStep<'parsed'> = ['count-abort', 'GONE']
const DEFER: ExchangeStep<'defer'> = ['defer', 'DEFERRED']
const SEND: ExchangeStep<'answer'> = ['send', 'ANSWERED']
const GONE: ExchangeStep<'abort'> = ['ignore', 'GONE']
const GONE_PARSING: ExchangeStep<'abort'> = ['ignore', 'GONE_PARSING']

/** A cell of the table: a step, or a bare action that keeps the state. */
type ExchangeCells = { readonly [E in ExchangeEvent]: ExchangeStep<E> | ExchangeActions[E] }

/**
 * Every event in every state (a bare action keeps the state). An `ignore` in a live state is an event its
 * code never raises there (a body before the head passed, a parse pass without a body); in GONE it is the
 * abort's whole point. Once the platform is gone, an answer still coming (a refusal, or the hook's) waits for
 * the parse pass as it would have, then is dropped.
 */
// biome-ignore format: a row per state, a cell per event of EXCHANGE_EVENTS, in its order
const ROWS: { readonly [S in ExchangeState]: Row<typeof EXCHANGE_EVENTS, ExchangeCells> } = {
  //             read      drain     body         over         parsed       defer     answer    abort
  HEAD:         [READ,     DRAIN,    'ignore',    'ignore',    'ignore',    DEFER,    SEND,     GONE],
  READING:      ['ignore', 'ignore', AWAIT_PARSE, 'too-large', 'ignore',    DEFER,    SEND,     GONE],
  DRAINING:     ['ignore', 'ignore', 'ignore',    'too-large', 'ignore',    DEFER,    SEND,     GONE],
  PARSING:      ['ignore', 'ignore', 'ignore',    'ignore',    DISPATCH,    DEFER,    SEND,     GONE_PARSING],
  DISPATCHED:   ['ignore', 'ignore', 'ignore',    'ignore',    'ignore',    DEFER,    SEND,     GONE],
  DEFERRED:     ['ignore', 'ignore', 'ignore',    'ignore',    'ignore',    'ignore', SEND,     GONE],
  ANSWERED:     ['ignore', 'ignore', 'ignore',    'ignore',    'ignore',    'ignore', 'ignore', 'ignore'],
  GONE:         ['ignore', 'ignore', 'ignore',    'ignore',    'ignore',    'defer',  'drop',   'ignore'],
  GONE_PARSING: ['ignore', 'ignore', 'ignore',    'ignore',    COUNT_ABORT, 'defer',  'drop',   'ignore']
}

/** NEXT[state][event]: the rows above, keyed by event. */
export const NEXT: { readonly [S in ExchangeState]: { readonly [E in ExchangeEvent]: ExchangeStep<E> } } = byEvent(
  EXCHANGE_EVENTS,
  ROWS,
  orStay
)

/**
 * How the answer leaves the connection, known from the head: open (`keep`); closed because the client said
 * `connection: close` or its head was refused (`close`); closed after a declared body a little over the limit
 * was read to its end (`drain`). An answer that closes it goes after uWS's parse pass.
 */
export type Ending = 'keep' | 'close' | 'drain'
