import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'

type T = { teardown: (fn: () => unknown) => void }

/** One span as the receiver decoded it, from either OTLP/HTTP encoding. */
export interface ReceivedSpan {
  traceId: string
  spanId: string
  /** '' for a root span. */
  parentSpanId: string
  name: string
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client. */
  kind: number
  attributes: Record<string, unknown>
  events: { name: string; attributes: Record<string, unknown> }[]
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string }
  resource: Record<string, unknown>
}

export interface OtlpReceiver {
  /** The base endpoint (OTEL_EXPORTER_OTLP_ENDPOINT): the exporter posts to its /v1/traces. */
  endpoint: string
  spans: () => ReceivedSpan[]
  /** Each export request: its path and content type. */
  requests: () => { path: string; contentType: string }[]
}

/**
 * A collector's OTLP/HTTP trace receiver, in the test's process: a real HTTP server that decodes what the
 * exporter sends, protobuf (`application/x-protobuf`, the default) or JSON (`application/json`), with a
 * protobuf wire decoder written for the few messages of opentelemetry-proto's trace service it needs.
 */
export async function startOtlpReceiver(t: T): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = []
  const requests: { path: string; contentType: string }[] = []
  const server = createServer((req, res) => {
    body(req).then(buf => {
      const contentType = String(req.headers['content-type'] ?? '')
      requests.push({ path: req.url ?? '', contentType })
      const json = contentType.startsWith('application/json')
      try {
        spans.push(...(json ? fromJson(JSON.parse(buf.toString('utf8'))) : fromProtobuf(buf)))
      } catch (err) {
        res.writeHead(400).end(String(err))
        return
      }
      // An empty ExportTraceServiceResponse: no partial success to report.
      res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' }).end(json ? '{}' : '')
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise(resolve => server.close(resolve)))
  server.unref()
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans: () => spans.slice(),
    requests: () => requests.slice()
  }
}

function body(req: IncomingMessage): Promise<Buffer> {
  return new Promise(resolve => {
    const chunks: Buffer[] = []
    req.on('data', c => chunks.push(c))
    req.on('end', () => resolve(Buffer.concat(chunks)))
  })
}

// ---- OTLP/JSON --------------------------------------------------------------------------------------

function jsonValue(v: Record<string, any>): unknown {
  if ('stringValue' in v) return v.stringValue
  if ('intValue' in v) return Number(v.intValue)
  if ('doubleValue' in v) return Number(v.doubleValue)
  if ('boolValue' in v) return v.boolValue
  return v
}
const jsonAttributes = (list: any[] | undefined): Record<string, unknown> =>
  Object.fromEntries((list ?? []).map(kv => [kv.key, jsonValue(kv.value ?? {})]))

function fromJson(msg: any): ReceivedSpan[] {
  return (msg.resourceSpans ?? []).flatMap((rs: any) => {
    const resource = jsonAttributes(rs.resource?.attributes)
    return (rs.scopeSpans ?? []).flatMap((ss: any) =>
      (ss.spans ?? []).map(
        (s: any): ReceivedSpan => ({
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? '',
          name: s.name,
          kind: s.kind ?? 0,
          attributes: jsonAttributes(s.attributes),
          events: (s.events ?? []).map((e: any) => ({ name: e.name, attributes: jsonAttributes(e.attributes) })),
          status: { code: s.status?.code ?? 0, message: s.status?.message ?? '' },
          resource
        })
      )
    )
  })
}

// ---- OTLP/protobuf: the wire format (varint, fixed64, length-delimited, fixed32) ----------------------

type Field = { no: number; wire: number; int: number; bytes: Buffer }

function* fields(buf: Buffer): Generator<Field> {
  let at = 0
  const varint = (): number => {
    let n = 0
    let scale = 1
    for (;;) {
      const b = buf[at++]
      n += (b & 0x7f) * scale
      if (b < 0x80) return n
      scale *= 128
    }
  }
  while (at < buf.length) {
    const key = varint()
    const no = Math.floor(key / 8)
    const wire = key & 7
    if (wire === 0) yield { no, wire, int: varint(), bytes: Buffer.alloc(0) }
    else if (wire === 1) {
      yield { no, wire, int: 0, bytes: buf.subarray(at, at + 8) }
      at += 8
    } else if (wire === 2) {
      const len = varint()
      yield { no, wire, int: 0, bytes: buf.subarray(at, at + len) }
      at += len
    } else if (wire === 5) {
      yield { no, wire, int: 0, bytes: buf.subarray(at, at + 4) }
      at += 4
    } else throw new Error(`protobuf wire type ${wire} is not in OTLP's trace messages`)
  }
}

/** AnyValue: 1 string, 2 bool, 3 int, 4 double (the kinds the gateway sets). */
function anyValue(buf: Buffer): unknown {
  for (const f of fields(buf)) {
    if (f.no === 1) return f.bytes.toString('utf8')
    if (f.no === 2) return f.int !== 0
    if (f.no === 3) return f.int
    if (f.no === 4) return f.bytes.readDoubleLE(0)
  }
  return undefined
}

/** Repeated KeyValue (1 key, 2 value) fields of number `no` in `buf`. */
function attributes(buf: Buffer, no: number): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const f of fields(buf)) {
    if (f.no !== no) continue
    let key = ''
    let value: unknown
    for (const kv of fields(f.bytes)) {
      if (kv.no === 1) key = kv.bytes.toString('utf8')
      if (kv.no === 2) value = anyValue(kv.bytes)
    }
    out[key] = value
  }
  return out
}

/** Span: 1 trace_id, 2 span_id, 4 parent_span_id, 5 name, 6 kind, 9 attributes, 11 events, 15 status. */
function span(buf: Buffer, resource: Record<string, unknown>): ReceivedSpan {
  const s: ReceivedSpan = {
    traceId: '',
    spanId: '',
    parentSpanId: '',
    name: '',
    kind: 0,
    attributes: attributes(buf, 9),
    events: [],
    status: { code: 0, message: '' },
    resource
  }
  for (const f of fields(buf)) {
    if (f.no === 1) s.traceId = f.bytes.toString('hex')
    else if (f.no === 2) s.spanId = f.bytes.toString('hex')
    else if (f.no === 4) s.parentSpanId = f.bytes.toString('hex')
    else if (f.no === 5) s.name = f.bytes.toString('utf8')
    else if (f.no === 6) s.kind = f.int
    else if (f.no === 11) {
      let name = ''
      for (const e of fields(f.bytes)) if (e.no === 2) name = e.bytes.toString('utf8')
      s.events.push({ name, attributes: attributes(f.bytes, 3) })
    } else if (f.no === 15)
      for (const st of fields(f.bytes)) {
        if (st.no === 2) s.status.message = st.bytes.toString('utf8')
        if (st.no === 3) s.status.code = st.int
      }
  }
  return s
}

/** ExportTraceServiceRequest: 1 resource_spans → (1 resource → 1 attributes; 2 scope_spans → 2 spans). */
function fromProtobuf(buf: Buffer): ReceivedSpan[] {
  const out: ReceivedSpan[] = []
  for (const rs of fields(buf)) {
    if (rs.no !== 1) continue
    let resource: Record<string, unknown> = {}
    for (const f of fields(rs.bytes)) if (f.no === 1) resource = attributes(f.bytes, 1)
    for (const f of fields(rs.bytes)) {
      if (f.no !== 2) continue
      for (const sf of fields(f.bytes)) if (sf.no === 2) out.push(span(sf.bytes, resource))
    }
  }
  return out
}
