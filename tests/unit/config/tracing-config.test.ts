import t from 'tap'
import { join } from 'node:path'
import { loadConfig } from '../../../gateway/config/load'
import { parseKeyValues } from '../../../gateway/config/tracing'
import { ConfigError } from '../../../gateway/errors'

const ROUTES =
  'routes:\n  demo:\n    mapping: mappings/json-events.yaml\n    upstreams: [{ name: a, audio: "ws://127.0.0.1:9/x" }]\n'

const load = (dir: string, env: Record<string, string> = {}) => loadConfig(join(dir, 'g.yaml'), env)

t.test('tracing is off by default; the defaults are the OpenTelemetry ones', async t => {
  const c = load(t.testdir({ 'g.yaml': ROUTES }))
  t.same(c.tracing, {
    enabled: false,
    url: 'http://localhost:4318/v1/traces',
    protocol: 'http/protobuf',
    headers: {},
    timeoutMs: 10_000,
    serviceName: 'assist-gateway',
    sampler: 'parentbased_always_on',
    samplerArg: 1,
    resourceAttributes: {}
  })
  t.same(c.reload, { watch: false, watchIntervalSeconds: 5 })
})

t.test('the config keys turn it on and point it; a header value is a secret, written as ${VAR}', async t => {
  const dir = t.testdir({
    'g.yaml':
      `${ROUTES}tracing:\n  exporter: otlp\n  endpoint: http://collector:4318/\n  protocol: http/json\n` +
      '  headers: { x-api-key: "${OTLP_KEY}" }\n  sampler: traceidratio\n  samplerArg: 0.25\n' +
      '  resourceAttributes: { deployment.environment: prod }\n'
  })
  const c = load(dir, { OTLP_KEY: 'otlp-key-123456' })
  t.match(c.tracing, {
    enabled: true,
    url: 'http://collector:4318/v1/traces',
    protocol: 'http/json',
    headers: { 'x-api-key': 'otlp-key-123456' },
    sampler: 'traceidratio',
    samplerArg: 0.25,
    resourceAttributes: { 'deployment.environment': 'prod' }
  })
  t.ok(c.secrets.includes('otlp-key-123456'), 'redacted from logs')
  const inline = t.testdir({ 'g.yaml': `${ROUTES}tracing: { headers: { x-api-key: inline-key-1 } }\n` })
  t.throws(() => load(inline), /tracing\/headers\/x-api-key: secrets must be written as \$\{VAR\} references/)
})

t.test('the standard OTEL_* variables override the file', async t => {
  const dir = t.testdir({ 'g.yaml': `${ROUTES}tracing: { exporter: none, serviceName: from-file }\n` })
  const c = load(dir, {
    OTEL_TRACES_EXPORTER: 'otlp',
    OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otel.example:4318',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20abc-123-xyz,x-tenant=t1',
    OTEL_EXPORTER_OTLP_TIMEOUT: '2500',
    OTEL_SERVICE_NAME: 'gw-eu',
    OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
    OTEL_TRACES_SAMPLER_ARG: '0.1',
    OTEL_RESOURCE_ATTRIBUTES: 'k8s.pod.name=gw-0,deployment.environment=staging'
  })
  t.match(c.tracing, {
    enabled: true,
    url: 'https://otel.example:4318/v1/traces',
    protocol: 'http/json',
    headers: { authorization: 'Bearer abc-123-xyz', 'x-tenant': 't1' },
    timeoutMs: 2500,
    serviceName: 'gw-eu',
    sampler: 'parentbased_traceidratio',
    samplerArg: 0.1,
    resourceAttributes: { 'k8s.pod.name': 'gw-0', 'deployment.environment': 'staging' }
  })
  t.ok(c.secrets.includes('Bearer abc-123-xyz'), 'headers from the environment are secrets too')
  const full = load(dir, {
    OTEL_TRACES_EXPORTER: 'otlp',
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318',
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b:4318/custom/traces',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf'
  })
  t.equal(full.tracing.url, 'http://b:4318/custom/traces', 'the signal-specific endpoint is used as it is')
  t.equal(full.tracing.protocol, 'http/protobuf', 'and the signal-specific protocol wins')
  t.equal(load(dir, { OTEL_TRACES_EXPORTER: 'none' }).tracing.enabled, false)
  t.equal(load(dir, { OTEL_TRACES_EXPORTER: 'otlp', OTEL_SDK_DISABLED: 'true' }).tracing.enabled, false)
})

t.test('what the environment asks that the gateway does not do is a config problem, a secret never echoed', async t => {
  const dir = t.testdir({ 'g.yaml': ROUTES })
  const problems = (env: Record<string, string>): string => {
    try {
      load(dir, env)
      return ''
    } catch (err) {
      t.type(err, ConfigError)
      return (err as Error).message
    }
  }
  t.match(problems({ OTEL_TRACES_EXPORTER: 'zipkin' }), /\/tracing\/exporter: OTEL_TRACES_EXPORTER=zipkin/)
  t.match(problems({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }), /\/tracing\/protocol: OTEL_EXPORTER_OTLP_PROTOCOL=grpc/)
  t.match(problems({ OTEL_TRACES_SAMPLER: 'jaeger_remote' }), /\/tracing\/sampler/)
  t.match(problems({ OTEL_TRACES_SAMPLER_ARG: '2' }), /\/tracing\/samplerArg/)
  t.match(
    problems({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }),
    /\/tracing\/endpoint: collector:4318\/v1\/traces is not/
  )
  const headers = problems({ OTEL_EXPORTER_OTLP_HEADERS: 'secret-api-key-value' })
  t.match(headers, /\/tracing\/headers: OTEL_EXPORTER_OTLP_HEADERS \(environment\) is not a list/)
  t.notMatch(headers, /secret-api-key-value/)
})

t.test('key=value lists: percent-decoded, blanks skipped, a pair without = refused', async t => {
  t.same(parseKeyValues('a=1, b=x%2Cy ,,c='), { a: '1', b: 'x,y', c: '' })
  t.equal(parseKeyValues('a=1,b'), null)
  t.equal(parseKeyValues('a=%E0%A4%A'), null)
})
