import t from 'tap'
import fc from 'fast-check'
import type { SlotTaken, UtteranceTaken } from '../../../gateway/auth/admission'
import { type QuotaSettings, Quotas } from '../../../gateway/auth/quotas'
import type { QuotaStore } from '../../../gateway/store/port'
import type { Config, Quota } from '../../../gateway/config/types'
import { MemoryStore } from '../../../gateway/store/memory'
import { AdmissionClient } from '../../../gateway/workers/admission-client'
import { MainServices } from '../../../gateway/workers/main-services'
import type { AdmissionMessage, ToWorker } from '../../../gateway/workers/protocol'
import { FakeClock } from '../../helpers/fake-clock'

// Issue 33 items 3-4: quotas per tenant and per route (live legs, new legs per second, utterances per
// second), one admission seam for audio and text. The properties: never more admitted than a quota,
// nothing refused under it, whatever the arrivals, releases and clock; and the same across the workers of
// one gateway (the main process counts for every worker; FIFO channels delivered in any interleaving).

const q = (legs = 0, legsPerSecond = 0, utterancesPerSecond = 0): Quota => ({
  legs,
  legsPerSecond,
  utterancesPerSecond
})

t.test(
  'acme legs: 5: the 6th live leg is refused (tenant_legs) while globex takes 20; a release makes room',
  async t => {
    const clock = new FakeClock(0)
    const quotas = new Quotas(
      () => ({ tenants: { acme: { limits: q(5) }, globex: { limits: q() } }, routes: { assist: {} } }),
      clock
    )
    const acme = Array.from({ length: 5 }, () => quotas.takeLeg('assist', 'acme'))
    t.ok(
      acme.every(p => typeof p === 'function'),
      '5 acme legs'
    )
    t.same(quotas.takeLeg('assist', 'acme'), { limit: 'tenant_legs', retryAfterSeconds: 1 }, 'the 6th is refused')
    const globex = Array.from({ length: 20 }, () => quotas.takeLeg('assist', 'globex'))
    t.ok(
      globex.every(p => typeof p === 'function'),
      "globex's 20 legs, unaffected"
    )
    ;(acme[0] as () => void)()
    ;(acme[0] as () => void)()
    t.equal(quotas.legs('tenant', 'acme'), 4, 'released once, however often called')
    t.type(quotas.takeLeg('assist', 'acme'), 'function', 'room again')
    t.type(quotas.takeLeg('assist', 'acme', true), 'function', 'a leg taking over its own session is never refused')
  }
)

t.test(
  'utterancesPerSecond: 10: a burst of 50 admits 10, the rest get Retry-After; another tenant is not touched',
  async t => {
    const clock = new FakeClock(1_250)
    const quotas = new Quotas(() => ({ tenants: { acme: { limits: q(0, 0, 10) } }, routes: { assist: {} } }), clock)
    const burst = Array.from({ length: 50 }, () => quotas.takeUtterance('assist', 'acme'))
    t.equal(burst.filter(x => x === true).length, 10)
    t.same(burst[10], { limit: 'tenant_utterances_per_second', retryAfterSeconds: 1 })
    t.ok(
      Array.from({ length: 50 }, () => quotas.takeUtterance('assist', 'globex')).every(x => x === true),
      'globex (no quota) unaffected'
    )
    clock.advance(750)
    t.equal(quotas.takeUtterance('assist', 'acme'), true, 'the next second has room')
  }
)

t.test("a route's quota counts every tenant of the route together", async t => {
  const clock = new FakeClock(0)
  const quotas = new Quotas(() => ({ routes: { assist: { limits: q(3, 2) } } }), clock)
  t.type(quotas.takeLeg('assist', 'acme'), 'function')
  t.type(quotas.takeLeg('assist', 'globex'), 'function')
  t.same(quotas.takeLeg('assist', 'acme'), { limit: 'route_legs_per_second', retryAfterSeconds: 1 })
  clock.advance(1000)
  t.type(quotas.takeLeg('assist', 'initech'), 'function')
  t.same(quotas.takeLeg('assist', 'acme'), { limit: 'route_legs', retryAfterSeconds: 1 })
})

/** One step of arrivals: a leg (or a re-attach), a release of a held leg, an utterance, or time passing. */
const op = fc.oneof(
  fc.record({
    kind: fc.constant('leg' as const),
    tenant: fc.constantFrom('acme', 'globex', 'r'),
    force: fc.boolean()
  }),
  fc.record({ kind: fc.constant('release' as const), which: fc.nat() }),
  fc.record({ kind: fc.constant('utterance' as const), tenant: fc.constantFrom('acme', 'globex', 'r') }),
  fc.record({ kind: fc.constant('wait' as const), ms: fc.integer({ min: 1, max: 1500 }) })
)
const quota = fc.record({
  legs: fc.integer({ min: 0, max: 4 }),
  legsPerSecond: fc.integer({ min: 0, max: 3 }),
  utterancesPerSecond: fc.integer({ min: 0, max: 3 })
})

