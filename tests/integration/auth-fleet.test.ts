import t from 'tap'
import { randomUUID } from 'node:crypto'
import { initMessage } from '../../gateway/tools/simulate'
import {
  AUDIO_TOKEN,
  TEXT_TOKEN,
  platformLeg,
  roundTrip,
  routeTo,
  startGateway,
  startVendor,
  until,
  type TestGateway
} from '../helpers/gateway'
import { fleetObserver, needRedis } from '../helpers/redis'
import { issueToken, postUtterance, revokeOk } from '../helpers/tokens'

// Two gateway instances sharing one Redis (own key prefix): what one instance learns about a credential
// (a revocation, who opened a leg) holds on the other at its next request.

const TOKEN_KEY = 'fleet-token-key-0123456789abcdef01234'
const CLIENT_A = 'fleet-client-a-secret-0123456789'
const CLIENT_B = 'fleet-client-b-secret-9876543210'
const AUDIO_TOKEN_2 = 'fleet-audio-token-2-s3cr3t'
const ENV = { TOKEN_KEY, CLIENT_A, CLIENT_B, AUDIO_TOKEN_2 }
type T = Parameters<typeof startGateway>[0]

/** Everything the gateways answered, to search for secrets. */
const answers: string[] = []
const gateways: TestGateway[] = []

/** The fleet's Redis as a process outside it reads it, per fleet started. */
const observers = new Map<TestGateway, Awaited<ReturnType<typeof fleetObserver>>>()

async function fleet(tt: T): Promise<[TestGateway, TestGateway]> {
  const redis = await needRedis()
  const vendor = await startVendor(tt, { kind: 'json-events', resultEveryFrames: 0 })
  const demo = routeTo([vendor], 'mappings/json-events.yaml')
  demo.auth = { tokens: true }
  const mixed = routeTo([vendor], 'mappings/json-events.yaml')
  mixed.auth = { audio: ['${AUDIO_TOKEN}', '${AUDIO_TOKEN_2}'], text: ['${TEXT_TOKEN}'] }
  const config = {
    redis,
    store: { keyPrefix: `test:${randomUUID()}:`, syncIntervalSeconds: 0.2, leaseSeconds: 10 },
    audio: { reattachGraceSeconds: 5 },
    tokens: {
      issuer: 'assist-gateway',
      ttlSeconds: 300,
      keys: [{ kid: 'k1', secret: '${TOKEN_KEY}' }],
      clients: [
        { id: 'platform-a', secret: '${CLIENT_A}', scope: 'demo:audio demo:text' },
        { id: 'platform-b', secret: '${CLIENT_B}', scope: 'demo:audio' }
      ]
    },
    routes: { demo, mixed }
  }
  const a = await startGateway(tt, config, ENV)
  const b = await startGateway(tt, config, ENV)
  gateways.push(a, b)
  const seer = await fleetObserver(tt, redis, config.store.keyPrefix)
  observers.set(a, seer)
  observers.set(b, seer)
  return [a, b]
}

async function tokenOf(gw: TestGateway, id: string, secret: string): Promise<string> {
  return (await issueToken(gw, id, secret)).json.access_token as string
}

async function text(gw: TestGateway, route: string, authorization: string): Promise<number> {
  const r = await postUtterance(gw, route, authorization)
  answers.push(r.body)
  return r.status
}

function audio(
  tt: T,
  gw: TestGateway,
  route: string,
  token: string,
  contactId: number
): { leg: ReturnType<typeof platformLeg>; answer: Promise<Record<string, unknown>> } {
  const leg = platformLeg(
    tt,
    gw.url(`/audio/${route}`),
    initMessage({ token, contactId, busNo: 4594, perspective: 'TX' })
  )
  const answer = leg.answer.then(a => {
    answers.push(JSON.stringify(a))
    return a
  })
  return { leg, answer }
}

async function metrics(gw: TestGateway): Promise<string> {
  return await (await fetch(gw.adminUrl('/metrics'))).text()
}

