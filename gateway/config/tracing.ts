// The `tracing` section (config/load.ts): the file's keys with the standard OTEL_* environment variables
// over them, as the OpenTelemetry SDKs read them, resolved once here so telemetry/ never reads the environment.

import { SAMPLERS, type SamplerName, type TracingSettings } from '../telemetry/tracing'

export type { TracingSettings }

interface Problem {
  pointer: string
  message: string
}

/** `key=value,key=value` with percent-encoded values (OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_HEADERS). */
export function parseKeyValues(text: string): Record<string, string> | null {
  const out: Record<string, string> = {}
  for (const part of text.split(',')) {
    if (part.trim() === '') continue
    const at = part.indexOf('=')
    if (at <= 0) return null
    try {
      out[decodeURIComponent(part.slice(0, at).trim())] = decodeURIComponent(part.slice(at + 1).trim())
    } catch {
      return null
    }
  }
  return out
}

const set = (v: string | undefined): v is string => v !== undefined && v.trim() !== ''

/** The traces URL of an OTLP/HTTP base endpoint (the specification's rule: append v1/traces). */
function tracesUrl(base: string): string {
  return `${base}${base.endsWith('/') ? '' : '/'}v1/traces`
}

/** Records what the environment asked for that the gateway does not do (the key's pointer, the variable named). */
type Bad = (pointer: string, name: string, value: string, what: string) => void

/**
 * The section as it runs, from the validated file section and the environment; `problems` name what the
 * environment asked for that the gateway does not do (the pointer of the key it overrides, the variable named).
 */
export function resolveTracing(
  file: Record<string, any>,
  env: NodeJS.ProcessEnv
): { settings: TracingSettings; problems: Problem[] } {
  const problems: Problem[] = []
  const bad: Bad = (pointer, name, value, what) => {
    problems.push({ pointer, message: `${name}=${value} (environment): ${what}` })
  }
  const enabled = exporterEnabled(file, env, bad)
  const url = tracesEndpoint(file, env, problems)
  const protocol = exportProtocol(file, env, bad)
  const headers = exportHeaders(file, env, problems)
  const timeoutMs = exportTimeoutMs(file, env, bad)
  const { sampler, samplerArg } = sampling(file, env, bad)
  const resourceAttributes = resourceAttributesOf(file, env, bad)
  const serviceName = set(env.OTEL_SERVICE_NAME) ? env.OTEL_SERVICE_NAME.trim() : (file.serviceName as string)

  return {
    settings: {
      enabled,
      url,
      protocol,
      headers,
      timeoutMs,
      serviceName,
      sampler,
      samplerArg,
      resourceAttributes
    },
    problems
  }
}

/** `exporter`, OTEL_TRACES_EXPORTER over it; OTEL_SDK_DISABLED=true turns tracing off. */
function exporterEnabled(file: Record<string, any>, env: NodeJS.ProcessEnv, bad: Bad): boolean {
  let enabled = file.exporter === 'otlp'
  if (set(env.OTEL_TRACES_EXPORTER)) {
    const names = env.OTEL_TRACES_EXPORTER.split(',').map(s => s.trim().toLowerCase())
    const other = names.filter(n => n !== 'otlp' && n !== 'none')
    if (other.length > 0)
      bad('/tracing/exporter', 'OTEL_TRACES_EXPORTER', env.OTEL_TRACES_EXPORTER, 'the gateway exports otlp or none')
    enabled = names.includes('otlp')
  }
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') enabled = false
  return enabled
}

/** The traces URL: `endpoint`, OTEL_EXPORTER_OTLP_ENDPOINT (a base) and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT over it. */
function tracesEndpoint(file: Record<string, any>, env: NodeJS.ProcessEnv, problems: Problem[]): string {
  let url = tracesUrl(file.endpoint)
  if (set(env.OTEL_EXPORTER_OTLP_ENDPOINT)) url = tracesUrl(env.OTEL_EXPORTER_OTLP_ENDPOINT.trim())
  if (set(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)) url = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT.trim()
  if (!/^https?:\/\/[^/]/.test(url))
    problems.push({ pointer: '/tracing/endpoint', message: `${url} is not an http:// or https:// URL` })
  return url
}