t.test(
  'property: never more admitted than a quota, nothing refused under it (any arrivals, releases, clock)',
  async t => {
    fc.assert(
      fc.property(quota, quota, quota, fc.array(op, { maxLength: 120 }), (acme, globex, route, ops) => {
        const clock = new FakeClock(0)
        const settings: QuotaSettings = {
          tenants: { acme: { limits: acme }, globex: { limits: globex } },
          routes: { r: { limits: route } }
        }
        const quotas = new Quotas(() => settings, clock)
        // The model: live legs per scope, and per-second counts per scope in the current second.
        const live = new Map<string, number>()
        const used = new Map<string, number>()
        let second = 0
        const held: { release: () => void; scopes: string[] }[] = []
        const scopesOf = (tenant: string): { key: string; quota: Quota }[] => [
          ...(tenant === 'acme' ? [{ key: 't:acme', quota: acme }] : []),
          ...(tenant === 'globex' ? [{ key: 't:globex', quota: globex }] : []),
          { key: 'r:r', quota: route }
        ]
        for (const o of ops) {
          if (Math.floor(clock.now() / 1000) !== second) {
            second = Math.floor(clock.now() / 1000)
            used.clear()
          }
          if (o.kind === 'wait') clock.advance(o.ms)
          else if (o.kind === 'release') {
            const h = held.splice(o.which % Math.max(1, held.length), 1)[0]
            if (h === undefined) continue
            h.release()
            for (const k of h.scopes) live.set(k, (live.get(k) ?? 0) - 1)
          } else if (o.kind === 'leg') {
            const scopes = scopesOf(o.tenant)
            const room = scopes.every(
              s =>
                (s.quota.legs === 0 || (live.get(s.key) ?? 0) < s.quota.legs) &&
                (s.quota.legsPerSecond === 0 || (used.get(`${s.key}/l`) ?? 0) < s.quota.legsPerSecond)
            )
            const taken = quotas.takeLeg('r', o.tenant, o.force) as SlotTaken
            if ((typeof taken === 'function') !== (o.force || room)) return false // admitted exactly when room
            if (typeof taken !== 'function') continue
            if (!o.force) for (const s of scopes) used.set(`${s.key}/l`, (used.get(`${s.key}/l`) ?? 0) + 1)
            for (const s of scopes) live.set(s.key, (live.get(s.key) ?? 0) + 1)
            held.push({ release: taken, scopes: scopes.map(s => s.key) })
          } else {
            const scopes = scopesOf(o.tenant)
            const room = scopes.every(
              s => s.quota.utterancesPerSecond === 0 || (used.get(`${s.key}/u`) ?? 0) < s.quota.utterancesPerSecond
            )
            const taken = quotas.takeUtterance('r', o.tenant) as UtteranceTaken
            if ((taken === true) !== room) return false
            if (taken !== true) {
              if (taken.retryAfterSeconds < 1 || taken.retryAfterSeconds > 1) return false // within this second
              continue
            }
            for (const s of scopes) used.set(`${s.key}/u`, (used.get(`${s.key}/u`) ?? 0) + 1)
          }
          // Never more than a quota, counting only legs that were not forced in over it.
          if (quotas.legs('tenant', 'acme') !== (live.get('t:acme') ?? 0)) return false
          if (quotas.legs('route', 'r') !== (live.get('r:r') ?? 0)) return false
        }
        return true
      }),
      { numRuns: 300 }
    )
    t.pass('held for every run')
  }
)

async function settle(): Promise<void> {
  for (let i = 0; i < 8; i++) await Promise.resolve()
}

function deliver(client: AdmissionClient, m: ToWorker): void {
  if (m.t === 'slot-taken') client.taken(m.id, m.slot, m.limit)
  else if (m.t === 'utterance-taken') client.utteranceTaken(m.id, m.taken)
}

