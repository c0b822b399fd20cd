/**
 * `npm run bench -- tee [--legs N (500)] [--seconds S (10)] [--warmup S (3)] [--rounds 2]`
 *
 * Gateway CPU per platform frame of a plain leg (one vendor session) against a leg with one tee (the same
 * audio to a second vendor session, its results dropped), on one gateway process, A B A B (ab.ts). Both
 * routes use mappings/passthrough.yaml; the sink is the primary and the tee vendor alike, so the vendor
 * received twice the bytes per platform frame on the teed route.
 */
import { AB_FLAGS, runAb } from './ab'
import { numberFlag } from './lib'

export const TEE_FLAGS = ['legs', ...AB_FLAGS]

export async function runTee(flags: Map<string, string>): Promise<Record<string, unknown>> {
  const legs = numberFlag(flags, 'legs', 500, { integer: true, min: 1, max: 10_000 })
  return {
    legs,
    ...(await runAb(
      {
        name: 'tee',
        title: `tee: ${legs} legs, a plain leg vs a leg with one tee (results: drop), gateway CPU per platform frame`,
        legs,
        perspectives: ['TX'],
        variants: [
          { key: 'plain', label: 'plain leg (passthrough)', route: { mapping: 'passthrough' } },
          {
            key: 'teed',
            label: 'leg with one tee (passthrough + passthrough)',
            route: {
              mapping: 'passthrough',
              tee: [{ name: 'shadow', mapping: 'passthrough', results: 'drop' }]
            }
          }
        ],
        ratioKey: 'teedOverPlain',
        flags
      },
      { audio: { reattachGraceSeconds: 0 } }
    ))
  }
}
