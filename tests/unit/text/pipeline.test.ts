import t from 'tap'
import { TenantCredentials } from '../../../gateway/auth/tenant-credentials'
import { DeliveryQueue } from '../../../gateway/text/delivery-queue'
import { anonymousOutcome, authenticateStatic } from '../../../gateway/auth/hook-auth'

/** The text hook's static check (text/utterance.ts): the body field, then the Authorization header. */
const checkCredential = (list: TenantCredentials, fromBody: unknown, header: string): string | null => {
  const a = authenticateStatic([fromBody, header], list, anonymousOutcome('r'))
  return a.ok ? null : a.code
}
import { checkUtterance, MAX_DEPTH, normalizeUtterance, tooDeep } from '../../../gateway/validate/messages'

const valid = (over: Record<string, unknown> = {}): Record<string, unknown> => ({
  contactId: 1,
  busNo: 2,
  tenantId: 't',
  participantId: 'agent',
  messageBody: 'hi',
  ...over
})

t.test(
  'credentials: the body field or the Authorization header, raw or bearer, checked against the text list only',
  async t => {
    const list = TenantCredentials.single(['text-secret-1', 'text-secret-2'], 'r')
    t.equal(checkCredential(TenantCredentials.single(undefined, 'r'), undefined, ''), null, 'no list: nothing required')
    t.equal(checkCredential(list, undefined, ''), 'AUTH_MISSING')
    t.equal(checkCredential(list, '', ''), 'AUTH_MISSING', 'an empty value is a missing one')
    t.equal(checkCredential(list, 42, ''), 'AUTH_MISSING', 'a non-string body field is ignored')
    t.equal(checkCredential(list, 'text-secret-2', ''), null, 'body field')
    t.equal(checkCredential(list, undefined, 'text-secret-1'), null, 'raw header')
    t.equal(checkCredential(list, undefined, 'Bearer text-secret-1'), null, 'bearer header')
    t.equal(checkCredential(list, undefined, 'bearer text-secret-1'), null, 'the scheme is case-insensitive')
    t.equal(checkCredential(list, 'Bearer text-secret-2', ''), null, 'bearer form in the body too')
    t.equal(checkCredential(list, 'nope', 'Bearer text-secret-1'), null, 'either source may carry it')
    t.equal(checkCredential(list, 'nope', 'Bearer nope'), 'AUTH_INVALID')
    t.equal(checkCredential(list, 'text-secret-1x', ''), 'AUTH_INVALID')
    const withBearer = TenantCredentials.single(['Bearer abc-configured'], 'r')
    t.equal(
      checkCredential(withBearer, undefined, 'Bearer abc-configured'),
      null,
      'a configured value that itself starts with Bearer'
    )
  }
)

t.test('nesting: the first value deeper than the limit is named by pointer, iteratively', async t => {
  t.equal(tooDeep({ a: [1, { b: 'x' }] }, MAX_DEPTH), null)
  let deep: unknown = 1
  for (let i = 0; i < MAX_DEPTH; i++) deep = { k: deep }
  t.equal(tooDeep(deep, MAX_DEPTH), null, `${MAX_DEPTH} nested objects are fine`)
  t.equal(tooDeep({ k: deep }, MAX_DEPTH), '/k'.repeat(MAX_DEPTH), 'one more is not')
  let huge: unknown = []
  for (let i = 0; i < 100000; i++) huge = [huge]
  t.equal(tooDeep(huge, MAX_DEPTH), '/0'.repeat(MAX_DEPTH), '100,000 levels: no stack overflow')
  t.equal(tooDeep({ 'a/b': { 'c~d': 1 } }, 1), '/a~1b', 'pointer segments are escaped')
})

