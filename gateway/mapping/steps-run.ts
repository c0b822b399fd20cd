import { randomUUID } from 'node:crypto'
import type { Clock } from '../clock'
import type { Store } from '../store/port'
import { GRPC } from '../upstream/grpc-codes'
import type { UnaryOutcome } from '../upstream/grpc-unary'
import { run } from './run'
import type { GrpcStep } from './steps'

// Running a mapping's unary steps (mapping/steps.ts) against one replica. A shared step (`share`) is made once
// per contact and key: the first leg or utterance to claim the key in the store makes the call and publishes
// its result; the others wait for it (polling the store), and take over a claim whose maker is gone.

/** Where the calls go: the replica's gRPC URL, its credential and configured headers. */
export interface StepTarget {
  readonly url: string
  readonly credential: string | null
  readonly headers: Readonly<Record<string, string>>
}

/** The contact the steps run for: its store key (`vendor:busNo:contactId`), the store and the TTL of what it shares. */
export interface StepScope {
  readonly store: Store
  readonly clock: Clock
  readonly contact: string
  readonly shareMs: number
  /**
   * When the whole run must be over (on `clock`; absent: no bound but each step's own deadline): an utterance's
   * `text.timeoutSeconds`. Each call's deadline and the wait for another's shared step are cut to it.
   */
  readonly until?: number
  /** False once the leg or utterance the steps run for is gone: a wait for another's shared step stops then. */
  readonly alive?: () => boolean
  /** Wall-clock ms, as a claim's until is written for every process (absent: Date.now; a test's own clock). */
  readonly wallNow?: () => number
}

/** Why the steps stopped: an expression (mapping), or a call's status (`code`, a gRPC status number). */
export type StepFailure =
  | { kind: 'mapping'; pointer: string; error: string }
  | { kind: 'status'; step: string; code: number; details: string; gateway?: boolean }

export type StepsOutcome = { ok: true; steps: Record<string, unknown> } | { ok: false; failure: StepFailure }

/** How often a leg waiting for another's shared step looks again. */
const WAIT_MS = 50
/** How long past its maker's deadline a claim holds: then its maker is taken to be gone. */
const CLAIM_GRACE_MS = 5000
/** A waiter's margin past the time a dead maker's claim takes to go stale and its taker's call to be made. */
const WAIT_MARGIN_MS = 1000
const PENDING = 'pending:'
const DONE = 'done:'

/**
 * Run `steps` in order; each sees `input` with `steps` (the results so far) and its result joins them.
 * `input` is not changed.
 */
export async function runSteps(
  steps: readonly GrpcStep[],
  input: object,
  target: StepTarget,
  scope: StepScope
): Promise<StepsOutcome> {
  const results: Record<string, unknown> = {}
  const seen = { ...input, steps: results }
  for (const step of steps) {
    if (scope.alive?.() === false) return gone(step.name)
    let key: string | null = null
    if (step.share !== null) {
      const k = await run(step.share, seen)
      if (!k.ok || typeof k.value !== 'string' || k.value === '')
        return mappingFailure(`${step.pointer}/share`, k.ok ? 'did not produce a key (a string)' : k.error)
      key = k.value
    }
    const out =
      key === null
        ? await call(step, seen, target, leftOf(step, scope))
        : await sharedOrUnavailable(step, key, seen, target, scope)
    if (!out.ok) return out
    results[step.name] = out.value
  }
  return { ok: true, steps: results }
}

/**
 * The shared results of `steps` as the store holds them for the contact (a teardown's `steps`): each step's
 * key evaluated on `input`; a step with no result in the store is left out.
 */
export async function sharedResults(
  steps: readonly GrpcStep[],
  input: object,
  scope: StepScope
): Promise<Record<string, unknown>> {
  const results: Record<string, unknown> = {}
  const seen = { ...input, steps: results }
  for (const step of steps) {
    if (step.share === null) continue
    const k = await run(step.share, seen)
    if (!k.ok || typeof k.value !== 'string') continue
    const v = await scope.store.swapShared(scope.contact, k.value, null, null, scope.shareMs)
    if (v?.startsWith(DONE) === true) results[step.name] = JSON.parse(v.slice(DONE.length))
  }
  return results
}

type One = { ok: true; value: Record<string, unknown> } | { ok: false; failure: StepFailure }

function mappingFailure(pointer: string, error: string): { ok: false; failure: StepFailure } {
  return { ok: false, failure: { kind: 'mapping', pointer, error } }
}

const NO_REQUEST = 'did not produce a request (an object)'

/** The deadline of `step`'s call: its own, cut to what is left of the scope's `until` (0 or less: none left). */
function leftOf(step: GrpcStep, scope: StepScope): number {
  return scope.until === undefined ? step.deadlineMs : Math.min(step.deadlineMs, scope.until - scope.clock.now())
}

/** A step (or an utterance's call) begun with no time left: DEADLINE_EXCEEDED, the gateway's. */
export function outOfTime(step: string): { ok: false; failure: StepFailure } {
  const details = 'no time left within the exchange’s deadline'
  return { ok: false, failure: { kind: 'status', step, code: GRPC.DEADLINE_EXCEEDED, details, gateway: true } }
}

/** One call of `step`: its request built on `input`, sent to `target` with `deadlineMs` (its own by default). */
export async function call(
  step: GrpcStep,
  input: object,
  target: StepTarget,
  deadlineMs = step.deadlineMs
): Promise<One> {
  if (deadlineMs <= 0) return outOfTime(step.name)
  return (
    (await callUnlessNull(step, input, target, deadlineMs)) ?? mappingFailure(`${step.pointer}/request`, NO_REQUEST)
  )
}

