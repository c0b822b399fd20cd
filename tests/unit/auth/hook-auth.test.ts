import t from 'tap'
import { TenantCredentials } from '../../../gateway/auth/tenant-credentials'
import { FleetKey } from '../../../gateway/auth/fleet-key'
import { anonymousOutcome, authenticateStatic, callerTag, failureLabel } from '../../../gateway/auth/hook-auth'

const K = FleetKey.random().callerKey

t.test('callerTag: token callers by issuer and subject, static ones by a keyed hash, never the credential', async t => {
  const token = { kind: 'token', sub: 'platform-a', iss: 'gw', jti: 'j1', exp: 1, tenant: 'r' } as const
  t.equal(
    callerTag(token, 'ignored', K),
    callerTag({ ...token, jti: 'j2', exp: 2 }, 'other', K),
    'any token of one client'
  )
  t.not(callerTag(token, '', K), callerTag({ ...token, sub: 'platform-b' }, '', K))
  const a = callerTag({ kind: 'static', tenant: 'r' }, 'secret-value-1', K)
  t.equal(
    a,
    callerTag({ kind: 'static', tenant: 'r' }, 'Bearer  secret-value-1', K),
    'raw and Bearer forms are one caller'
  )
  t.not(a, callerTag({ kind: 'static', tenant: 'r' }, 'secret-value-2', K))
  t.notMatch(a, 'secret-value-1')
  t.equal(callerTag({ kind: 'anonymous', tenant: 'r' }, 'x', K), 'anonymous')
})

t.test('authenticateStatic answers as authenticate does for a hook without tokens', async t => {
  const list = TenantCredentials.single(['s3cret-value'], 'r')
  t.match(authenticateStatic([undefined], TenantCredentials.single(undefined, 'r'), anonymousOutcome('r')), {
    ok: true,
    principal: { kind: 'anonymous' }
  })
  t.match(authenticateStatic(['', 42], list, anonymousOutcome('r')), {
    ok: false,
    code: 'AUTH_MISSING',
    reason: 'missing'
  })
  t.match(authenticateStatic(['nope'], list, anonymousOutcome('r')), {
    ok: false,
    code: 'AUTH_INVALID',
    reason: 'not_accepted'
  })
  t.match(authenticateStatic(['nope', 'bearer s3cret-value'], list, anonymousOutcome('r')), {
    ok: true,
    principal: { kind: 'static', tenant: 'r' }
  })
  t.equal(failureLabel('not_accepted'), 'invalid')
  t.equal(failureLabel('expired'), 'expired')
})