t.test('a token revoked on instance A is refused by instance B at its next request', async t => {
  const [a, b] = await fleet(t)
  const token = await tokenOf(a, 'platform-a', CLIENT_A)
  const live = audio(t, b, 'demo', `Bearer ${token}`, 810001)
  t.equal((await live.answer).command, 'CONNECTED', 'B takes it first')
  t.equal(await text(b, 'demo', `Bearer ${token}`), 200)
  await revokeOk(t, a, token, answers)
  t.equal((await live.leg.closed).code, 1008, "B's live leg of that token ends within its store sync")
  t.match(live.leg.messages.at(-1), { command: 'ERROR', messageType: 'TOKEN_REVOKED' })
  // No waiting for a sync: B asks the store on the next verification.
  const refused = audio(t, b, 'demo', `Bearer ${token}`, 810002)
  t.match(
    await refused.answer,
    { command: 'ERROR', messageType: 'AUTH_INVALID' },
    'the audio handshake on B is refused'
  )
  t.equal((await refused.leg.closed).code, 1008)
  t.equal(await text(b, 'demo', `Bearer ${token}`), 401, 'and the text request on B')
  const m = await metrics(b)
  t.match(m, 'assist_gateway_auth_failures_total{hook="audio",reason="revoked"} 1')
  t.match(m, 'assist_gateway_auth_failures_total{hook="text",reason="revoked"} 1')
  t.equal(
    await text(b, 'demo', `Bearer ${await tokenOf(b, 'platform-a', CLIENT_A)}`),
    200,
    'another token is untouched'
  )
})

t.test('a leg live on instance A cannot be taken over from instance B by another caller', async t => {
  const [a, b] = await fleet(t)
  const tokenA = await tokenOf(a, 'platform-a', CLIENT_A)
  const tokenB = await tokenOf(a, 'platform-b', CLIENT_B)
  const live = audio(t, a, 'demo', `Bearer ${tokenA}`, 820001)
  t.equal((await live.answer).command, 'CONNECTED')
  // The affinity record (written when the vendor session is ready) now names the caller, for the fleet.
  const key = 'demo:4594:820001:TX'
  t.ok(await until(async () => (await observers.get(b)!.affinity(key))?.caller !== undefined))
  t.equal((await observers.get(b)!.affinity(key))?.caller, 'token:assist-gateway\nplatform-a', 'the token subject')

  const thief = audio(t, b, 'demo', `Bearer ${tokenB}`, 820001)
  t.match(await thief.answer, { command: 'ERROR', messageType: 'CALLER_MISMATCH' }, 'another client is refused on B')
  t.equal((await thief.leg.closed).code, 1008)
  await roundTrip(live.leg.ws)
  t.equal(live.leg.ws.readyState, live.leg.ws.OPEN, 'the live leg on A is untouched')
  t.same(live.leg.messages, [], 'and was sent nothing')
  const same = audio(t, b, 'demo', `Bearer ${await tokenOf(b, 'platform-a', CLIENT_A)}`, 820001)
  t.equal((await same.answer).command, 'CONNECTED', 'the same client (another token, on B) continues')

  // Static credentials: bound by a keyed hash of the credential, the same on every instance of the fleet.
  const s1 = audio(t, a, 'mixed', AUDIO_TOKEN, 820002)
  t.equal((await s1.answer).command, 'CONNECTED')
  t.ok(await until(async () => (await observers.get(b)!.affinity('mixed:4594:820002:TX'))?.caller !== undefined))
  const record = JSON.stringify(await observers.get(b)!.affinity('mixed:4594:820002:TX'))
  t.match(record, /"caller":"static:[A-Za-z0-9_-]{43}"/, 'a keyed hash')
  t.notOk(record.includes(AUDIO_TOKEN), 'never the credential')
  const s2 = audio(t, b, 'mixed', AUDIO_TOKEN_2, 820002)
  t.match(await s2.answer, { messageType: 'CALLER_MISMATCH' }, 'another static credential of the route is refused on B')
  t.equal((await s2.leg.closed).code, 1008)
  const s3 = audio(t, b, 'mixed', `Bearer ${AUDIO_TOKEN}`, 820002)
  t.equal((await s3.answer).command, 'CONNECTED', 'the same static credential continues on B')
  t.match(await metrics(b), 'assist_gateway_auth_failures_total{hook="audio",reason="caller_mismatch"} 2')
})

t.test('no credential, client secret or issued token in any log line or answer of either instance', async t => {
  const secrets = [TOKEN_KEY, CLIENT_A, CLIENT_B, AUDIO_TOKEN, AUDIO_TOKEN_2, TEXT_TOKEN]
  t.ok(gateways.length >= 4 && answers.length > 8, 'the fleet tests ran and their answers were captured')
  for (const gw of gateways) for (const s of secrets) t.notOk(gw.logs.raw.includes(s), 'no secret in the logs')
  for (const s of secrets)
    t.notOk(
      answers.some(a => a.includes(s)),
      'no secret in any answer'
    )
  // Issued tokens: their signatures never appear either (a JWT's header and claims are not secret alone).
  const signatures = gateways.flatMap(g => [...g.logs.raw.matchAll(/eyJ[\w-]+\.[\w-]+\.([\w-]+)/g)].map(m => m[1]))
  t.same(signatures, [], 'no token in any log line')
  t.notOk(
    answers.some(a => /eyJ[\w-]+\.[\w-]+\.[\w-]+/.test(a)),
    'no token in any answer'
  )
})
