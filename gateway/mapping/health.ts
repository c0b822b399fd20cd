import { randomUUID } from 'node:crypto'
import type { HealthSettings, RouteConfig, UpstreamConfig } from '../config/types'
import type { BoundStep, PreparedProbe, ProbeKind, ProbePlan } from '../upstream/probes'
import type { AudioMapping, MappingInput } from './audio'
import type { CompileAt, Expr } from './expr'
import { frameOf, run, truthy } from './run'
import { textUrl } from '../upstream/text-url'
import { mappedHeaders, upstreamInput, vendorTarget } from './vendor-target'

/** One step of a protocol probe (schemas/mapping.schema.json `health.steps`). */
export type HealthStep = { send: Expr } | { expect: Expr; refused: Expr | null; failed: Expr | null }

/** The `health` section of a mapping file, compiled. */
export interface HealthMapping {
  kind: ProbeKind
  http: { method: string; path: Expr | null; headers: Expr | null }
  steps: HealthStep[]
}

/** Compile the health section (already valid against the schema). */
export function compileHealth(
  h: Record<string, any>,
  expr: CompileAt,
  problem: (pointer: string, message: string) => void
): HealthMapping {
  const steps: HealthStep[] = (h.steps ?? []).map((s: Record<string, string>, i: number) => {
    const at = `/health/steps/${i}`
    if (s.send !== undefined) return { send: expr(`${at}/send`, s.send) as Expr }
    return {
      expect: expr(`${at}/expect`, s.expect) as Expr,
      refused: expr(`${at}/refused`, s.refused),
      failed: expr(`${at}/failed`, s.failed)
    }
  })
  if (h.kind === 'protocol' && steps.length === 0) problem('/health/steps', 'is required for a protocol probe')
  return {
    kind: h.kind,
    http: {
      method: h.http?.method ?? 'GET',
      path: expr('/health/http/path', h.http?.path),
      headers: expr('/health/http/headers', h.http?.headers)
    },
    steps
  }
}

/** The mapping parts a probe reads. */
export interface ProbedMapping {
  file: string
  audio: AudioMapping | null
  health?: HealthMapping | null
}

/**
 * The probe input: the audio input object of a synthetic leg, `init.probe` true, a fresh leg and
 * session id per probe, both plain UUIDs as a real leg's are (servers check them: AudioHook's reference
 * server refuses an `Audiohook-Correlation-Id` that is not one). Its perspective is what the route's legs
 * send: `TX`, or for a `join` route its channels joined (`TX+RX`), as the stereo session's legs are, so the
 * probe offers what a call will (documented in schemas/mapping.schema.json `health`).
 */
export function probeInput(route: RouteConfig, u: UpstreamConfig): MappingInput & { msg: unknown } {
  return {
    init: { command: 'INIT', probe: true },
    leg: {
      id: randomUUID(),
      route: route.name,
      perspective: route.join === undefined ? 'TX' : route.join.channels.join('+'),
      contactId: '0',
      busNo: '0',
      requestId: null
    },
    route: { name: route.name, params: route.params, checksToken: false },
    upstream: upstreamInput(u),
    session: { id: randomUUID() },
    msg: null
  }
}

/**
 * Which probe a route runs: its own `health.kind`, else an explicit `health.active.kind` (every route),
 * else the mapping's `health.kind`, else `upgrade` (an audio mapping) or `tcp`.
 */
export function probeKind(route: RouteConfig, mapping: ProbedMapping, active: HealthSettings['active']): ProbeKind {
  const own = route.health?.kind
  if (own !== undefined && own !== 'mapping') return own
  if (own === undefined && active.kind !== undefined) return active.kind === 'ws' ? 'upgrade' : active.kind
  return mapping.health?.kind ?? (mapping.audio !== null ? 'upgrade' : 'tcp')
}

/** The probe plan of one route. Throws when the route asks for a protocol probe its mapping does not define. */
export function probePlan(route: RouteConfig, mapping: ProbedMapping, active: HealthSettings['active']): ProbePlan {
  const kind = probeKind(route, mapping, active)
  const health = mapping.health ?? null
  if (kind === 'protocol' && (health === null || health.steps.length === 0))
    throw new Error(`route ${route.name}: a protocol probe needs health.steps in ${mapping.file}`)
  // The old `health.active.path` keeps its meaning: a path on the text URL first.
  const legacy = route.health === undefined && active.kind === 'http'
  const ownPath = route.health?.path ?? (legacy ? active.path : undefined)
  return {
    kind,
    prepare: async u => {
      const input = probeInput(route, u)
      if (kind === 'http') {
        const headers = await mappedHeaders(health?.http.headers ?? mapping.audio?.headers, u.headers, input)
        if (!headers.ok) return 'headers'
        let path: string | null = ownPath ?? null
        if (path === null && health?.http.path != null) {
          const out = await run(health.http.path, input)
          if (!out.ok || typeof out.value !== 'string') return 'http path'
          path = out.value
        }
        const method = route.health?.method ?? health?.http.method ?? 'GET'
        return { url: httpProbeUrl(u, path, legacy), headers: headers.value, method, steps: [] }
      }
      // The same URL and headers a call's vendor connection would use.
      const target =
        mapping.audio == null
          ? ({ ok: true, url: u.audio!, headers: { ...u.headers } } as const)
          : await vendorTarget(mapping.audio, u, input)
      if (!target.ok) return target.stage
      const { url, headers } = target
      const steps = kind === 'protocol' ? bindSteps(health!.steps, input) : []
      return { url, headers, method: 'GET', steps } satisfies PreparedProbe
    }
  }
}

/**
 * Where an `http` probe goes. Aimed at the audio URL (ws→http, wss→https), a path is resolved against it
 * (RFC 3986: "/v1/models" replaces its path, "models" replaces its last segment). Aimed at the text URL
 * (a replica without an audio URL), a path is appended to the text URL's path as a text request's is
 * (upstream/text-url.ts), so the probe lands under the same prefix as the requests; the old gateway-wide
 * `health.active.path` (`legacy`) keeps resolving. An absolute http(s) URL is taken as it is.
 */
function httpProbeUrl(u: UpstreamConfig, path: string | null, legacy: boolean): string {
  const audio = u.audio?.replace(/^ws/, 'http')
  const base = (legacy ? (u.text ?? audio) : (audio ?? u.text))!
  const onText = u.text !== undefined && base === u.text && !legacy
  if (!onText || path === null || path === '' || /^https?:\/\//i.test(path)) return new URL(path ?? '', base).toString()
  return textUrl(base, path.startsWith('/') ? path : `/${path}`)
}

/** The steps on this probe's input; `msg` is the last answer an `expect` matched. A failed evaluation throws. */
function bindSteps(steps: HealthStep[], input: MappingInput & { msg: unknown }): BoundStep[] {
  const value = async (e: Expr, msg: unknown): Promise<unknown> => {
    const out = await run(e, { ...input, msg })
    if (!out.ok) throw new Error('health step failed')
    return out.value
  }
  const holds = async (e: Expr | null, msg: unknown): Promise<boolean> =>
    e !== null && truthy(await run(e, { ...input, msg }))
  return steps.map(s =>
    'send' in s
      ? { kind: 'send', frame: async last => frameOf(await value(s.send, last)) }
      : {
          kind: 'expect',
          classify: async msg => {
            if (await holds(s.refused, msg)) return 'refused'
            if (await holds(s.failed, msg)) return 'failed'
            return (await holds(s.expect, msg)) ? 'match' : 'other'
          }
        }
  )
}
