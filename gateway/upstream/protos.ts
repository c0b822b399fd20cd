import { existsSync } from 'node:fs'
import { dirname, isAbsolute, join } from 'node:path'
import { loadSync, type MethodDefinition, type PackageDefinition } from '@grpc/proto-loader'

// The protos of a gRPC mapping (`grpc.protos`), loaded once per process with @grpc/proto-loader, and the
// protobuf JSON form the mapping's expressions read and write (https://protobuf.dev/programming-guides/json/):
// lowerCamelCase names (the proto's own snake_case names accepted too), enums by name, 64-bit integers and
// bytes (base64) as strings, google.protobuf.Duration as "1.5s" and Timestamp as RFC 3339 text. A field the
// message does not have is an error naming its path, never dropped (protobufjs's fromObject drops it).

/** How proto-loader builds objects: the JSON form but for Duration and Timestamp (converted here). */
const LOADER_OPTIONS = {
  keepCase: false,
  longs: String,
  enums: String,
  bytes: String,
  defaults: false,
  oneofs: false
} as const

/** The folder of the google-proto-files package (google/…/*.proto under it). */
export function googleProtosDir(): string {
  return dirname(require.resolve('google-proto-files/package.json'))
}

/** Where `grpc.protos` names are looked up: the mapping's folder, then the google-proto-files package. */
export function protoIncludeDirs(mappingFile: string): string[] {
  return [dirname(mappingFile), googleProtosDir()]
}

interface FieldDescriptor {
  name: string
  number: number
  label: string
  type: string
  typeName: string
}
interface MessageDescriptor {
  name: string
  field: FieldDescriptor[]
  nestedType: MessageDescriptor[]
  enumType: { name: string; value: { name: string; number: number }[] }[]
  options?: { mapEntry?: boolean } | null
}

/** One field, resolved: its message or enum type by full name (null for scalars). */
export interface ProtoField {
  readonly name: string
  readonly number: number
  readonly repeated: boolean
  readonly type: string
  readonly message: string | null
  readonly enumValues: readonly string[] | null
}

/** The loaded protos of one mapping: its messages by full name, and its methods by `pkg.Service/Method`. */
export class ProtoSet {
  private readonly messages = new Map<string, MessageDescriptor>()
  private readonly enums = new Map<string, string[]>()
  private readonly resolved = new Map<string, Map<string, ProtoField>>()

  constructor(private readonly def: PackageDefinition) {
    for (const [name, entry] of Object.entries(def)) {
      const e = entry as { format?: string; type?: MessageDescriptor & { value?: { name: string }[] } }
      if (e.format?.includes('DescriptorProto') === true && e.format.includes('Enum') === false && e.type)
        this.index(name, e.type)
      // An enum of the package's own (not nested in a message): Dialogflow's AudioEncoding.
      else if (e.format?.includes('EnumDescriptorProto') === true && e.type?.value !== undefined)
        this.enums.set(
          name,
          e.type.value.map(v => v.name)
        )
    }
  }

  private index(full: string, d: MessageDescriptor): void {
    this.messages.set(full, d)
    for (const n of d.nestedType ?? []) this.index(`${full}.${n.name}`, n)
    for (const en of d.enumType ?? [])
      this.enums.set(
        `${full}.${en.name}`,
        en.value.map(v => v.name)
      )
  }

  /** A method by `pkg.Service/Method`, or null. */
  method(path: string): MethodDefinition<object, object> | null {
    const [service, name] = path.split('/')
    const s = this.def[service ?? ''] as Record<string, MethodDefinition<object, object>> | undefined
    // A message or enum entry has a `format`; a service is an object of methods.
    if (s === undefined || name === undefined || typeof s !== 'object' || 'format' in s) return null
    return s[name] ?? null
  }

  /**
   * A method's request and response message names. proto-loader gives a method its types as descriptors of
   * their own (short names): the full name is the message of that name in the service's package or, when
   * it is elsewhere (google.protobuf.Empty), the one message of that name in the protos.
   */
  typesOf(m: MethodDefinition<object, object>): { request: string; response: string } {
    const pkg = m.path.slice(1, m.path.lastIndexOf('/')).split('.').slice(0, -1).join('.')
    const full = (t: { type?: { name?: string } }): string => {
      const short = t.type?.name ?? ''
      const local = `${pkg}.${short}`
      if (this.messages.has(local)) return local
      const all = [...this.messages.keys()].filter(k => k.endsWith(`.${short}`))
      return all.length === 1 ? (all[0] as string) : ''
    }
    return { request: full(m.requestType), response: full(m.responseType) }
  }

