/**
 * The soak's fault schedule: one window per fault, in this order, each starting in steady state and long
 * enough to recover before the next. A window's length is its share of `--minutes` (by weight), at least
 * its minimum; a window whose actions run longer (a slow drain) is stretched to end 5 s after them.
 * Vendor faults hit the busiest replica (most open sessions), the worst case, and the one a replica that
 * recovered should have taken load from.
 */
import { sleep } from '../lib'
import type { GatewayInstance, RedisServer, VendorReplica } from './fleet'

/** What a window's actions can touch. */
export interface SoakCtx {
  redis: RedisServer
  vendors: VendorReplica[]
  /** The live instance of each slot (A, B, ...). */
  slots: GatewayInstance[]
  /** Start the next generation of a slot on its other port (A → A′); ready when /readyz answers 200. */
  startNext: (slot: number) => Promise<GatewayInstance>
  /** Rewrite every live instance's config with the extra route and send SIGHUP. */
  addRoute: () => void
  /** Note an action at the current time (printed with its offset in the window). */
  note: (text: string) => void
}

export interface WindowSpec {
  name: string
  what: string
  minSeconds: number
  weight: number
  /** Its actions; `at(s)` waits until s seconds after the window's start. */
  run: (ctx: SoakCtx, at: (s: number) => Promise<void>) => Promise<void>
}

async function busiest(ctx: SoakCtx): Promise<VendorReplica> {
  for (const v of ctx.vendors) await v.sampleOpen()
  const open = (v: VendorReplica): number => (v.alive && !v.stopped ? (v.open.at(-1)?.[1] ?? 0) : -1)
  return ctx.vendors.reduce((a, b) => (open(b) > open(a) ? b : a))
}

const openNow = (v: VendorReplica): number => v.open.at(-1)?.[1] ?? 0

export const FREEZE_SECONDS = 15
export const REDIS_DOWN_SECONDS = 10
export const VENDOR_RESTART_SECONDS = 5

/** The windows, a freeze and a stall lasting `freezeSeconds` (`--freeze-seconds`). */
export function schedule(freezeSeconds = FREEZE_SECONDS): WindowSpec[] {
  return [
    { name: 'steady', what: 'no fault (the reference)', minSeconds: 10, weight: 1, run: async () => {} },
    {
      name: 'vendor-kill',
      what: `the busiest vendor replica SIGKILLed, started again on its port ${VENDOR_RESTART_SECONDS} s later`,
      minSeconds: 20,
      weight: 1,
      run: async (ctx, at) => {
        await at(2)
        const v = await busiest(ctx)
        ctx.note(`SIGKILL ${v.name} (${openNow(v)} open sessions; reading stopped 0.2 s before, reports kept)`)
        await v.kill()
        await at(2 + VENDOR_RESTART_SECONDS)
        await v.restart()
        ctx.note(`${v.name} started again on port ${v.port}`)
      }
    },
    {
      name: 'vendor-freeze',
      what: `the busiest vendor replica SIGSTOPped for ${freezeSeconds} s, then SIGCONT (a frozen vendor)`,
      minSeconds: 30,
      weight: 1.2,
      run: async (ctx, at) => {
        await at(2)
        const v = await busiest(ctx)
        ctx.note(`SIGSTOP ${v.name} (${openNow(v)} open sessions)`)
        v.signal('SIGSTOP')
        await at(2 + freezeSeconds)
        v.signal('SIGCONT')
        ctx.note(`SIGCONT ${v.name}`)
      }
    },
    {
      name: 'vendor-stall',
      what: `the busiest vendor replica stops reading its sockets for ${freezeSeconds} s (TCP backs up), then reads again`,
      minSeconds: 30,
      weight: 1.2,
      run: async (ctx, at) => {
        await at(2)
        const v = await busiest(ctx)
        ctx.note(`${v.name} stops reading (${openNow(v)} open sessions)`)
        await v.pause()
        await at(2 + freezeSeconds)
        await v.resume()
        ctx.note(`${v.name} reads again`)
      }
    },
    {
      name: 'redis',
      what: `Redis SIGKILLed, started again empty ${REDIS_DOWN_SECONDS} s later (no persistence)`,
      minSeconds: 25,
      weight: 1,
      run: async (ctx, at) => {
        await at(2)
        await ctx.redis.kill()
        ctx.note('SIGKILL redis-server')
        await at(2 + REDIS_DOWN_SECONDS)
        await ctx.redis.up()
        ctx.note(`redis-server up again (empty) on port ${ctx.redis.port}`)
      }
    },
    {
      name: 'sighup',
      what: 'SIGHUP to every instance with a changed config (a route added)',
      minSeconds: 10,
      weight: 0.8,
      run: async (ctx, at) => {
        await at(2)
        ctx.addRoute()
        ctx.note(`config rewritten (route soak-added), SIGHUP to ${ctx.slots.map(g => g.name).join(', ')}`)
      }
    },
    {
      name: 'rolling',
      what: "rolling restart: each instance's successor started first, then the instance SIGTERMed (drain), one at a time",
      minSeconds: 60,
      weight: 2,
      run: async (ctx, at) => {
        await at(2)
        for (let i = 0; i < ctx.slots.length; i++) {
          const old = ctx.slots[i]
          const next = await ctx.startNext(i)
          ctx.note(`${next.name} ready (pid ${next.pid}, port ${next.port})`)
          ctx.note(`SIGTERM ${old.name} (pid ${old.pid})`)
          await old.drain()
          ctx.note(`${old.name} exited (${old.child.exitCode ?? old.child.signalCode})`)
          await sleep(10_000)
        }
      }
    },
    {
      name: 'after',
      what: 'no fault (after every fault: where the load settled)',
      minSeconds: 10,
      weight: 0.8,
      run: async () => {}
    }
  ]
}

export const SCHEDULE: WindowSpec[] = schedule()

/** Each window's planned length in seconds for a run of `minutes`. */
export function plan(minutes: number, windows: WindowSpec[] = SCHEDULE): number[] {
  const total = windows.reduce((s, w) => s + w.weight, 0)
  return windows.map(w => Math.max(w.minSeconds, Math.round((minutes * 60 * w.weight) / total)))
}
