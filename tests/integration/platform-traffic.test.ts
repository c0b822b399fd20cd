import t from 'tap'
import { Agent, request } from 'undici'
import { uniqueFrame, uniqueFramesHash } from '../helpers/audio'
import { platformLeg, roundTrip, TEXT_TOKEN, until, type PlatformLegClient } from '../helpers/gateway'
import { spawnServe, spawnVendorProcess } from '../helpers/serve'
import { utterance } from '../helpers/tls'
import { audioInit } from '../helpers/legs'

// The platform's real traffic against `serve` as it ships: the worker count it picks for the machine, the
// shipped defaults for everything the platform meets (the failure budget of 20 failures per 60 s, the
// failure delay, re-attach grace, limits, the active health probe of ops/gateway.yaml), one valid credential
// per hook, everything from one address as a media server, a script engine or a load balancer sends it.
// Only the ports (0: the gateway picks them) and the vendor (an emulator this test reads) differ from
// ops/gateway.yaml. The vendor runs in a process of its own, as a vendor does: this test's process is the
// platform, busy with hundreds of legs and requests, and the gateway's health probes of the vendor must not
// measure that. Issue 29's table, each row a subtest: valid work is never refused, every frame read is
// delivered, and a guesser on another address is held off while the platform is not.

const LEGS = 300
const BLIP = 200
const UTTERANCES = 1000
const FRAMES = 10