/**
 * As `call`, but a request that evaluates to null is nothing to send: null, and no call (a teardown's
 * `$exists(steps.conversation.name) ? {...} : null` when the contact's shared results are gone).
 */
export async function callUnlessNull(
  step: GrpcStep,
  input: object,
  target: StepTarget,
  deadlineMs = step.deadlineMs
): Promise<One | null> {
  const req = await run(step.request, input)
  if (req.ok && req.value === null) return null
  if (!req.ok || typeof req.value !== 'object')
    return mappingFailure(`${step.pointer}/request`, req.ok ? NO_REQUEST : req.error)
  // Required here: a process without a gRPC mapping never loads @grpc/grpc-js (upstream/vendor-leg.ts says why).
  const { unaryCall } = require('../upstream/grpc-unary') as typeof import('../upstream/grpc-unary')
  const out: UnaryOutcome = await unaryCall(
    target.url,
    step.method,
    req.value,
    { ...target.headers },
    deadlineMs,
    stepAuth(step.method.auth, target.credential, target.url)
  )
  if (out.ok) return out
  return { ok: false, failure: { kind: 'status', step: step.name, ...out } }
}

/**
 * The call credentials of a unary call (a step's, or an utterance's `text.grpc`) to the replica at `url`: with
 * `auth: google` and a credential, Google's (upstream/google-auth.ts: a token for the address, or the API key),
 * asked for before each call; else none.
 */
export function stepAuth(
  auth: 'google' | 'none',
  credential: string | null | undefined,
  url: string
): (() => Promise<Record<string, string>>) | undefined {
  if (auth !== 'google' || credential === null || credential === undefined) return undefined
  const { googleAuthHeaders } = require('../upstream/google-auth') as typeof import('../upstream/google-auth')
  const { grpcTarget } = require('../upstream/grpc-url') as typeof import('../upstream/grpc-url')
  return async () => await googleAuthHeaders(credential, grpcTarget(url).address)()
}

/**
 * A failure of the shared store (a Redis command), as a step's transient status, UNAVAILABLE (another try may
 * succeed): never thrown at the leg.
 */
export function storeFailed(step: string, err: unknown): { ok: false; failure: StepFailure } {
  const details = `the shared store failed: ${(err as Error)?.message ?? String(err)}`
  return { ok: false, failure: { kind: 'status', step, code: GRPC.UNAVAILABLE, details, gateway: true } }
}

async function sharedOrUnavailable(
  step: GrpcStep,
  key: string,
  input: object,
  target: StepTarget,
  scope: StepScope
): Promise<One> {
  try {
    return await shared(step, key, input, target, scope)
  } catch (err) {
    return storeFailed(step.name, err)
  }
}

/** The leg or utterance the steps run for is gone: CANCELLED, the gateway's. */
function gone(step: string): { ok: false; failure: StepFailure } {
  return {
    ok: false,
    failure: { kind: 'status', step, code: GRPC.CANCELLED, details: 'the leg is gone', gateway: true }
  }
}

/**
 * A shared step: the result the store holds for the contact and `key`, else the one this call makes. A claim is
 * `pending:<id>:<until>` (wall-clock ms, shared between processes): past its until (its maker's deadline and
 * CLAIM_GRACE_MS), its maker is taken to be gone and the claim is taken over. A failed call gives the claim up,
 * so a waiting leg tries in its turn. A waiter waits long enough to see a claim made just before it go stale and
 * its own call made (at least 3 deadlines; within the scope's `until`), and stops when its leg is gone.
 */
async function shared(step: GrpcStep, key: string, input: object, target: StepTarget, scope: StepScope): Promise<One> {
  const { store, contact, shareMs, clock } = scope
  const wallNow = scope.wallNow ?? Date.now
  const d = step.deadlineMs
  const waitMs = Math.max(3 * d, d + CLAIM_GRACE_MS + d + WAIT_MARGIN_MS)
  const giveUpAt = Math.min(clock.now() + waitMs, scope.until ?? Number.POSITIVE_INFINITY)
  let expect: string | null = null
  for (;;) {
    const mine = `${PENDING}${randomUUID()}:${wallNow() + d + CLAIM_GRACE_MS}`
    const v = await store.swapShared(contact, key, expect, mine, shareMs)
    if (v === mine) {
      const out = await call(step, input, target, leftOf(step, scope))
      const done = out.ok ? `${DONE}${JSON.stringify(out.value)}` : null
      await store.swapShared(contact, key, mine, done, shareMs)
      return out
    }
    if (v?.startsWith(DONE) === true) return { ok: true, value: JSON.parse(v.slice(DONE.length)) }
    if (scope.alive?.() === false) return gone(step.name)
    if (clock.now() >= giveUpAt)
      return {
        ok: false,
        failure: {
          kind: 'status',
          step: step.name,
          code: GRPC.DEADLINE_EXCEEDED,
          details: 'another leg did not finish it',
          gateway: true
        }
      }
    // Someone else's claim (or none left: try again at once); a claim past its until is taken over.
    const until = v === null ? 0 : Number(v.slice(v.lastIndexOf(':') + 1))
    expect = v !== null && until < wallNow() ? v : null
    if (v !== null && expect === null) await new Promise<void>(r => scope.clock.setTimeout(r, WAIT_MS))
  }
}

/**
 * The key of a contact's shared step results, audio and text alike: the tenant's namespace on the route
 * (route.ts `namespaceOf`, as every key of a call starts), busNo, contactId and the mapping's
 * vendor. Another tenant's leg or chat naming the same busNo and contactId never finds them.
 */
export function contactKey(
  namespace: string,
  vendor: string,
  c: { busNo: string | number; contactId: string | number }
): string {
  return `${namespace}:${c.busNo}:${c.contactId}:${vendor}`
}
