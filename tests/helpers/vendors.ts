import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse, stringify } from 'yaml'
import type { RealVendorEmulator } from '../../gateway/tools/real-vendors'
import { startGateway, type TestGateway } from './gateway'

type T = Parameters<typeof startGateway>[0]

/**
 * A gateway with one route `x` to one real-vendor emulator: the platform's audio token required, the
 * vendor's key as the replica's credential (a ${VAR}, as the contract asks), `params` as route params.
 */
export async function vendorGateway(
  t: T,
  emu: RealVendorEmulator,
  mapping: string,
  key: string,
  params: Record<string, unknown> = {}
): Promise<TestGateway> {
  return await startGateway(
    t,
    {
      routes: {
        x: {
          mapping,
          auth: { audio: ['${AUDIO_TOKEN}'] },
          upstreams: [{ name: 'v', audio: emu.url, credential: '${VENDOR_KEY}' }],
          params
        }
      }
    },
    { VENDOR_KEY: key }
  )
}

type Json = Record<string, any>
type Sub = T & { test: (name: string, fn: (t: any) => Promise<void>) => Promise<unknown> }

/**
 * A test-only copy of the shipped mapping `mappings/<name>.yaml`, changed by `edit`, in this test's testdir.
 * The gateway (whose helper makes its own testdir, emptying the test's) then runs in a subtest given the
 * copy's path.
 */
export async function withMappingCopy<S extends Sub>(
  t: S,
  name: string,
  edit: (m: Json) => void,
  fn: (t: S, file: string) => Promise<void>
): Promise<void> {
  const mapping = parse(readFileSync(join(__dirname, '..', '..', 'mappings', `${name}.yaml`), 'utf8')) as Json
  edit(mapping)
  const dir = t.testdir({ [`${name}-test.yaml`]: stringify(mapping) })
  await t.test('with the test copy of the mapping', async (sub: S) => await fn(sub, join(dir, `${name}-test.yaml`)))
}
