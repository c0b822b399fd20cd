import t, { type Test } from 'tap'
import { resolve } from 'node:path'
import { startRealVendor, type RealVendorEmulator } from '../../gateway/tools/real-vendors'
import { initMessage } from '../../gateway/tools/simulate'
import { platformLeg, startGateway, until, type PlatformLegClient } from '../helpers/gateway'
import { fleetInstances } from '../helpers/redis'
import { sha, sideBytes, sideFrame } from '../helpers/stereo'

// Issue 33 item 2, "the pre-claim": on a shared stereo join route, tenant acme (with its own valid
// credential) opens contact X first; globex's real TX and RX for contact X then both connect and join while
// acme's leg is live, because a call lives in its tenant's namespace (placement, joins, re-attach and the
// fleet's owner records keyed by tenant as well as contact). Before, globex's legs were refused
// CALLER_MISMATCH. The vendor is the strict Deepgram emulator (vendor-formats.md, Deepgram live streaming,
// multichannel): each session reports the sha256 of each channel's voiced bytes, so whose audio is in whose
// session is read off the vendor. The gateway is serve as it ships (2 workers), one instance or two on Redis.

const DG_KEY = 'dg-key-0123456789abcdef'
const ACME = 'acme-audio-credential-0123'
const GLOBEX = 'globex-audio-credential-4567'
const ENV = { DG_KEY, ACME_AUDIO: ACME, GLOBEX_AUDIO: GLOBEX }
const FRAMES = 6

function config(dg: RealVendorEmulator): Record<string, unknown> {
  return {
    audio: { reattachGraceSeconds: 2 },
    tenants: {
      acme: { credentials: { audio: ['${ACME_AUDIO}'] } },
      globex: { credentials: { audio: ['${GLOBEX_AUDIO}'] } }
    },
    routes: {
      assist: {
        mapping: resolve('mappings/deepgram-stereo.yaml'),
        tenants: ['acme', 'globex'],
        upstreams: [{ name: 'v', audio: dg.url, credential: '${DG_KEY}' }],
        join: { channels: ['TX', 'RX'], waitSeconds: 1 }
      }
    }
  }
}

type Who = 'acme' | 'globex'
const seed = (contact: number, who: Who): number => contact * 4 + (who === 'acme' ? 0 : 2)

/**
 * acme's TX for `contact` first, then globex's TX and RX (`at(i)`: where leg i lands). Every leg connects;
 * each tenant's vendor session holds exactly its own audio; acme's leg stays live throughout.
 */
async function preClaim(t: Test, dg: RealVendorEmulator, at: (leg: number) => string, contact: number): Promise<void> {
  const legs: { who: Who; perspective: 'TX' | 'RX'; leg: PlatformLegClient }[] = []
  const order: [Who, 'TX' | 'RX'][] = [
    ['acme', 'TX'],
    ['globex', 'TX'],
    ['globex', 'RX']
  ]
  for (const [i, [who, perspective]] of order.entries()) {
    const init = initMessage({ token: who === 'acme' ? ACME : GLOBEX, contactId: contact, busNo: 4594, perspective })
    const leg = platformLeg(t, at(i), init)
    legs.push({ who, perspective, leg })
    t.equal((await leg.answer).command, 'CONNECTED', `${who} ${perspective} for contact ${contact} connects`)
  }
  t.equal(legs[0].leg.ws.readyState, legs[0].leg.ws.OPEN, "acme's leg is still live")
  for (const { who, perspective, leg } of legs)
    for (let k = 0; k < FRAMES; k++) leg.send(sideFrame(seed(contact, who), perspective === 'TX' ? 0 : 1, k))
  const wanted = (who: Who, side: 0 | 1): string => sha(sideBytes(seed(contact, who), side, 0, FRAMES))
  const sessionOf = (who: Who, side: 0 | 1) =>
    dg.sessions().find(s => s.channels?.[side]?.voicedSha256 === wanted(who, side))
  t.ok(
    await until(() => sessionOf('globex', 0) !== undefined && sessionOf('globex', 1) !== undefined, 15_000),
    "globex's TX and RX reached the vendor"
  )
  t.equal(sessionOf('globex', 0)?.id, sessionOf('globex', 1)?.id, "globex's TX and RX are joined in one stereo session")
  t.ok(await until(() => sessionOf('acme', 0) !== undefined, 15_000), "acme's TX reached the vendor")
  t.not(sessionOf('acme', 0)?.id, sessionOf('globex', 0)?.id, "acme's call is another session than globex's")
  const acme = sessionOf('acme', 0)!
  const silent = (v: string | undefined): boolean => v === undefined || v === sha(Buffer.alloc(0))
  t.ok(silent(acme.channels?.[1]?.voicedSha256), "acme's session has nothing of globex on its RX channel")
  for (const { leg } of legs) {
    t.notOk(
      leg.messages.some(m => m.command === 'ERROR'),
      'no leg was refused (CALLER_MISMATCH was the pre-claim)'
    )
    leg.ws.close(1000)
  }
}

t.test('one gateway (2 workers): acme opens contact X first, globex TX and RX for X both connect and join', async t => {
  const dg = await startRealVendor({ kind: 'deepgram', apiKey: DG_KEY, resultEveryMs: 40 })
  t.teardown(async () => await dg.close())
  const gw = await startGateway(t, config(dg), ENV)
  // Three contacts: the kernel spreads the connections over the two workers.
  for (let round = 0; round < 3; round++) await preClaim(t, dg, () => gw.url('/audio/assist'), 9100 + round)
})

t.test('two instances on Redis: the same, acme holding X on one instance, globex arriving on either', async t => {
  const dg = await startRealVendor({ kind: 'deepgram', apiKey: DG_KEY, resultEveryMs: 40 })
  t.teardown(async () => await dg.close())
  const member = await fleetInstances(t, config(dg), ENV)
  const [one, two] = [await member(), await member()]
  // acme on one; globex's TX on two and its RX on one (relayed to globex's owner), then the other way round.
  await preClaim(t, dg, i => (i === 1 ? two : one).url('/audio/assist'), 9200)
  await preClaim(t, dg, i => (i === 0 ? one : two).url('/audio/assist'), 9201)
})
