import t from 'tap'
import { initMessage } from '../../gateway/tools/simulate'
import {
  AUDIO_TOKEN,
  TEXT_TOKEN,
  platformLeg,
  roundTrip,
  routeTo,
  startGatewayInProcess,
  startVendor,
  type InProcessGateway
} from '../helpers/gateway'
import type { VendorEmulator } from '../../gateway/tools/vendor-emulator'
import { utterance } from '../helpers/tls'
import { issueToken, postUtterance, revoke, revokeOk } from '../helpers/tokens'

const TOKEN_KEY = 'token-key-for-tests-0123456789abcdef0123'
const CLIENT_A = 'client-a-secret-0123456789'
const CLIENT_B = 'client-b-secret-9876543210'
const CLIENT_C = 'client-c-secret-5555555555'
const AUDIO_TOKEN_2 = 'audio-token-2-s3cr3t-value'
const ENV = { TOKEN_KEY, CLIENT_A, CLIENT_B, CLIENT_C, AUDIO_TOKEN_2 }
const TTL = 30
type T = Parameters<typeof startGatewayInProcess>[0]

/** Everything a test sent back from the gateway, to search for secrets. */
const answers: string[] = []

/** The gateway's wall clock for tokens: the test moves it forward instead of waiting. */
function testClock(): { nowMs: () => number; advance: (seconds: number) => void } {
  let offset = 0
  return { nowMs: () => Date.now() + offset, advance: s => (offset += s * 1000) }
}

async function gateway(
  tt: T,
  clock = testClock(),
  extra: Record<string, unknown> = {}
): Promise<{ gw: InProcessGateway; clock: ReturnType<typeof testClock>; echo: VendorEmulator }> {
  const vendor = await startVendor(tt, { kind: 'json-events', resultEveryFrames: 0 })
  const echo = await startVendor(tt, { kind: 'passthrough', echo: true })
  const route = (name: string, statics: boolean): Record<string, unknown> => {
    const r = routeTo([vendor], 'mappings/json-events.yaml')
    r.auth = statics
      ? { audio: ['${AUDIO_TOKEN}', '${AUDIO_TOKEN_2}'], text: ['${TEXT_TOKEN}'], tokens: true }
      : { tokens: true }
    return { [name]: r }
  }
  // One process: the test moves the gateway's token clock (nowMs) instead of waiting out token lifetimes.
  const gw = await startGatewayInProcess(
    tt,
    {
      audio: { reattachGraceSeconds: 5 },
      tokens: {
        issuer: 'assist-gateway',
        ttlSeconds: TTL,
        keys: [{ kid: 'k1', secret: '${TOKEN_KEY}' }],
        clients: [
          { id: 'platform-a', secret: '${CLIENT_A}', scope: 'demo:audio demo:text' },
          { id: 'platform-b', secret: '${CLIENT_B}', scope: 'demo:audio' },
          { id: 'platform-c', secret: '${CLIENT_C}', scope: 'other:audio other:text pt:audio pt:text' }
        ]
      },
      routes: {
        ...route('demo', false),
        ...route('other', false),
        ...route('mixed', true),
        pt: { ...routeTo([echo], 'mappings/passthrough.yaml'), auth: { tokens: true } }
      },
      ...extra
    },
    ENV,
    { nowMs: clock.nowMs }
  )
  return { gw, clock, echo }
}

async function issue(
  gw: InProcessGateway,
  id: string,
  secret: string,
  scope?: string
): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await issueToken(gw, id, secret, scope)
  if (r.status !== 200) answers.push(JSON.stringify(r.json))
  return r
}

async function tokenOf(gw: InProcessGateway, id: string, secret: string, scope?: string): Promise<string> {
  const r = await issue(gw, id, secret, scope)
  if (r.status !== 200) throw new Error(`token endpoint answered ${r.status}`)
  return r.json.access_token as string
}

async function text(gw: InProcessGateway, route: string, authorization: string): Promise<number> {
  const r = await postUtterance(gw, route, authorization)
  answers.push(r.body)
  return r.status
}

