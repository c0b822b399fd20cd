import t from 'tap'
import type { HttpRequest } from 'uWebSockets.js'
import { connectionCloses, headerProblem, scannedHeaderBytes, scannedHeaders } from '../../../gateway/server/front-door'
import { Metrics } from '../../../gateway/telemetry/metrics'

// Issue 24: one pass over a text request's headers gives the front door's checks, the head's size and
// the headers the request reads, exactly as uWS's getHeader would (the first field of a name, '' when absent).

/** What uWS hands a handler, for headers only: forEach in order, getHeader = the first field of a name. */
function request(fields: [string, string][]): HttpRequest {
  return {
    forEach: (cb: (k: string, v: string) => void) => {
      for (const [k, v] of fields) cb(k, v)
    },
    getHeader: (name: string) => fields.find(([k]) => k === name)?.[1] ?? ''
  } as unknown as HttpRequest
}

const NAMES = {
  contentType: 'content-type',
  authorization: 'authorization',
  contentLength: 'content-length',
  requestId: 'x-request-id',
  traceparent: 'traceparent',
  connection: 'connection'
} as const

t.test('the scan reads what getHeader would, and the head size', async t => {
  const metrics = new Metrics()
  const cases: [string, string][][] = [
    [
      ['host', 'gw'],
      ['content-type', 'application/json'],
      ['authorization', 'Bearer a'],
      ['content-length', '12'],
      ['x-request-id', 'r-1'],
      ['traceparent', '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'],
      ['connection', 'keep-alive, close']
    ],
    [['host', 'gw']],
    // A repeated name: the first field, even when it is empty, as getHeader answers.
    [
      ['host', 'gw'],
      ['authorization', ''],
      ['authorization', 'Bearer second'],
      ['x-request-id', 'first'],
      ['x-request-id', 'second']
    ]
  ]
  for (const fields of cases) {
    const req = request(fields)
    t.equal(headerProblem(req, metrics), null)
    const scanned = scannedHeaders()
    for (const [field, name] of Object.entries(NAMES))
      t.equal(scanned[field as keyof typeof NAMES], req.getHeader(name), `${name} of ${JSON.stringify(fields)}`)
    t.equal(
      scannedHeaderBytes(),
      fields.reduce((n, [k, v]) => n + k.length + v.length + 4, 0)
    )
  }
  t.ok(connectionCloses('keep-alive, close'))
  t.notOk(connectionCloses('keep-alive'))
  t.notOk(connectionCloses(''))
})

t.test('a second scan does not keep the first request headers', async t => {
  const metrics = new Metrics()
  headerProblem(
    request([
      ['authorization', 'Bearer a'],
      ['host', 'gw']
    ]),
    metrics
  )
  t.equal(scannedHeaders().authorization, 'Bearer a')
  headerProblem(request([['host', 'gw']]), metrics)
  t.equal(scannedHeaders().authorization, '', 'absent in the second request')
})
