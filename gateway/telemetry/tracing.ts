import {
  type Attributes,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer as OtelTracer,
  trace
} from '@opentelemetry/api'
import { ROOT_CONTEXT, TraceFlags } from '@opentelemetry/api'
import { traceFrom } from './trace'

/** The samplers of the OpenTelemetry specification's OTEL_TRACES_SAMPLER that the gateway offers. */
export const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio'
] as const
export type SamplerName = (typeof SAMPLERS)[number]

/** Tracing as it runs (config/tracing.ts resolves it): off, or where and how spans are exported. */
export interface TracingSettings {
  /** Spans are recorded and exported (exporter otlp); off: the trace context is only passed on. */
  readonly enabled: boolean
  /** The full URL spans are POSTed to (…/v1/traces). */
  readonly url: string
  readonly protocol: 'http/protobuf' | 'http/json'
  readonly headers: Readonly<Record<string, string>>
  readonly timeoutMs: number
  readonly serviceName: string
  readonly sampler: SamplerName
  readonly samplerArg: number
  readonly resourceAttributes: Readonly<Record<string, string>>
}

/** Span attributes: what OpenTelemetry takes, flat. */
export type SpanAttributes = Readonly<Record<string, string | number | boolean | undefined>>

/**
 * One span of an utterance or a leg, as the gateway's code sees it (OpenTelemetry stays in this folder).
 * With tracing off it records nothing and costs one object per utterance or leg: the caller's trace is
 * only continued to the vendor, as before tracing existed.
 */
export interface TraceSpan {
  /** The trace it belongs to (32 hex digits). */
  readonly traceId: string
  /** W3C `traceparent` naming this span as the parent: what the next hop (the vendor) carries. */
  readonly traceparent: string
  /** Spans are recorded (tracing on, and this trace sampled): worth building attributes for. */
  readonly recording: boolean
  /** A child span (off, or not sampled: this same span, so nothing is allocated for it). */
  child: (name: string, attributes?: SpanAttributes, kind?: 'internal' | 'client') => TraceSpan
  /** A point in time on this span (a leg's handshake, a vendor connect, a failover). */
  event: (name: string, attributes?: SpanAttributes) => void
  set: (attributes: SpanAttributes) => void
  /** End it (the first call counts); `error`: its status is ERROR with this text (a code, never a secret). */
  end: (error?: string) => void
}

/** Where spans start: the one per utterance or per leg, each a child of the caller's `traceparent` when one came. */
export interface Tracing {
  readonly enabled: boolean
  /** A SERVER span continuing the caller's trace (a malformed or absent `traceparent`: a new trace). */
  start: (name: string, traceparent: string, attributes?: SpanAttributes) => TraceSpan
  /** Export what is left (a drain, a stop); resolves when done or given up. */
  shutdown: () => Promise<void>
}

/** No span recorded: the caller's trace continued with a span id of this hop's own (telemetry/trace.ts). */
class UntracedSpan implements TraceSpan {
  readonly traceId: string
  readonly traceparent: string
  readonly recording = false
  constructor(header: string) {
    const t = traceFrom(header)
    this.traceId = t.traceId
    this.traceparent = t.traceparent
  }
  child(): TraceSpan {
    return this
  }
  event(): void {}
  set(): void {}
  end(): void {}
}

export const untraced: Tracing = {
  enabled: false,
  start: (_name, traceparent) => new UntracedSpan(traceparent),
  shutdown: async () => {}
}

/** W3C trace context, level 1, as the gateway accepts it (telemetry/trace.ts's rules). */
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/

function clean(attributes: SpanAttributes | undefined): Attributes | undefined {
  if (attributes === undefined) return undefined
  const out: Attributes = {}
  for (const [k, v] of Object.entries(attributes)) if (v !== undefined) out[k] = v
  return out
}

const KINDS = { internal: SpanKind.INTERNAL, client: SpanKind.CLIENT } as const

