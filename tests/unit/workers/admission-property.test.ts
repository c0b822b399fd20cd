import t from 'tap'
import fc from 'fast-check'
import type { SlotTaken } from '../../../gateway/auth/admission'
import type { Config } from '../../../gateway/config/types'
import { MemoryStore } from '../../../gateway/store/memory'
import type { FailureWindow, Store } from '../../../gateway/store/port'
import { AdmissionClient } from '../../../gateway/workers/admission-client'
import { MainServices } from '../../../gateway/workers/main-services'
import type { AdmissionMessage, ToWorker } from '../../../gateway/workers/protocol'

// The gateway's admission as `serve --workers N` runs it: the main process's MainServices (the failure
// budget and the leg limits) and each worker's AdmissionClient, joined by FIFO channels whose messages
// fast-check delivers in any interleaving, with the fleet's count (Redis) answering in any order. The
// properties are what the platform and an operator rely on: a valid check is refused only when its
// address had spent the budget, failures answered as failures never exceed it (fleet-wide), every check
// is answered, and the leg limits hold exactly whatever the order of takes, releases and worker exits.

/** Let every promise continuation run (no timers are involved: the channels are queues stepped by hand). */
async function settle(): Promise<void> {
  for (let i = 0; i < 8; i++) await Promise.resolve()
}

interface Channel {
  instance: number
  worker: number
  toMain: AdmissionMessage[]
  toWorker: ToWorker[]
  client: AdmissionClient
  dead: boolean
}

/** Instances (each a main process with workers), their channels, and the fleet's shared count. */
class Fleet {
  readonly mains: MainServices[] = []
  readonly channels: Channel[] = []
  /** The fleet's count per address, and its answers not yet back. */
  private readonly counts = new Map<string, number>()
  readonly fleetAnswers: (() => void)[] = []
  /** Checks in the order each main process took them, with the fleet's count a failure got there. */
  readonly taken: { instance: number; m: AdmissionMessage; fleetCount?: number }[] = []

  constructor(instances: number, workers: number, config: Pick<Config, 'auth' | 'limits'>, shared: boolean) {
    for (let i = 0; i < instances; i++) {
      const fleet = shared ? ({ countFailure: (key: string) => this.count(key) } as unknown as Store) : null
      const main = new MainServices(
        new MemoryStore(`i${i}`),
        () => config as Config,
        fleet,
        (w, m) => this.channels.find(c => c.instance === i && c.worker === w && !c.dead)?.toWorker.push(m),
        () => {}
      )
      this.mains.push(main)
      for (let w = 0; w < workers; w++) this.addWorker(i, w)
    }
  }

  addWorker(instance: number, worker: number): Channel {
    const ch: Channel = {
      instance,
      worker,
      toMain: [],
      toWorker: [],
      dead: false,
      client: new AdmissionClient(m => ch.toMain.push(m))
    }
    this.channels.push(ch)
    return ch
  }

  /** Redis takes each failure as it is sent (its INCR is atomic); the answer comes back later. */
  private count(key: string): Promise<FailureWindow> {
    const n = (this.counts.get(key) ?? 0) + 1
    this.counts.set(key, n)
    this.taken[this.taken.length - 1].fleetCount = n
    return new Promise(resolve => this.fleetAnswers.push(() => resolve({ count: n, resetInMs: 60_000 })))
  }

  /** The steps that can happen now, each a function that takes it. */
  steps(): (() => void)[] {
    const out: (() => void)[] = []
    for (const ch of this.channels) {
      if (ch.dead) continue
      if (ch.toMain.length > 0) out.push(() => this.toMain(ch))
      if (ch.toWorker.length > 0) out.push(() => deliver(ch.client, ch.toWorker.shift()!))
    }
    for (let i = 0; i < this.fleetAnswers.length; i++) out.push(() => this.fleetAnswers.splice(i, 1)[0]())
    return out
  }

  toMain(ch: Channel): void {
    const m = ch.toMain.shift()!
    this.taken.push({ instance: ch.instance, m })
    this.mains[ch.instance].admissionAsk(ch.worker, m)
  }

  /** A worker dies (kill -9): its channel goes, the main process takes back what it held. */
  kill(ch: Channel): void {
    ch.dead = true
    ch.toMain.length = 0
    ch.toWorker.length = 0
    this.mains[ch.instance].workerGone(ch.worker)
  }