let contact = 700000
async function audio(
  tt: T,
  gw: InProcessGateway,
  route: string,
  token: string,
  contactId = ++contact
): Promise<{ leg: ReturnType<typeof platformLeg>; answer: Record<string, unknown> }> {
  const leg = platformLeg(
    tt,
    gw.url(`/audio/${route}`),
    initMessage({ token, contactId, busNo: 4594, perspective: 'TX' })
  )
  const answer = await leg.answer
  answers.push(JSON.stringify(answer))
  return { leg, answer }
}

async function failures(gw: InProcessGateway): Promise<string> {
  return await (await fetch(gw.adminUrl('/metrics'))).text()
}

t.test('issue → audio CONNECTED and text 200 → expiry → refusal', async t => {
  const { gw, clock } = await gateway(t)
  const issued = await issue(gw, 'platform-a', CLIENT_A)
  t.equal(issued.status, 200)
  t.match(issued.json, { token_type: 'Bearer', expires_in: TTL, scope: 'demo:audio demo:text' })
  const token = issued.json.access_token as string
  const { answer } = await audio(t, gw, 'demo', `Bearer ${token}`)
  t.equal(answer.command, 'CONNECTED', 'Bearer <jwt> opens the audio hook')
  t.equal((await audio(t, gw, 'demo', token)).answer.command, 'CONNECTED', 'the bare JWT too')
  t.equal(await text(gw, 'demo', `Bearer ${token}`), 200, 'and the text hook')
  clock.advance(TTL + 31) // past exp and the default 30 s clock skew
  const late = await audio(t, gw, 'demo', `Bearer ${token}`)
  t.match(late.answer, { command: 'ERROR', messageType: 'AUTH_INVALID' })
  t.equal((await late.leg.closed).code, 1008)
  t.equal(await text(gw, 'demo', `Bearer ${token}`), 401)
  const m = await failures(gw)
  t.match(m, 'assist_gateway_auth_failures_total{hook="audio",reason="expired"} 1')
  t.match(m, 'assist_gateway_auth_failures_total{hook="text",reason="expired"} 1')
})

t.test('a token for another route or hook never opens this one', async t => {
  const { gw } = await gateway(t)
  const other = await tokenOf(gw, 'platform-c', CLIENT_C)
  t.match((await audio(t, gw, 'demo', `Bearer ${other}`)).answer, { messageType: 'AUTH_INVALID' }, 'wrong route')
  t.equal(await text(gw, 'demo', `Bearer ${other}`), 401, 'wrong route, text')
  const audioOnly = await tokenOf(gw, 'platform-a', CLIENT_A, 'demo:audio')
  t.equal(await text(gw, 'demo', `Bearer ${audioOnly}`), 401, 'wrong hook')
  t.equal((await audio(t, gw, 'demo', audioOnly)).answer.command, 'CONNECTED', 'its own hook opens')
  t.equal((await issue(gw, 'platform-b', CLIENT_B, 'demo:text')).status, 400, 'a scope beyond the client is refused')
  t.equal((await issue(gw, 'platform-a', CLIENT_B)).status, 401, 'a wrong client secret is refused')
  t.equal(await text(gw, 'demo', ''), 401, 'no credential')
  const m = await failures(gw)
  t.match(m, 'assist_gateway_auth_failures_total{hook="audio",reason="scope"} 1')
  t.match(m, 'assist_gateway_auth_failures_total{hook="text",reason="scope"} 2')
  t.match(m, 'assist_gateway_auth_failures_total{hook="text",reason="missing"} 1')
  t.match(m, 'assist_gateway_auth_failures_total{hook="token",reason="invalid_client"} 1')
  t.match(m, 'assist_gateway_auth_failures_total{hook="token",reason="invalid_scope"} 1')
  // A route with both: its static lists still work beside tokens.
  t.equal((await audio(t, gw, 'mixed', AUDIO_TOKEN)).answer.command, 'CONNECTED')
  t.equal(await text(gw, 'mixed', `Bearer ${TEXT_TOKEN}`), 200)
})