/** `protocol`, the traces or the general OTEL_EXPORTER_OTLP_*PROTOCOL over it (OTLP over HTTP only). */
function exportProtocol(file: Record<string, any>, env: NodeJS.ProcessEnv, bad: Bad): TracingSettings['protocol'] {
  const proto = set(env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL)
    ? ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL.trim()]
    : set(env.OTEL_EXPORTER_OTLP_PROTOCOL)
      ? ['OTEL_EXPORTER_OTLP_PROTOCOL', env.OTEL_EXPORTER_OTLP_PROTOCOL.trim()]
      : null
  if (proto === null) return file.protocol as TracingSettings['protocol']
  if (proto[1] === 'http/protobuf' || proto[1] === 'http/json') return proto[1]
  bad(
    '/tracing/protocol',
    proto[0],
    proto[1],
    "the gateway speaks OTLP over HTTP only: 'http/protobuf' or 'http/json' (a collector's port 4318)"
  )
  return file.protocol as TracingSettings['protocol']
}

/** `headers`, with OTEL_EXPORTER_OTLP_HEADERS merged over them. */
function exportHeaders(file: Record<string, any>, env: NodeJS.ProcessEnv, problems: Problem[]): Record<string, string> {
  const headers: Record<string, string> = { ...file.headers }
  if (set(env.OTEL_EXPORTER_OTLP_HEADERS)) {
    const parsed = parseKeyValues(env.OTEL_EXPORTER_OTLP_HEADERS)
    // Never echo the value: it usually holds an API key.
    if (parsed === null)
      problems.push({
        pointer: '/tracing/headers',
        message: 'OTEL_EXPORTER_OTLP_HEADERS (environment) is not a list of name=value pairs'
      })
    else Object.assign(headers, parsed)
  }
  return headers
}

/** `timeoutSeconds` in ms, OTEL_EXPORTER_OTLP_TIMEOUT (ms) over it. */
function exportTimeoutMs(file: Record<string, any>, env: NodeJS.ProcessEnv, bad: Bad): number {
  let timeoutMs = Math.round(file.timeoutSeconds * 1000)
  if (set(env.OTEL_EXPORTER_OTLP_TIMEOUT)) {
    const ms = Number(env.OTEL_EXPORTER_OTLP_TIMEOUT)
    if (Number.isInteger(ms) && ms > 0) timeoutMs = ms
    else
      bad('/tracing/timeoutSeconds', 'OTEL_EXPORTER_OTLP_TIMEOUT', env.OTEL_EXPORTER_OTLP_TIMEOUT, 'not milliseconds')
  }
  return timeoutMs
}

/** `sampler` and `samplerArg`, OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG over them. */
function sampling(
  file: Record<string, any>,
  env: NodeJS.ProcessEnv,
  bad: Bad
): { sampler: SamplerName; samplerArg: number } {
  let sampler = file.sampler as SamplerName
  if (set(env.OTEL_TRACES_SAMPLER)) {
    const s = env.OTEL_TRACES_SAMPLER.trim().toLowerCase()
    if ((SAMPLERS as readonly string[]).includes(s)) sampler = s as SamplerName
    else bad('/tracing/sampler', 'OTEL_TRACES_SAMPLER', env.OTEL_TRACES_SAMPLER, `one of ${SAMPLERS.join(', ')}`)
  }
  let samplerArg = file.samplerArg as number
  if (set(env.OTEL_TRACES_SAMPLER_ARG)) {
    const r = Number(env.OTEL_TRACES_SAMPLER_ARG)
    if (Number.isFinite(r) && r >= 0 && r <= 1) samplerArg = r
    else bad('/tracing/samplerArg', 'OTEL_TRACES_SAMPLER_ARG', env.OTEL_TRACES_SAMPLER_ARG, 'a ratio from 0 to 1')
  }
  return { sampler, samplerArg }
}

/** `resourceAttributes`, with OTEL_RESOURCE_ATTRIBUTES merged over them. */
function resourceAttributesOf(file: Record<string, any>, env: NodeJS.ProcessEnv, bad: Bad): Record<string, string> {
  const resourceAttributes: Record<string, string> = { ...file.resourceAttributes }
  if (set(env.OTEL_RESOURCE_ATTRIBUTES)) {
    const parsed = parseKeyValues(env.OTEL_RESOURCE_ATTRIBUTES)
    if (parsed === null)
      bad('/tracing/resourceAttributes', 'OTEL_RESOURCE_ATTRIBUTES', env.OTEL_RESOURCE_ATTRIBUTES, 'not key=value,…')
    else Object.assign(resourceAttributes, parsed)
  }
  return resourceAttributes
}
