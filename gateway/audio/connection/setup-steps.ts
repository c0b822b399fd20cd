import type { AudioMapping } from '../../mapping/audio'
import type { MappingInput } from '../../mapping/run'
import {
  contactKey,
  runSteps,
  type StepFailure,
  type StepScope,
  type StepTarget,
  storeFailed
} from '../../mapping/steps-run'
import { GRPC } from '../../upstream/grpc-codes'
import type { Replica } from '../../upstream/pool'
import type { ConnectionContext, VendorFailure } from './connection-contract'

// A gRPC mapping's `audio.setup` (mapping/steps.ts): unary calls each vendor connection makes before its
// stream opens, on the connection's replica. A step shared per contact (a conversation, a participant per
// perspective) is made once and read back by every connection after it: failover and rotation reuse it.

/** Where a leg's steps go on `replica`, and what they share with the contact's other legs and its chat. */
export function stepsOn(
  ctx: Pick<ConnectionContext, 'route' | 'clock' | 'store' | 'namespace'>,
  audio: AudioMapping,
  replica: Replica,
  leg: MappingInput['leg']
): { target: StepTarget; scope: StepScope; member: string } | null {
  const store = ctx.store
  const url = replica.config.audio
  if (store === undefined || url === undefined) return null
  return {
    target: { url, credential: replica.config.credential ?? null, headers: replica.config.headers },
    scope: {
      store,
      clock: ctx.clock,
      contact: contactKey(ctx.namespace, ctx.route.mapping.vendor, leg),
      shareMs: audio.shareMs ?? 0
    },
    member: `${leg.route}:${leg.perspective}`
  }
}

/**
 * The setup's results (null: the mapping has no setup), or why it failed: a call's status as the stream's own
 * status would be (a close with 4000 + the code, for the mapping's closeCodes), an expression as a mapping failure.
 * UNAVAILABLE (the replica is down or cannot be reached: "retry", says gRPC) is an unreachable replica, charged
 * to it, and the next one is tried, unless the mapping's closeCodes class 4014 themselves; so is RESOURCE_EXHAUSTED
 * (a region's quota: another region has its own) while 4008 is a rate (its default class); so is a failure of the
 * shared store (a Redis command that failed: mapping/steps-run.ts `storeFailed`), here as in the steps.
 * A leg whose setup succeeded joins its contact's group (a teardown's `when: last` counts it), unless its
 * connection is no longer being built (`building`: the leg closed, or its session gave the connection up,
 * meanwhile): a connection gone is no member. The join is recorded on the session (`ctx.group`) before it is
 * sent, so a session ending from then on leaves the group, whatever became of its stream.
 */
export async function runSetup(
  ctx: ConnectionContext,
  audio: AudioMapping,
  replica: Replica,
  input: MappingInput,
  building: () => boolean
): Promise<{ ok: true; steps: Record<string, unknown> } | { ok: false; failure: VendorFailure } | null> {
  const steps = audio.setup ?? []
  if (steps.length === 0) return null
  const on = stepsOn(ctx, audio, replica, input.leg)
  if (on === null) return null
  const out = await runSteps(steps, input, on.target, { ...on.scope, alive: building })
  if (!out.ok) return { ok: false, failure: setupFailure(audio, out.failure) }
  if (!building()) return out
  if (ctx.group !== undefined) ctx.group.joinedOn = replica
  try {
    await on.scope.store.countMembers(on.scope.contact, on.member, true, on.scope.shareMs)
  } catch (err) {
    return { ok: false, failure: setupFailure(audio, storeFailed('join', err).failure) }
  }
  return out
}

/** A step's failure as the connection's (see `runSetup`). */
function setupFailure(audio: AudioMapping, f: StepFailure): VendorFailure {
  if (f.kind === 'mapping') return { kind: 'mapping', stage: 'open', error: `${f.pointer}: ${f.error}` }
  const { statusName } = require('../../upstream/grpc-unary') as typeof import('../../upstream/grpc-unary')
  const reason = `setup ${f.step}: ${statusName(f.code)}${f.details === '' ? '' : `: ${f.details}`}`
  const socket = { kind: 'grpc', status: f.code } as const
  const cls = audio.closeCodes[4000 + f.code]
  const failsOver =
    f.code === GRPC.UNAVAILABLE
      ? cls === undefined
      : f.code === GRPC.RESOURCE_EXHAUSTED && (cls ?? 'rate-exceeded') === 'rate-exceeded'
  if (failsOver) return { kind: 'unreachable', socket }
  return { kind: 'closed', code: 4000 + f.code, reason, socket }
}