t.test('revocation is effective on the next request', async t => {
  const { gw } = await gateway(t)
  const token = await tokenOf(gw, 'platform-a', CLIENT_A)
  t.equal(await text(gw, 'demo', `Bearer ${token}`), 200)
  await revokeOk(t, gw, token, answers)
  t.equal(await text(gw, 'demo', `Bearer ${token}`), 401, 'text refused')
  t.match((await audio(t, gw, 'demo', token)).answer, { messageType: 'AUTH_INVALID' }, 'audio refused')
  const m = await failures(gw)
  t.match(m, 'assist_gateway_auth_failures_total{hook="text",reason="revoked"} 1')
  t.match(m, 'assist_gateway_auth_failures_total{hook="audio",reason="revoked"} 1')
  const bad = await revoke(gw, '{"token": "x.y.z"}')
  answers.push(bad.body)
  t.equal(bad.status, 400, 'a token that does not verify is not trusted for its jti')
})

t.test('revoking a token ends the live legs it opened, unless the revocation says endLegs: false', async t => {
  const { gw } = await gateway(t)
  const token = await tokenOf(gw, 'platform-a', CLIENT_A)
  const kept = await tokenOf(gw, 'platform-a', CLIENT_A)
  const a = await audio(t, gw, 'demo', `Bearer ${token}`)
  const b = await audio(t, gw, 'demo', `Bearer ${token}`)
  const c = await audio(t, gw, 'demo', `Bearer ${kept}`)
  for (const l of [a, b, c]) t.equal(l.answer.command, 'CONNECTED')
  t.match(JSON.parse((await revoke(gw, { token })).body), { revoked: true, legsEnded: 2 })
  for (const l of [a, b]) {
    t.equal((await l.leg.closed).code, 1008, 'a leg of the revoked token is closed with 1008')
    t.match(l.leg.messages.at(-1), { command: 'ERROR', messageType: 'TOKEN_REVOKED' })
  }
  t.match(JSON.parse((await revoke(gw, { token: kept, endLegs: false })).body), { revoked: true, legsEnded: 0 })
  await roundTrip(c.leg.ws)
  t.equal(c.leg.ws.readyState, c.leg.ws.OPEN, 'endLegs: false keeps the live leg')
  t.match((await audio(t, gw, 'demo', `Bearer ${kept}`)).answer, { messageType: 'AUTH_INVALID' }, 'new legs refused')
  c.leg.ws.close(1000)
})

t.test('re-attach is bound to the caller that opened the session', async t => {
  const { gw } = await gateway(t)
  const a1 = await tokenOf(gw, 'platform-a', CLIENT_A)
  const b = await tokenOf(gw, 'platform-b', CLIENT_B)
  const first = await audio(t, gw, 'demo', `Bearer ${a1}`, 800001)
  t.equal(first.answer.command, 'CONNECTED')
  const thief = await audio(t, gw, 'demo', `Bearer ${b}`, 800001)
  t.match(thief.answer, { command: 'ERROR', messageType: 'CALLER_MISMATCH' }, 'another client is refused')
  t.equal((await thief.leg.closed).code, 1008)
  await roundTrip(first.leg.ws)
  t.equal(first.leg.ws.readyState, first.leg.ws.OPEN, 'the live leg is untouched')
  t.same(first.leg.messages, [], 'and was sent nothing')
  const a2 = await tokenOf(gw, 'platform-a', CLIENT_A)
  const again = await audio(t, gw, 'demo', `Bearer ${a2}`, 800001)
  t.equal(again.answer.command, 'CONNECTED', 'the same client (another token of it) takes over')
  await first.leg.closed
  t.match(first.leg.messages.at(-1), { messageType: 'LEG_REPLACED' }, 'and the first connection is replaced')
  // Static credentials: only the same credential (raw or Bearer) re-attaches.
  const s1 = await audio(t, gw, 'mixed', AUDIO_TOKEN, 800002)
  t.equal(s1.answer.command, 'CONNECTED')
  const s2 = await audio(t, gw, 'mixed', AUDIO_TOKEN_2, 800002)
  t.match(s2.answer, { messageType: 'CALLER_MISMATCH' }, 'another static credential of the route is refused')
  const s3 = await audio(t, gw, 'mixed', `Bearer ${AUDIO_TOKEN}`, 800002)
  t.equal(s3.answer.command, 'CONNECTED', 'the same static credential takes over')
  t.match(await failures(gw), 'assist_gateway_auth_failures_total{hook="audio",reason="caller_mismatch"} 2')
})

