import t from 'tap'
import { FakeClock } from '../../helpers/fake-clock'
import { TenantCredentials } from '../../../gateway/auth/tenant-credentials'
import { authenticate, type HookAuth } from '../../../gateway/auth/route-auth'
import { createTokenAuth } from '../../../gateway/auth/token-auth'
import { CLIENT_A, CLIENT_B, KEY1, START_MS, assertNoSecrets, basic, tokenSettings } from './fixtures/setup'

const STATIC = 'static-audio-credential-0123456789'

async function setup() {
  const clock = new FakeClock(START_MS)
  const auth = await createTokenAuth(tokenSettings(), { demo: true, other: true, plain: false }, { nowMs: clock.now })
  const hook = (route: string, h: 'audio' | 'text', list: string[] | undefined, tokens: boolean): HookAuth => ({
    route,
    hook: h,
    list: TenantCredentials.single(list, route),
    tokens,
    clients: new Map()
  })
  const issue = async (secret = CLIENT_A, scope?: string) => {
    const body = `grant_type=client_credentials${scope === undefined ? '' : `&scope=${scope}`}`
    return auth.token({
      headers: { authorization: basic('platform-a', secret), 'content-type': 'application/x-www-form-urlencoded' },
      body
    })
  }
  return { clock, auth, hook, issue }
}

t.test('whole flow: issue, use on audio and text, revoke, refused; then expiry', async t => {
  const { clock, auth, hook, issue } = await setup()
  const texts: string[] = []
  const answer = await issue()
  const jwt = answer.json.access_token as string
  const audio = hook('demo', 'audio', [STATIC], true)
  const text = hook('demo', 'text', undefined, true)
  const outcomes = [
    await authenticate([`Bearer ${jwt}`], audio, auth.verifier),
    await authenticate([jwt], audio, auth.verifier),
    await authenticate([undefined, `Bearer ${jwt}`], text, auth.verifier),
    await authenticate([`Bearer ${jwt}`, undefined], text, auth.verifier),
    await authenticate([STATIC], audio, auth.verifier)
  ]
  t.same(
    outcomes.map(o => o.ok && o.principal.kind),
    ['token', 'token', 'token', 'token', 'static']
  )
  t.match(outcomes[0], { ok: true, principal: { kind: 'token', sub: 'platform-a', iss: 'assist-gateway' } })
  const revoked = await auth.revoke(JSON.stringify({ token: jwt }))
  t.equal(revoked.status, 200)
  const after = await authenticate([jwt], audio, auth.verifier)
  t.same(after, { ok: false, code: 'AUTH_INVALID', reason: 'revoked' }, 'effective on the next request')
  const fresh = (await issue()).json.access_token as string
  clock.advance(331_000)
  const expired = await authenticate([fresh], audio, auth.verifier)
  t.same(expired, { ok: false, code: 'AUTH_INVALID', reason: 'expired' })
  const refused = await issue(CLIENT_B)
  t.equal(refused.status, 401)
  texts.push(...[revoked, refused, after, expired].map(x => JSON.stringify(x)))
  assertNoSecrets(t, texts, [jwt, fresh, KEY1, CLIENT_A, CLIENT_B, STATIC])
})

t.test('a hook that takes tokens demands a credential even with no static list', async t => {
  const { auth, hook, issue } = await setup()
  const text = hook('demo', 'text', undefined, true)
  t.same(await authenticate([], text, auth.verifier), { ok: false, code: 'AUTH_MISSING', reason: 'missing' })
  t.same(await authenticate(['', undefined], text, auth.verifier), {
    ok: false,
    code: 'AUTH_MISSING',
    reason: 'missing'
  })
  t.same(await authenticate(['whatever'], text, auth.verifier), {
    ok: false,
    code: 'AUTH_INVALID',
    reason: 'not_accepted'
  })
  t.same(await authenticate([], hook('demo', 'text', undefined, false), auth.verifier), {
    ok: true,
    principal: { kind: 'anonymous', tenant: 'demo' }
  })
  const jwt = (await issue(CLIENT_A, 'demo:text')).json.access_token as string
  t.same(await authenticate([jwt], hook('demo', 'audio', undefined, true), auth.verifier), {
    ok: false,
    code: 'AUTH_INVALID',
    reason: 'scope'
  })
  t.same(
    await authenticate([jwt], hook('demo', 'text', [STATIC], false), auth.verifier),
    {
      ok: false,
      code: 'AUTH_INVALID',
      reason: 'not_accepted'
    },
    'a route without auth.tokens ignores tokens'
  )
  t.same(
    await authenticate([jwt], hook('plain', 'text', undefined, true), auth.verifier),
    {
      ok: false,
      code: 'AUTH_INVALID',
      reason: 'wrong_issuer'
    },
    'the verifier holds the route trust too'
  )
})

t.test('createTokenAuth refuses settings that cannot work, naming kids and pointers only', async t => {
  const short = 'short-secret-of-25-bytes!'
  const err = await createTokenAuth(tokenSettings({ keys: [{ kid: 'weak', secret: short }] }), {
    demo: { issuers: ['corp'] }
  }).then(
    () => null,
    (e: Error) => e
  )
  t.type(err, TypeError)
  t.match(err?.message, /key weak\)/)
  t.match(err?.message, /no tokens.jwks entry is named corp/)
  t.notMatch(err?.message, short)
})

t.test(
  "issue 33: a token client listed by a tenant is that tenant's caller; a tenant the route does not admit opens nothing",
  async t => {
    const { auth, hook, issue } = await setup()
    const jwt = (await issue()).json.access_token as string
    const audio = (clients: Map<string, string | null>): HookAuth => ({
      ...hook('demo', 'audio', undefined, true),
      clients
    })
    t.match(await authenticate([jwt], audio(new Map([['platform-a', 'acme']])), auth.verifier), {
      ok: true,
      principal: { kind: 'token', sub: 'platform-a', tenant: 'acme' }
    })
    t.same(
      await authenticate([jwt], audio(new Map([['platform-a', null]])), auth.verifier),
      { ok: false, code: 'AUTH_INVALID', reason: 'not_accepted' },
      'a client of a tenant the route does not list'
    )
    t.match(
      await authenticate([jwt], audio(new Map()), auth.verifier),
      {
        ok: true,
        principal: { kind: 'token', tenant: 'demo' }
      },
      "a client no tenant lists: the route's own tenant"
    )
  }
)