  async drain(): Promise<void> {
    for (;;) {
      await settle()
      const s = this.steps()
      if (s.length === 0) return
      s[0]()
    }
  }
}

function deliver(client: AdmissionClient, m: ToWorker): void {
  if (m.t === 'admitted') client.admitted(m.id, m.address, m.verdict)
  else if (m.t === 'slot-taken') client.taken(m.id, m.slot, m.limit)
}

const config = (failures: number, legsPerRoute = 0, legsPerClient = 0): Pick<Config, 'auth' | 'limits'> => ({
  auth: { failureDelayMs: 0, failureBudget: { failures, windowSeconds: 60 } },
  limits: { headerBytes: 16384, initMessageBytes: 1024, legsPerRoute, legsPerClient }
})

const ADDRESSES = ['10.0.0.1', '10.0.0.2', '10.0.0.3']

const arrival = fc.record({
  address: fc.constantFrom(...ADDRESSES),
  valid: fc.boolean(),
  channel: fc.nat({ max: 5 })
})

t.test('the failure budget across workers and instances, in any interleaving', async _t => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 6 }),
      fc.integer({ min: 1, max: 2 }),
      fc.integer({ min: 1, max: 3 }),
      fc.boolean(),
      fc.array(arrival, { maxLength: 60 }),
      fc.array(fc.nat(), { maxLength: 300 }),
      async (budget, instances, workers, shared, arrivals, schedule) => {
        const fleet = new Fleet(instances, workers, config(budget), shared)
        const answers: (true | number | null)[] = arrivals.map(() => null)
        /** The arrival each message to a main process carries. */
        const arrivalOf = new Map<AdmissionMessage, number>()
        let next = 0
        const arrive = (): void => {
          const i = next++
          const a = arrivals[i]
          const ch = fleet.channels[a.channel % fleet.channels.length]
          const sent = ch.toMain.length
          const v = ch.client.admit(a.address, !a.valid)
          if (ch.toMain.length > sent) arrivalOf.set(ch.toMain[sent], i)
          if (v instanceof Promise) void v.then(x => (answers[i] = x))
          else answers[i] = v
        }
        for (const pick of schedule) {
          await settle()
          const steps = fleet.steps()
          if (next < arrivals.length) steps.push(arrive)
          if (steps.length === 0) break
          steps[pick % steps.length]()
        }
        while (next < arrivals.length) arrive()
        await fleet.drain()

        if (answers.some(a => a === null)) return false // every check is answered
        for (const address of ADDRESSES) {
          // Per instance without a shared store; fleet-wide with one.
          const scopes = shared ? [null] : Array.from({ length: instances }, (_, i) => i)
          for (const scope of scopes) {
            const mine = arrivals
              .map((a, i) => ({ ...a, i, instance: fleet.channels[a.channel % fleet.channels.length].instance }))
              .filter(a => a.address === address && (scope === null || a.instance === scope))
            const wrong = mine.filter(a => !a.valid)
            const told = wrong.filter(a => answers[a.i] === true).length
            if (told > budget) return false // "wrong credential" at most `budget` times
            // Fewer failures than the budget: the address never runs out, so every check is answered as checked.
            if (wrong.length < budget && mine.some(a => answers[a.i] !== true)) return false
          }
        }
        // Once a main process has taken a failure the fleet counted past the budget, every later check of that
        // address it takes is refused: a right guess cannot slip in while that count is on its way back.
        for (let i = 0; i < fleet.taken.length; i++) {
          const f = fleet.taken[i]
          if (f.m.t !== 'admit' || f.fleetCount === undefined || f.fleetCount <= budget) continue
          for (const later of fleet.taken.slice(i + 1)) {
            if (later.instance !== f.instance || later.m.t !== 'admit' || later.m.address !== f.m.address) continue
            if (answers[arrivalOf.get(later.m)!] === true) return false
          }
        }
        return true
      }
    ),
    { numRuns: 300 }
  )
})

t.test('a valid burst from one address through many workers: never refused, whatever is in flight', async _t => {
  await fc.assert(
    fc.asyncProperty(fc.integer({ min: 1, max: 4 }), fc.array(fc.nat(), { maxLength: 400 }), async (n, schedule) => {
      const fleet = new Fleet(1, n, config(1), false)
      const answers: unknown[] = []
      for (let i = 0; i < 100; i++) {
        const v = fleet.channels[i % n].client.admit('10.0.0.9', false)
        void Promise.resolve(v).then(x => answers.push(x))
      }
      for (const pick of schedule) {
        await settle()
        const steps = fleet.steps()
        if (steps.length === 0) break
        steps[pick % steps.length]()
      }
      await fleet.drain()
      return answers.length === 100 && answers.every(a => a === true)
    }),
    { numRuns: 100 }
  )
})

