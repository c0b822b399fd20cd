import t, { type Test } from 'tap'
import { resolve } from 'node:path'
import { startRealVendor, type RealVendorEmulator } from '../../gateway/tools/real-vendors'
import { initMessage } from '../../gateway/tools/simulate'
import { platformLeg, startGateway, until, type PlatformLegClient } from '../helpers/gateway'
import { spawnGateway } from '../helpers/process'
import { fleetInstances } from '../helpers/redis'
import { sha, sideBytes, sideFrame } from '../helpers/stereo'

// Issue 18 item 1: a call belongs to its caller. Two customers (two valid credentials) share one join
// route. Whichever leg arrives first, on one process, across the workers of one gateway or across two
// instances on Redis, a leg of one customer never joins a call the other opened: it is refused with
// CALLER_MISMATCH (1008) and none of its audio reaches the other's vendor session, while the legs of the
// caller that holds the call all join. The vendor is the strict Deepgram emulator: each session reports
// the sha256 of each channel's voiced bytes, so "whose audio is in whose session" is read off the vendor.

const DG_KEY = 'dg-key-0123456789abcdef'
const A = 'customer-a-credential-0123'
const B = 'customer-b-credential-4567'
const FRAMES = 6

function joinRoute(dg: RealVendorEmulator): Record<string, unknown> {
  return {
    mapping: resolve('mappings/deepgram-stereo.yaml'),
    auth: { audio: ['${CRED_A}', '${CRED_B}'] },
    upstreams: [{ name: 'v', audio: dg.url, credential: '${DG_KEY}' }],
    join: { channels: ['TX', 'RX'], waitSeconds: 1 }
  }
}
const ENV = { DG_KEY, CRED_A: A, CRED_B: B }

interface Arrival {
  who: 'A' | 'B'
  perspective: 'TX' | 'RX'
}

/**
 * The arrival orders of issue 18: the intruder second, the intruder first, and the intruder late (after the
 * owner's call has started), each on its own contact. `at(i)` is where leg i of a scenario lands.
 */
const ORDERS: { name: string; legs: Arrival[]; late?: boolean }[] = [
  {
    name: 'B opens TX, A sends RX, B sends RX',
    legs: [
      { who: 'B', perspective: 'TX' },
      { who: 'A', perspective: 'RX' },
      { who: 'B', perspective: 'RX' }
    ]
  },
  {
    name: 'A claims first with RX, then B sends TX and RX',
    legs: [
      { who: 'A', perspective: 'RX' },
      { who: 'B', perspective: 'TX' },
      { who: 'B', perspective: 'RX' }
    ]
  },
  {
    name: 'B opens both legs, A comes late',
    late: true,
    legs: [
      { who: 'B', perspective: 'TX' },
      { who: 'B', perspective: 'RX' },
      { who: 'A', perspective: 'RX' }
    ]
  }
]

