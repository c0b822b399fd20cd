import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse, stringify } from 'yaml'
import type { Test } from 'tap'
import {
  type RealVendorEmulator,
  type RealVendorOptions,
  type RealVendorSession,
  startRealVendor
} from '../../gateway/tools/real-vendors'
import { stream } from './audio'
import { platformLeg, startGateway, until, type PlatformLegClient, type TestGateway } from './gateway'

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

/**
 * A call over two replicas whose first-used one is dropped half-way (TCP cut, no close): 1.5 s of the clip,
 * the drop, 1.5 s more, the hang-up; resolves once the replacement session has ended. `perMulawByte`: bytes
 * the vendor counts per platform µ-law byte (PCM16: 2; at 24 kHz: 6). Returns both sessions and the audio sent.
 */
export async function failoverCall(
  t: Test,
  leg: PlatformLegClient,
  a: RealVendorEmulator,
  b: RealVendorEmulator,
  perMulawByte = 1
): Promise<{ lost: RealVendorSession; s: RealVendorSession; sent: Buffer }> {
  const [first, other] = a.sessions().length === 1 ? [a, b] : [b, a]
  const before = await stream(leg, 0, 75)
  t.ok(
    await until(() => first.sessions()[0]?.audioBytes === before.length * perMulawByte, 3000),
    'all of it reached the first'
  )
  first.dropAll()
  const after = await stream(leg, 75, 150)
  leg.ws.close(1000)
  t.ok(await until(() => other.sessions()[0]?.closed === true, 8000), 'the replacement session ended')
  return { lost: first.sessions()[0], s: other.sessions()[0], sent: Buffer.concat([before, after]) }
}

/** A config (YAML) of route `x` on the Amazon Transcribe mapping: `more` lines of the route, then its replicas (a YAML flow sequence's items). */
export function transcribeConfig(upstreams: string, ...more: string[]): string {
  return [
    'routes:',
    '  x:',
    '    mapping: mappings/amazon-transcribe.yaml',
    ...more,
    `    upstreams: [${upstreams}]`
  ].join('\n')
}

/** Every vendor message on route `x` so far was matched by a mapping rule: none counted unmatched or in error (`why` says which). */
export async function everyMessageMatched(
  t: { notMatch: (found: unknown, wanted: RegExp, message: string) => unknown },
  gw: TestGateway,
  why: string
): Promise<void> {
  const m = await (await fetch(gw.adminUrl('/metrics'))).text()
  t.notMatch(m, /^assist_gateway_audio_vendor_messages_total\{route="x",result="(unmatched|error)"\} [1-9]/m, why)
}

/** A real-vendor emulator in this process (gateway/tools/real-vendors.ts), closed at teardown. */
export async function realVendor(t: T, opts: RealVendorOptions): Promise<RealVendorEmulator> {
  const emu = await startRealVendor(opts)
  t.teardown(async () => await emu.close())
  return emu
}

/** A leg to route `x`, CONNECTED, streaming its 50 frames until the vendor's end reaches it: the leg and its close. */
export async function legUntilClosed(t: Test, gw: TestGateway, init: Record<string, unknown>) {
  const leg = platformLeg(t, gw.url('/audio/x'), init)
  t.equal((await leg.answer).command, 'CONNECTED')
  void stream(leg, 0, 50).catch(() => {})
  return { leg, closed: await leg.closed }
}