  /** The fields of a message by their JSON names, or null when there is no such message. */
  fields(message: string): Map<string, ProtoField> | null {
    const hit = this.resolved.get(message)
    if (hit !== undefined) return hit
    const d = this.messages.get(message)
    if (d === undefined) return null
    const out = new Map<string, ProtoField>()
    for (const f of d.field) {
      const ref = f.typeName === '' ? null : this.resolve(message, f.typeName)
      out.set(f.name, {
        name: f.name,
        number: f.number,
        repeated: f.label === 'LABEL_REPEATED',
        type: f.type,
        message: f.type === 'TYPE_MESSAGE' ? ref : null,
        enumValues: f.type === 'TYPE_ENUM' && ref !== null ? (this.enums.get(ref) ?? null) : null
      })
    }
    this.resolved.set(message, out)
    return out
  }

  /** A map field's entry type (`map<K, V>` is a repeated nested XEntry message). */
  isMapEntry(message: string): boolean {
    return this.messages.get(message)?.options?.mapEntry === true
  }

  /** Protobuf scoping: `name` as seen from inside `scope` (innermost first). */
  private resolve(scope: string, name: string): string | null {
    if (name.startsWith('.')) return name.slice(1)
    const parts = scope.split('.')
    for (let n = parts.length; n >= 0; n--) {
      const full = [...parts.slice(0, n), name].join('.')
      if (this.messages.has(full) || this.enums.has(full)) return full
    }
    return null
  }
}

const cache = new Map<string, ProtoSet>()

/**
 * Load a mapping's protos (once per process and set of files). Throws an Error naming the file that
 * could not be found or parsed.
 */
export function loadProtos(files: readonly string[], includeDirs: readonly string[]): ProtoSet {
  const key = `${files.join('\n')}\n\n${includeDirs.join('\n')}`
  const hit = cache.get(key)
  if (hit !== undefined) return hit
  for (const f of files) {
    const found = isAbsolute(f) ? existsSync(f) : includeDirs.some(d => existsSync(join(d, f)))
    if (!found) throw new Error(`proto file ${f} not found (looked in the mapping's folder and google-proto-files)`)
  }
  const set = new ProtoSet(loadSync([...files], { ...LOADER_OPTIONS, includeDirs: [...includeDirs] }))
  cache.set(key, set)
  return set
}

/** One gRPC method of a mapping, resolved against its protos (`audio.grpc`, `text.grpc`). */
export interface GrpcMethod {
  readonly protos: ProtoSet
  readonly definition: MethodDefinition<object, object>
  /** `pkg.Service/Method`, as the mapping names it. */
  readonly name: string
  readonly request: string
  readonly response: string
  /** The number of the request's bytes field audio goes in (a stream's `audioField`); null: none. */
  readonly audioField: number | null
  /** Most audio bytes in one request (the vendor's per-request limit). */
  readonly maxAudioBytes: number
  /** A call's deadline; null: none (a stream lasts as long as the leg, within the vendor's own limit). */
  readonly deadlineMs: number | null
  /** google: the replica's credential is a Google credential (upstream/google-auth.ts); none: the mapping's headers. */
  readonly auth: 'google' | 'none'
}

/** Resolve `pkg.Service/Method` (and its audio field) in `set`; a string says what is wrong. */
export function grpcMethod(
  set: ProtoSet,
  spec: {
    method: string
    audioField?: string
    maxAudioBytes?: number
    deadlineSeconds?: number
    auth?: 'google' | 'none'
  }
): GrpcMethod | string {
  const definition = set.method(spec.method)
  if (definition === null) return `no method ${spec.method} in the protos (write pkg.Service/Method)`
  const types = set.typesOf(definition)
  let audioField: number | null = null
  if (spec.audioField !== undefined) {
    const f = set.fields(types.request)?.get(spec.audioField)
    if (f === undefined) return `${types.request} has no field "${spec.audioField}"`
    if (f.type !== 'TYPE_BYTES' || f.repeated) return `${types.request}.${spec.audioField} is not a bytes field`
    if (!definition.requestStream) return `${spec.method} takes no stream of requests: audio cannot go to it`
    audioField = f.number
  }
  return {
    protos: set,
    definition,
    name: spec.method,
    request: types.request,
    response: types.response,
    audioField,
    maxAudioBytes: spec.maxAudioBytes ?? 16384,
    deadlineMs: spec.deadlineSeconds === undefined ? null : spec.deadlineSeconds * 1000,
    auth: spec.auth ?? 'none'
  }
}