async function runOrders(
  t: Test,
  dg: RealVendorEmulator,
  at: (leg: number) => string,
  contactBase: number
): Promise<void> {
  for (const [o, order] of ORDERS.entries()) {
    const contact = contactBase + o
    const legs: { a: Arrival; leg: PlatformLegClient }[] = []
    for (const [i, a] of order.legs.entries()) {
      if (order.late === true && i === 2) await new Promise(r => setTimeout(r, 1200)) // past join.waitSeconds
      const init = initMessage({
        token: a.who === 'A' ? A : B,
        contactId: contact,
        busNo: 4594,
        perspective: a.perspective
      })
      const leg = platformLeg(t, at(i), init)
      legs.push({ a, leg })
      await leg.answer // in order: the next leg arrives after this one was answered
    }
    const owner = legs[0].a.who
    const answers = await Promise.all(legs.map(l => l.leg.answer))
    legs.forEach(({ a }, i) => {
      if (a.who === owner)
        t.equal(answers[i].command, 'CONNECTED', `${order.name}: ${a.who} ${a.perspective} (the owner's) joins`)
      else
        t.match(
          answers[i],
          { command: 'ERROR', messageType: 'CALLER_MISMATCH' },
          `${order.name}: ${a.who} ${a.perspective} refused`
        )
    })
    for (const { a, leg } of legs) if (a.who !== owner) t.equal((await leg.closed).code, 1008, 'closed with 1008')
    // Every leg sends its own recognisable audio; the intruder's (refused) socket is closed already.
    for (const { a, leg } of legs)
      for (let k = 0; k < FRAMES; k++)
        leg.send(sideFrame(contact * 4 + (a.who === 'A' ? 0 : 2), a.perspective === 'TX' ? 0 : 1, k))
    const ownerSides = legs.filter(l => l.a.who === owner).map(l => (l.a.perspective === 'TX' ? 0 : 1))
    const wanted = (side: 0 | 1): string => sha(sideBytes(contact * 4 + (owner === 'A' ? 0 : 2), side, 0, FRAMES))
    const session = (): ReturnType<RealVendorEmulator['sessions']>[number] | undefined =>
      dg.sessions().find(s => ownerSides.some(side => s.channels?.[side]?.voicedSha256 === wanted(side)))
    t.ok(await until(() => session() !== undefined, 15_000), `${order.name}: the owner's audio reached its session`)
    const s = session()!
    for (const side of [0, 1] as const) {
      const got = s.channels?.[side]?.voicedSha256
      if (ownerSides.includes(side)) t.equal(got, wanted(side), `channel ${side} is exactly the owner's audio`)
      else t.ok(got === undefined || got === sha(Buffer.alloc(0)), `channel ${side}: nothing of the other customer`)
    }
    const intruder = legs.find(l => l.a.who !== owner)!
    t.same(
      intruder.leg.messages.filter(m => m.command === 'MESSAGE'),
      [],
      "the refused customer got none of the owner's transcripts"
    )
    for (const { leg } of legs) leg.ws.close(1000)
  }
}

t.test('one process: whichever arrives first, no leg of one customer enters the other’s call', async t => {
  const dg = await startRealVendor({ kind: 'deepgram', apiKey: DG_KEY, resultEveryMs: 40 })
  t.teardown(async () => await dg.close())
  const gw = await startGateway(t, { audio: { reattachGraceSeconds: 2 }, routes: { dg: joinRoute(dg) } }, ENV)
  await runOrders(t, dg, () => gw.url('/audio/dg'), 7100)
})

t.test('two workers of one gateway: the same, wherever the kernel puts each leg', async t => {
  const dg = await startRealVendor({ kind: 'deepgram', apiKey: DG_KEY, resultEveryMs: 40 })
  t.teardown(async () => await dg.close())
  const gw = await spawnGateway(
    t,
    { audio: { reattachGraceSeconds: 2 }, routes: { dg: joinRoute(dg) } },
    { ...ENV, GATEWAY_WORKERS: '2' }
  )
  // Three rounds of every order: the kernel spreads the connections over the two workers.
  for (let round = 0; round < 3; round++) await runOrders(t, dg, () => gw.url('/audio/dg'), 7200 + round * 10)
})

t.test('two instances on Redis: the same, the intruder on the instance that does not hold the call', async t => {
  const dg = await startRealVendor({ kind: 'deepgram', apiKey: DG_KEY, resultEveryMs: 40 })
  t.teardown(async () => await dg.close())
  const member = await fleetInstances(t, { audio: { reattachGraceSeconds: 2 }, routes: { dg: joinRoute(dg) } }, ENV)
  const [one, two] = [await member(), await member()]
  // Leg 0 on one instance, the later legs on the other (a second leg is relayed, an intruder refused).
  await runOrders(t, dg, i => (i === 0 ? one : two).url('/audio/dg'), 7300)
  await runOrders(t, dg, i => (i === 1 ? one : two).url('/audio/dg'), 7310)
})
