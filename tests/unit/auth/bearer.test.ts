import t from 'tap'
import { extractJwt, textCredential } from '../../../gateway/auth/bearer'

const JWT = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln'

t.test('the JWT is found in Bearer form and bare; a static credential is not a JWT', async t => {
  t.equal(extractJwt(`Bearer ${JWT}`), JWT)
  t.equal(extractJwt(`bearer   ${JWT} `), JWT, 'scheme in any case, extra spaces')
  t.equal(extractJwt(JWT), JWT, 'bare (audio authenticationToken)')
  t.equal(extractJwt('Basic dXNlcjpwYXNz'), null)
  t.equal(extractJwt('static-shared-token'), null)
  t.equal(extractJwt(`Bearer ${JWT}.extra`), null)
  t.equal(extractJwt(undefined), null)
  t.equal(extractJwt(`Bearer ${'a'.repeat(9000)}.b.c`), null, 'oversized')
})

t.test('text credentials: the Authorization header first, else the body authorizationHeader', async t => {
  t.equal(textCredential({ authorization: 'Bearer h' }, { authorizationHeader: 'Bearer b' }), 'Bearer h')
  t.equal(textCredential({}, { authorizationHeader: 'Bearer b' }), 'Bearer b')
  t.equal(textCredential({ authorization: '' }, { authorizationHeader: 'Bearer b' }), 'Bearer b')
  t.equal(textCredential({}, { authorizationHeader: 3 }), undefined)
  t.equal(textCredential({}, null), undefined)
})