const legEvent = fc.oneof(
  fc.record({
    kind: fc.constant('take' as const),
    route: fc.constantFrom('a', 'b'),
    caller: fc.constantFrom('x', 'y', 'anonymous'),
    force: fc.boolean(),
    channel: fc.nat({ max: 3 })
  }),
  fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('kill' as const), channel: fc.nat({ max: 3 }) }),
  fc.record({ kind: fc.constant('step' as const), pick: fc.nat() })
)

t.test('the leg limits across workers hold exactly, through releases and worker exits', async _t => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 4 }),
      fc.integer({ min: 0, max: 3 }),
      fc.array(legEvent, { maxLength: 120 }),
      async (perRoute, perClient, events) => {
        const fleet = new Fleet(1, 2, config(0, perRoute, perClient), false)
        /** Places as the worker holding them sees them (released by it, or gone with it). */
        const held: { ch: Channel; release: () => void; released: boolean }[] = []
        /** Places as the main process holds them, by number: the model its decisions are checked against. */
        const places = new Map<number, { worker: number; route: string; caller: string }>()
        const count = (f: (p: { route: string; caller: string }) => boolean): number =>
          [...places.values()].filter(f).length
        let ok = true
        const main = fleet.mains[0]
        const ask = main.admissionAsk.bind(main)
        main.admissionAsk = (worker, m) => {
          if (m.t === 'slot-release') places.delete(m.slot)
          if (m.t !== 'slot-take') return ask(worker, m)
          const byRoute = count(p => p.route === m.route)
          const client = m.caller === 'anonymous' ? 0 : count(p => p.caller === m.caller)
          const full = byRoute >= perRoute || (m.caller !== 'anonymous' && perClient > 0 && client >= perClient)
          const ch = fleet.channels.find(c => c.worker === worker && !c.dead)!
          const before = ch.toWorker.length
          ask(worker, m)
          const answer = ch.toWorker[before]
          if (answer?.t !== 'slot-taken') return
          if (answer.slot === null && (m.force || !full)) ok = false // refused with room (or a takeover)
          if (answer.slot !== null && full && !m.force) ok = false // granted past a limit
          if (answer.slot !== null) places.set(answer.slot, { worker, route: m.route, caller: m.caller })
        }
        const gone = main.workerGone.bind(main)
        main.workerGone = worker => {
          for (const [n, p] of places) if (p.worker === worker) places.delete(n)
          gone(worker)
        }
        for (const e of events) {
          await settle()
          const alive = fleet.channels.filter(c => !c.dead)
          if (e.kind === 'take' && alive.length > 0) {
            const ch = alive[e.channel % alive.length]
            void ch.client.takeSlot(e.route, e.caller, e.force, e.route).then((p: SlotTaken) => {
              if (typeof p === 'function') held.push({ ch, release: p, released: false })
            })
          } else if (e.kind === 'release') {
            const open = held.filter(h => !h.released && !h.ch.dead)
            if (open.length > 0) {
              const h = open[e.pick % open.length]
              h.released = true
              h.release()
              h.release() // a release counts once
            }
          } else if (e.kind === 'kill' && alive.length > 0) {
            const ch = alive[e.channel % alive.length]
            fleet.kill(ch)
            fleet.addWorker(0, ch.worker) // restarted
          } else if (e.kind === 'step') {
            const steps = fleet.steps()
            if (steps.length > 0) steps[e.pick % steps.length]()
          }
        }
        await fleet.drain()
        if (!ok) return false
        // Everything released or gone: the limits start from zero again.
        for (const h of held) if (!h.released && !h.ch.dead) h.release()
        await fleet.drain()
        const ch = fleet.channels.find(c => !c.dead)!
        const fresh: SlotTaken[] = []
        for (let i = 0; i <= perRoute; i++)
          void ch.client.takeSlot('a', 'anonymous', false, 'a').then(p => fresh.push(p))
        await fleet.drain()
        return fresh.filter(p => typeof p === 'function').length === perRoute && fresh.length === perRoute + 1
      }
    ),
    { numRuns: 300 }
  )
})
