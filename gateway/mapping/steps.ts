import type { GrpcMethod, ProtoSet } from '../upstream/protos'
import type { CompileAt, Expr } from './expr'

// A mapping's unary gRPC steps (schemas/mapping.schema.json `grpcSteps`): `audio.setup`, `audio.teardown` and
// `text.setup`, compiled against the mapping's protos. They run in mapping/steps-run.ts.

/** One unary call of a mapping's steps. */
export interface GrpcStep {
  /** Its result is `steps.<name>` in later expressions. */
  readonly name: string
  readonly method: GrpcMethod
  readonly request: Expr
  /** A key within the contact: the step runs once per contact and key (null: every time). */
  readonly share: Expr | null
  /** Teardown: every leg's end, or only the contact's last leg's. */
  readonly when: 'each' | 'last'
  readonly deadlineMs: number
  /** Where it is written (`/audio/setup/0`), for problems and `check`. */
  readonly pointer: string
}

/** The proto loader, required by the mappings that have a `grpc` section only (it loads protobufjs). */
export const protoLoader = (): typeof import('../upstream/protos') =>
  require('../upstream/protos') as typeof import('../upstream/protos')

/**
 * The steps at `at` (absent: none). A method that is not unary, or a `share` in a teardown or a `when` in a
 * setup, is a problem at its item; `auth` falls back to `defaultAuth` (that of the section's gRPC method).
 */
export function compileSteps(
  raw: Record<string, any>[] | undefined,
  at: string,
  protos: ProtoSet | null,
  expr: CompileAt,
  problem: (pointer: string, message: string) => void,
  defaultAuth: 'google' | 'none'
): GrpcStep[] {
  if (raw === undefined || raw.length === 0) return []
  if (protos === null) {
    problem(at, 'needs the protos of the top-level grpc section')
    return []
  }
  const teardown = at.endsWith('/teardown')
  const names = new Set<string>()
  const out: GrpcStep[] = []
  raw.forEach((s, i) => {
    const p = `${at}/${i}`
    if (names.has(s.name)) problem(`${p}/name`, `another step is named ${s.name}`)
    names.add(s.name)
    if (teardown && s.share !== undefined)
      problem(`${p}/share`, 'is for setup steps: a teardown reads what they shared')
    if (!teardown && s.when !== undefined && s.when !== 'each') problem(`${p}/when`, 'is for teardown steps')
    const method = protoLoader().grpcMethod(protos, {
      method: s.method,
      auth: s.auth ?? defaultAuth,
      deadlineSeconds: s.deadlineSeconds
    })
    if (typeof method === 'string') return problem(`${p}/method`, method)
    const d = method.definition
    if (d.requestStream || d.responseStream) return problem(`${p}/method`, `${s.method} is not a unary method`)
    const request = expr(`${p}/request`, s.request)
    if (request === null) return
    out.push({
      name: s.name,
      method,
      request,
      share: expr(`${p}/share`, s.share),
      when: s.when ?? 'each',
      deadlineMs: (s.deadlineSeconds ?? 10) * 1000,
      pointer: p
    })
  })
  return out
}