class OtelSpan implements TraceSpan {
  readonly traceId: string
  readonly traceparent: string
  readonly recording: boolean
  private ended = false
  constructor(
    private readonly tracer: OtelTracer,
    private readonly span: Span
  ) {
    const c = span.spanContext()
    this.traceId = c.traceId
    this.traceparent = `00-${c.traceId}-${c.spanId}-0${c.traceFlags & TraceFlags.SAMPLED}`
    this.recording = span.isRecording()
  }
  child(name: string, attributes?: SpanAttributes, kind: 'internal' | 'client' = 'internal'): TraceSpan {
    // Not sampled: every child of it would not be either (each sampler offered decides the same way down a trace).
    if (!this.recording) return this
    const ctx = trace.setSpan(ROOT_CONTEXT, this.span)
    return new OtelSpan(
      this.tracer,
      this.tracer.startSpan(name, { kind: KINDS[kind], attributes: clean(attributes) }, ctx)
    )
  }
  event(name: string, attributes?: SpanAttributes): void {
    if (this.recording && !this.ended) this.span.addEvent(name, clean(attributes))
  }
  set(attributes: SpanAttributes): void {
    if (this.recording && !this.ended) this.span.setAttributes(clean(attributes) ?? {})
  }
  end(error?: string): void {
    if (this.ended) return
    this.ended = true
    if (error !== undefined) this.span.setStatus({ code: SpanStatusCode.ERROR, message: error })
    this.span.end()
  }
}

/** Spans of one process through OpenTelemetry's API, from a tracer provider built by `startTracing`. */
export class OtelTracing implements Tracing {
  readonly enabled = true
  constructor(
    private readonly tracer: OtelTracer,
    readonly shutdown: () => Promise<void>
  ) {}

  start(name: string, traceparent: string, attributes?: SpanAttributes): TraceSpan {
    const m = TRACEPARENT.exec(traceparent)
    const valid = m !== null && !/^0+$/.test(m[1]) && !/^0+$/.test(m[2])
    const parent = valid
      ? trace.setSpanContext(ROOT_CONTEXT, {
          traceId: m[1],
          spanId: m[2],
          traceFlags: Number.parseInt(m[3], 16) & TraceFlags.SAMPLED,
          isRemote: true
        })
      : ROOT_CONTEXT
    return new OtelSpan(
      this.tracer,
      this.tracer.startSpan(name, { kind: SpanKind.SERVER, attributes: clean(attributes) }, parent)
    )
  }
}

/** Who this process is, on every span it exports. */
export interface TraceIdentity {
  /** The gateway instance (a worker's is its main process's). */
  instance: string
  /** Its index among `serve --workers N`; null: a one-process gateway. */
  worker: number | null
  version: string
}

/**
 * Tracing as configured: `untraced` when off; else an OpenTelemetry tracer provider with a batch
 * processor and the OTLP/HTTP exporter of `settings.protocol`. The SDK is loaded only when on, so a
 * gateway without tracing never loads it.
 */
export function startTracing(settings: TracingSettings, who: TraceIdentity): Tracing {
  if (!settings.enabled) return untraced
  // Loaded here, on demand: off is the default and costs nothing to start.
  const sdk = require('@opentelemetry/sdk-trace-base') as typeof import('@opentelemetry/sdk-trace-base')
  const { resourceFromAttributes } = require('@opentelemetry/resources') as typeof import('@opentelemetry/resources')
  const exporterModule =
    settings.protocol === 'http/json'
      ? (require('@opentelemetry/exporter-trace-otlp-http') as typeof import('@opentelemetry/exporter-trace-otlp-http'))
      : (require('@opentelemetry/exporter-trace-otlp-proto') as typeof import('@opentelemetry/exporter-trace-otlp-proto'))
  const exporter = new exporterModule.OTLPTraceExporter({
    url: settings.url,
    headers: { ...settings.headers },
    timeoutMillis: settings.timeoutMs
  })
  const resource = resourceFromAttributes({
    ...settings.resourceAttributes,
    'service.name': settings.serviceName,
    'service.version': who.version,
    'service.instance.id': who.worker === null ? who.instance : `${who.instance}/w${who.worker}`,
    'assist_gateway.instance': who.instance,
    ...(who.worker === null ? {} : { 'assist_gateway.worker': who.worker }),
    'process.pid': process.pid
  })
  const provider = new sdk.BasicTracerProvider({
    resource,
    sampler: samplerOf(sdk, settings),
    spanProcessors: [new sdk.BatchSpanProcessor(exporter)]
  })
  const tracer = provider.getTracer('assist-gateway', who.version)
  let done: Promise<void> | null = null
  return new OtelTracing(tracer, async () => {
    done ??= provider.shutdown().catch(() => {})
    await done
  })
}

function samplerOf(sdk: typeof import('@opentelemetry/sdk-trace-base'), s: TracingSettings) {
  const root = (name: string) =>
    name === 'always_off'
      ? new sdk.AlwaysOffSampler()
      : name === 'traceidratio'
        ? new sdk.TraceIdRatioBasedSampler(s.samplerArg)
        : new sdk.AlwaysOnSampler()
  if (!s.sampler.startsWith('parentbased_')) return root(s.sampler)
  return new sdk.ParentBasedSampler({ root: root(s.sampler.slice('parentbased_'.length)) })
}