t.test('schema: 2.7, or 2.8 when the data is named messageMetaData; every bad field by pointer', async t => {
  t.same(checkUtterance(valid()), [])
  t.same(checkUtterance(valid({ contactId: '584930211', busNo: '4594' })), [], 'ids as strings of digits')
  t.same(checkUtterance(valid({ messageMetaData: { a: 1 } })), [])
  t.same(checkUtterance(valid({ messageData: null, agentAssistAppConfig: null })), [])
  t.same(checkUtterance(valid({ unknownField: 1 })), [], 'unknown fields are allowed')
  t.same(
    checkUtterance(valid({ messageMetaData: 'x' })).map(p => p.pointer),
    ['/messageMetaData']
  )
  t.same(
    checkUtterance(valid({ messageData: {}, messageMetaData: 'x' })),
    [],
    'with both, 2.7 is the schema and messageData wins'
  )
  const bad = checkUtterance({ contactId: -1, busNo: 1.5, participantId: 'bot', messageBody: null, tenantId: '' })
  t.same(bad.map(p => p.pointer).sort(), ['/busNo', '/contactId', '/messageBody', '/participantId', '/tenantId'])
  t.match(
    bad.find(p => p.pointer === '/participantId'),
    { message: 'must be one of "patron", "agent", "system"' }
  )
  t.same(
    checkUtterance({})
      .map(p => p.pointer)
      .sort(),
    ['/busNo', '/contactId', '/messageBody', '/participantId', '/tenantId']
  )
})

t.test('normalized utterance: one shape, never the credential', async t => {
  const msg = valid({
    contactId: '77',
    busNo: '5',
    messageMetaData: { img: 'u' },
    agentAssistAppConfig: { k: 'v' },
    authorizationHeader: 'secret'
  })
  const { request, message } = normalizeUtterance(msg, true)
  t.same(request, {
    contactId: 77,
    busNo: 5,
    tenantId: 't',
    participantId: 'agent',
    messageBody: 'hi',
    messageData: { img: 'u' },
    agentAssistAppConfig: { k: 'v' }
  })
  t.notOk('authorizationHeader' in message, 'dropped when the route checks it')
  t.equal(message.contactId, '77', 'message is the platform JSON as received')
  t.equal(
    normalizeUtterance(msg, false).message.authorizationHeader,
    'secret',
    'kept for the vendor when the route does not check it'
  )
  t.same(
    normalizeUtterance(valid({ messageData: { a: 1 }, messageMetaData: { b: 2 } }), true).request.messageData,
    { a: 1 },
    'messageData wins over messageMetaData'
  )
  t.same(normalizeUtterance(valid({ messageData: null }), true).request.messageData, {})
  t.same(normalizeUtterance(valid(), true).request.agentAssistAppConfig, {})
})

t.test('the delivery queue is bounded, limits concurrency, keeps order and survives failing jobs', async t => {
  const q = new DeliveryQueue(3, 2)
  const started: number[] = []
  const releases: (() => void)[] = []
  const job = (i: number) => async (): Promise<void> => {
    started.push(i)
    await new Promise<void>(resolve => releases.push(resolve))
    if (i === 1) throw new Error('job bug')
  }
  const accepted = [0, 1, 2, 3, 4, 5].map(i => q.offer(job(i)))
  t.same(accepted, [true, true, true, true, true, false], 'two run, three wait, the sixth is refused')
  t.same(started, [0, 1])
  t.equal(q.pending, 3)
  releases[1]()
  await new Promise(resolve => setImmediate(resolve))
  t.same(started, [0, 1, 2], 'a failing job frees its slot')
  while (releases.length < 5) {
    releases[releases.length - 1]()
    releases[0]()
    await new Promise(resolve => setImmediate(resolve))
  }
  t.same(started, [0, 1, 2, 3, 4], 'in order')
  for (const r of releases) r()

  const many = new DeliveryQueue(5000, 1)
  let done = 0
  for (let i = 0; i < 3000; i++)
    many.offer(async () => {
      done++
    })
  await new Promise(resolve => setTimeout(resolve, 50))
  t.equal(done, 3000, 'a long queue drains (its array is compacted as it goes)')
  t.equal(many.pending, 0)
})