t.test('property: across the workers of one gateway, in any interleaving, the legs quota holds exactly', async t => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 5 }),
      fc.integer({ min: 1, max: 4 }),
      fc.array(
        fc.record({ take: fc.boolean(), worker: fc.nat({ max: 3 }), tenant: fc.constantFrom('acme', 'globex') }),
        { maxLength: 60 }
      ),
      fc.array(fc.nat(), { maxLength: 400 }),
      async (legs, workers, events, schedule) => {
        const config = {
          auth: { failureDelayMs: 0, failureBudget: { failures: 0, windowSeconds: 60 } },
          limits: { headerBytes: 16384, initMessageBytes: 1024, legsPerRoute: 0, legsPerClient: 0 },
          tenants: { acme: { limits: q(legs) }, globex: { limits: q() } },
          routes: { r: {} }
        } as unknown as Config
        const channels: { toMain: AdmissionMessage[]; toWorker: ToWorker[]; client: AdmissionClient }[] = []
        const main = new MainServices(
          new MemoryStore('i'),
          () => config,
          null,
          (w, m) => channels[w]!.toWorker.push(m),
          () => {}
        )
        for (let w = 0; w < workers; w++) {
          const ch = { toMain: [] as AdmissionMessage[], toWorker: [] as ToWorker[], client: null as never }
          ch.client = new AdmissionClient(m => ch.toMain.push(m)) as never
          channels.push(ch)
        }
        // What the main process saw: every refusal of acme came when acme held `legs` places already.
        let refusedUnder = false
        const ask = main.admissionAsk.bind(main)
        main.admissionAsk = (w, m) => {
          const before = main.admission.quotas.legs('tenant', 'acme')
          const sent = channels[w]!.toWorker.length
          ask(w, m)
          const answer = channels[w]!.toWorker[sent]
          if (m.t === 'slot-take' && m.tenant === 'acme' && answer?.t === 'slot-taken' && answer.slot === null)
            refusedUnder ||= before < legs
          if (main.admission.quotas.legs('tenant', 'acme') > legs) refusedUnder = true // over: fail below
        }
        const held: { tenant: string; release: () => void }[] = []
        let refusedGlobex = 0
        let next = 0
        const arrive = (): void => {
          const e = events[next++]!
          if (!e.take) return void held.splice(e.worker % Math.max(1, held.length), 1)[0]?.release()
          void channels[e.worker % workers]!.client.takeSlot('r', 'c', false, e.tenant).then(p => {
            if (typeof p === 'function') held.push({ tenant: e.tenant, release: p })
            else if (e.tenant === 'globex') refusedGlobex++
          })
        }
        const steps = (): (() => void)[] => {
          const out: (() => void)[] = []
          channels.forEach((ch, w) => {
            if (ch.toMain.length > 0) out.push(() => main.admissionAsk(w, ch.toMain.shift()!))
            if (ch.toWorker.length > 0) out.push(() => deliver(ch.client, ch.toWorker.shift()!))
          })
          if (next < events.length) out.push(arrive)
          return out
        }
        for (const pick of schedule) {
          await settle()
          const s = steps()
          if (s.length === 0) break
          s[pick % s.length]!()
        }
        for (;;) {
          await settle()
          const s = steps()
          if (s.length === 0) break
          s[0]!()
        }
        const acmeHeld = held.filter(h => h.tenant === 'acme').length
        return !refusedUnder && acmeHeld <= legs && refusedGlobex === 0
      }
    ),
    { numRuns: 200 }
  )
  t.pass('held for every run')
})

/** The fleet's count as Redis keeps it (atomic per call), answering at once; `down` makes it not answer. */
class FakeFleet implements QuotaStore {
  down = false
  readonly leases = new Map<string, Set<string>>()
  readonly rates = new Map<string, number>()
  up = (): boolean => !this.down
  takeLease = async (key: string, limit: number, id: string): Promise<boolean | null> => {
    if (this.down) return null
    const set = this.leases.get(key) ?? new Set<string>()
    this.leases.set(key, set)
    if (limit > 0 && set.size >= limit) return false
    set.add(id)
    return true
  }
  refreshLeases = (): void => {}
  releaseLease = (key: string, id: string): void => void this.leases.get(key)?.delete(id)
  consumeRate = async (key: string, perSecond: number): Promise<number | null> => {
    if (this.down) return null
    const n = (this.rates.get(key) ?? 0) + 1
    this.rates.set(key, n)
    return n > perSecond ? 400 : 0
  }
  refundRate = (key: string): void => void this.rates.set(key, (this.rates.get(key) ?? 1) - 1)
}

t.test('with a fleet: two gateways share one count; Redis down, each counts its own; refusals give back', async t => {
  const fleet = new FakeFleet()
  const settings = (): QuotaSettings => ({
    tenants: { acme: { limits: q(3, 0, 2) } },
    routes: { r: { limits: q(0, 0, 0) } }
  })
  const a = new Quotas(settings, new FakeClock(0), fleet)
  const b = new Quotas(settings, new FakeClock(0), fleet)
  const taken = [await a.takeLeg('r', 'acme'), await b.takeLeg('r', 'acme'), await a.takeLeg('r', 'acme')]
  t.ok(
    taken.every(x => typeof x === 'function'),
    '3 legs across two gateways'
  )
  t.same(await b.takeLeg('r', 'acme'), { limit: 'tenant_legs', retryAfterSeconds: 1 }, "the fleet's 4th is refused")
  ;(taken[0] as () => void)()
  t.equal(fleet.leases.get('legs:tenant:acme')?.size, 2, 'a release gives the lease back')
  t.type(await b.takeLeg('r', 'acme'), 'function', 'room in the fleet again')
  t.equal(await a.takeUtterance('r', 'acme'), true)
  t.equal(await b.takeUtterance('r', 'acme'), true)
  t.same(await a.takeUtterance('r', 'acme'), { limit: 'tenant_utterances_per_second', retryAfterSeconds: 1 })
  fleet.down = true
  const c = new Quotas(settings, new FakeClock(0), fleet)
  t.equal(c.takeUtterance('r', 'acme'), true, 'Redis down: this gateway counts alone (synchronously)')
  t.equal(c.takeUtterance('r', 'acme'), true)
  t.same(c.takeUtterance('r', 'acme'), { limit: 'tenant_utterances_per_second', retryAfterSeconds: 1 })
  a.close()
  b.close()
})
