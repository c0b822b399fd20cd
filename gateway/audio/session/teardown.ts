import type { MappingInput } from '../../mapping/run'
import { callUnlessNull, sharedResults } from '../../mapping/steps-run'
import type { Replica } from '../../upstream/pool'
import type { Connection } from '../connection/connection-contract'
import { stepsOn } from '../connection/setup-steps'
import { audioMappingOf } from './session-parts'
import type { SessionDeps } from './session-contract'

/**
 * A leg's vendor session ended for good (not handed off): its affinity goes and, when a setup of its joined the
 * contact's group (`joinedOn`: the replica of the last setup that did, whether its stream then opened, was
 * refused or never came), the leg leaves the group and the mapping's teardown runs there (mapping/steps.ts):
 * `each` steps always, `last` ones when no other leg of the contact is left, after which the contact's shared
 * results are dropped. A step whose request is null is skipped. After `conn` closed: a stream's last results come
 * before its conversation is completed. In the background; a failure is logged, never the leg's.
 */
export function sessionOver(
  deps: SessionDeps,
  key: string,
  id: string,
  input: MappingInput,
  conn: Connection | null,
  joinedOn: Replica | null | undefined
): void {
  deps.store.deleteAffinity(key, id)
  const audio = audioMappingOf(deps.route)
  if ((audio.setup?.length ?? 0) === 0 || joinedOn == null) return
  const go = (): void =>
    void teardown(deps, joinedOn, input).catch((err: Error) =>
      deps.log.warn({ event: 'teardown_failed', err: err.message }, 'the mapping teardown could not run')
    )
  if (conn?.whenClosed !== undefined) conn.whenClosed(go)
  else go()
}

async function teardown(deps: SessionDeps, replica: Replica, input: MappingInput): Promise<void> {
  const audio = audioMappingOf(deps.route)
  const on = stepsOn(deps, audio, replica, input.leg)
  if (on === null) return
  const { store, contact, shareMs } = on.scope
  const left = await store.countMembers(contact, on.member, false, shareMs).catch((err: Error) => err)
  if (typeof left !== 'number' && (audio.teardown ?? []).some(s => s.when === 'last'))
    deps.log.warn(
      { event: 'teardown_last_skipped', why: left === null ? 'the shared store is away' : left.message },
      "the contact's other legs cannot be counted: its `when: last` teardown steps do not run, its shared results stay"
    )
  const steps = (audio.teardown ?? []).filter(s => s.when === 'each' || left === 0)
  const seen = { ...input, steps: steps.length === 0 ? {} : await sharedResults(audio.setup ?? [], input, on.scope) }
  for (const step of steps) {
    // A request that is null is nothing to send (the contact's shared results are gone): skipped, not a failure.
    const out = await callUnlessNull(step, seen, on.target)
    if (out !== null && !out.ok)
      deps.log.warn(
        { event: 'teardown_failed', step: step.name, upstream: replica.name, failure: out.failure },
        'a mapping teardown step failed'
      )
  }
  if (left === 0) await store.dropShared(contact)
}