t.test('a route that takes tokens never forwards the platform token to its vendor', async t => {
  const { gw, echo } = await gateway(t)
  const token = await tokenOf(gw, 'platform-c', CLIENT_C, 'pt:audio pt:text')
  const { answer } = await audio(t, gw, 'pt', `Bearer ${token}`)
  t.equal(answer.command, 'CONNECTED')
  t.notOk(JSON.stringify(answer).includes(token), 'not in the CONNECTED echo')
  t.equal(await text(gw, 'pt', `Bearer ${token}`), 200)
  const r = await fetch(gw.url('/text/pt'), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(utterance({ authorizationHeader: `Bearer ${token}` }))
  })
  t.equal(r.status, 200, 'the token in the body is accepted')
  t.notOk((await r.text()).includes(token))
  const seen = JSON.stringify([echo.sessions(), echo.textRequests()])
  t.ok(seen.includes('4594'), 'the vendor got the messages')
  t.notOk(seen.includes(token.split('.')[2]!), 'but never the token')
})

t.test('no configured secret, client secret or issued token in any log line or answer', async t => {
  // With a failure budget of 3 and limits, so the budget's 429s and the limits' refusals are searched too.
  const { gw, clock } = await gateway(t, testClock(), {
    auth: { failureBudget: { failures: 3, windowSeconds: 60 } },
    limits: { legsPerClient: 1, initMessageBytes: 1024 }
  })
  const token = await tokenOf(gw, 'platform-a', CLIENT_A)
  const basic = Buffer.from(`platform-a:${CLIENT_A}`).toString('base64')
  await issue(gw, 'platform-a', 'wrong-secret-0123456789')
  await audio(t, gw, 'demo', `Bearer ${token}`)
  t.match((await audio(t, gw, 'demo', `Bearer ${token}`)).answer, { messageType: 'LEG_LIMIT' }, 'limits.legsPerClient')
  const huge = platformLeg(t, gw.url('/audio/demo'), {
    ...initMessage({ token, contactId: 799999, busNo: 4594, perspective: 'TX' }),
    pad: 'x'.repeat(2000)
  })
  const hugeAnswer = JSON.stringify(await huge.answer)
  answers.push(hugeAnswer)
  t.match(hugeAnswer, 'MESSAGE_TOO_LARGE', 'limits.initMessageBytes')
  await audio(t, gw, 'demo', `Bearer ${token}x`)
  await text(gw, 'demo', `Bearer ${token}`)
  await text(gw, 'mixed', TEXT_TOKEN)
  await text(gw, 'mixed', `Bearer ${TEXT_TOKEN}x`)
  answers.push((await revoke(gw, { token })).body)
  t.equal(await text(gw, 'demo', `Bearer ${token}`), 429, 'the budget is spent: 429')
  t.equal((await issue(gw, 'platform-a', CLIENT_A)).status, 429, 'the token endpoint too')
  clock.advance(TTL + 31)
  t.match((await audio(t, gw, 'demo', token)).answer, { messageType: 'TOO_MANY_FAILURES' }, 'and the audio hook')
  const secrets = [TOKEN_KEY, CLIENT_A, CLIENT_B, CLIENT_C, AUDIO_TOKEN, AUDIO_TOKEN_2, TEXT_TOKEN, token, basic]
  const signature = token.split('.')[2]!
  t.ok(gw.logs.lines.length > 10, 'log lines were captured')
  t.ok(answers.length > 10, 'answers were captured')
  for (const s of [...secrets, signature]) {
    t.notOk(gw.logs.raw.includes(s), 'no secret in the logs')
    t.notOk(
      answers.some(a => a.includes(s)),
      'no secret in any answer'
    )
  }
})
