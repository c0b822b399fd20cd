import t from 'tap'
import { CredentialList } from '../../../gateway/auth/credentials'
import { FleetKey } from '../../../gateway/auth/fleet-key'
import { authenticateStatic, callerTag, failureLabel } from '../../../gateway/auth/hook-auth'

const K = FleetKey.random().callerKey

t.test('callerTag: token callers by issuer and subject, static ones by a keyed hash, never the credential', async t => {
  const token = { kind: 'token', sub: 'platform-a', iss: 'gw', jti: 'j1', exp: 1 } as const
  t.equal(
    callerTag(token, 'ignored', K),
    callerTag({ ...token, jti: 'j2', exp: 2 }, 'other', K),
    'any token of one client'
  )
  t.not(callerTag(token, '', K), callerTag({ ...token, sub: 'platform-b' }, '', K))
  const a = callerTag({ kind: 'static' }, 'secret-value-1', K)
  t.equal(a, callerTag({ kind: 'static' }, 'Bearer  secret-value-1', K), 'raw and Bearer forms are one caller')
  t.not(a, callerTag({ kind: 'static' }, 'secret-value-2', K))
  t.notMatch(a, 'secret-value-1')
  t.equal(callerTag({ kind: 'anonymous' }, 'x', K), 'anonymous')
})

t.test('authenticateStatic answers as authenticate does for a hook without tokens', async t => {
  const list = new CredentialList(['s3cret-value'])
  t.match(authenticateStatic([undefined], new CredentialList(undefined)), {
    ok: true,
    principal: { kind: 'anonymous' }
  })
  t.match(authenticateStatic(['', 42], list), { ok: false, code: 'AUTH_MISSING', reason: 'missing' })
  t.match(authenticateStatic(['nope'], list), { ok: false, code: 'AUTH_INVALID', reason: 'not_accepted' })
  t.match(authenticateStatic(['nope', 'bearer s3cret-value'], list), { ok: true, principal: { kind: 'static' } })
  t.equal(failureLabel('not_accepted'), 'invalid')
  t.equal(failureLabel('expired'), 'expired')
})
