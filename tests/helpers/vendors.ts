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