t.test('the shipped default under the platform traffic of one address', async t => {
  const vendor = await spawnVendorProcess(t, ['--kind', 'json-events', '--result-every-frames', '0'])
  const gw = await spawnServe(t, {
    listen: { host: '127.0.0.1', port: 0 },
    metrics: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0 },
    health: { active: { kind: 'http', path: '/healthz' } },
    routes: {
      demo: {
        default: true,
        mapping: 'mappings/json-events.yaml',
        auth: { audio: ['${AUDIO_TOKEN}'], text: ['${TEXT_TOKEN}'] },
        upstreams: [{ name: 'emulator', audio: vendor.url, text: vendor.httpUrl }]
      }
    }
  })
  t.ok(gw.workers > 1 || (await import('node:os')).availableParallelism() === 1, `${gw.workers} workers, as shipped`)
  const contact = (i: number): number => 2_900_000 + i
  const open = (i: number): PlatformLegClient => platformLeg(t, gw.url('/audio/demo'), audioInit(contact(i)))
  /** The vendor's sessions as last read (`read()`), and those of leg i (its open message names the contact). */
  type Session = { open: { start?: { contactId?: number } } | null; bytes: number; sha256: string }
  let seen: Session[] = []
  const read = async (): Promise<Session[]> => {
    seen = (await vendor.sessions()) as unknown as Session[]
    return seen
  }
  const sessionsOf = (i: number): Session[] => seen.filter(s => s.open?.start?.contactId === contact(i))
  const what = (a: Record<string, unknown>): unknown => (a.command === 'ERROR' ? a.messageType : a.command)
  const tally = (answers: unknown[]): Record<string, number> => {
    const out: Record<string, number> = {}
    for (const a of answers) out[String(a)] = (out[String(a)] ?? 0) + 1
    return out
  }
  const legs: PlatformLegClient[] = []

  await t.test(`${LEGS} legs at once from one address: every one CONNECTED, every frame delivered`, async t => {
    for (let i = 0; i < LEGS; i++) legs.push(open(i))
    const answers = await Promise.all(legs.map(l => l.answer))
    t.same(tally(answers.map(what)), { CONNECTED: LEGS }, `${LEGS} of ${LEGS} CONNECTED`)
    for (const [i, l] of legs.entries()) for (let k = 0; k < FRAMES; k++) l.send(uniqueFrame(i, k))
    const delivered = (): number => legs.filter((_, i) => sessionsOf(i)[0]?.bytes === FRAMES * 160).length
    t.ok(
      await until(async () => (await read()) && delivered() === LEGS, 120_000, 250),
      `every leg's ${FRAMES} frames reached the vendor`
    )
    const inOrder = legs.filter((_, i) => sessionsOf(i)[0]?.sha256 === uniqueFramesHash(i, 0, FRAMES)).length
    t.equal(inOrder, LEGS, 'each in order, in one vendor session per leg')
  })

  await t.test(`${UTTERANCES} utterances at once from one address: every one 200`, async t => {
    const agent = new Agent({ connections: 256 })
    t.teardown(async () => await agent.close())
    const statuses = await Promise.all(
      Array.from({ length: UTTERANCES }, async (_, i) => {
        const r = await request(gw.url('/text/demo'), {
          method: 'POST',
          dispatcher: agent,
          headers: { 'content-type': 'application/json', authorization: TEXT_TOKEN },
          body: JSON.stringify(utterance({ contactId: 3_000_000 + i }))
        })
        // A refusal names its code (e.g. "503 NO_HEALTHY_UPSTREAM"), so a failure says which it was.
        if (r.statusCode === 200) await r.body.dump()
        else return `${r.statusCode} ${((await r.body.json().catch(() => ({}))) as { code?: string }).code}`
        return r.statusCode
      })
    )
    t.same(tally(statuses), { 200: UTTERANCES }, `${UTTERANCES} × 200`)
  })

  await t.test(`${BLIP} legs dropped without a close frame come back 300 ms later and re-attach`, async t => {
    const dropped = legs.slice(0, BLIP)
    // Everything sent so far has reached the vendor (the previous subtest waited for it): drop at once.
    for (const l of dropped) l.ws.terminate()
    await Promise.all(dropped.map(async l => await l.closed))
    await new Promise(resolve => setTimeout(resolve, 300))
    const back = dropped.map((_, i) => open(i))
    const answers = await Promise.all(back.map(l => l.answer))
    t.same(tally(answers.map(what)), { CONNECTED: BLIP }, `${BLIP} of ${BLIP} back`)
    for (const [i, l] of back.entries()) for (let k = FRAMES; k < 2 * FRAMES; k++) l.send(uniqueFrame(i, k))
    const whole = (i: number): boolean => {
      const s = sessionsOf(i)
      return s.length === 1 && s[0].sha256 === uniqueFramesHash(i, 0, 2 * FRAMES)
    }
    t.ok(
      await until(async () => (await read()) && back.every((_, i) => whole(i)), 120_000, 250),
      'each re-attached to its vendor session'
    )
    t.equal(back.filter((_, i) => whole(i)).length, BLIP, 'one vendor session per leg, with every frame in order')
    const scrape = await (await fetch(gw.adminUrl('/metrics'))).text()
    // Counted by the process that holds the session (a leg landing on the other worker is relayed there).
    const reattached = scrape.match(/^assist_gateway_audio_reattach_total\{[^}]*result="same_session"[^}]*\} (\d+)$/m)
    t.equal(Number(reattached?.[1]), BLIP, 'counted as re-attached to the same session')
    for (const l of back) legs.push(l)
    await Promise.all(back.map(async l => await roundTrip(l.ws)))
  })

  await t.test('a guesser on another address is held off; the platform is not', async t => {
    const guesser = new Agent({ localAddress: '127.0.0.2' })
    t.teardown(async () => await guesser.close())
    const post = async (dispatcher: Agent | undefined, authorization: string): Promise<number> => {
      const r = await request(gw.url('/text/demo'), {
        method: 'POST',
        ...(dispatcher !== undefined ? { dispatcher } : {}),
        headers: { 'content-type': 'application/json', authorization },
        body: JSON.stringify(utterance())
      })
      await r.body.dump()
      return r.statusCode
    }
    const wrong = await Promise.all(Array.from({ length: 30 }, (_, i) => post(guesser, `wrong-guess-${i}-0123456789`)))
    t.same(tally(wrong), { 401: 20, 429: 10 }, 'exactly the budget (20) told "wrong credential", then 429')
    t.equal(await post(guesser, TEXT_TOKEN), 429, 'the right credential from that address: 429 too')
    const platform = await Promise.all(Array.from({ length: 50 }, () => post(undefined, TEXT_TOKEN)))
    t.same(tally(platform), { 200: 50 }, "the platform's address is not affected")
    const leg = open(LEGS + 1)
    t.equal((await leg.answer).command, 'CONNECTED', 'nor are its legs')
    legs.push(leg)
  })

  for (const l of legs) l.ws.close(1000)
})
