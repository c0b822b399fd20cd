import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { readSource } from '../config/source'
import type { RouteConfig } from '../config/types'
import { packageRoot } from '../paths'
import { checkInit, EXAMPLE_UTTERANCE, normalizeUtterance } from '../validate/messages'
import { validator } from '../validate/compile'
import type { AudioMapping, CompiledMapping, Expr } from './compile'
import { evaluate as runText } from './fast-path'
import { parseIsoDuration } from './iso-duration'
import { run, type MappingInput } from './run'
import type { TextInput } from './text'
import { describe, mapBody, mapHeaders, mapPath } from './text-request'
import { messageFromMapping } from './event-stream'
import { textPathOf } from './vendor-target'
import { requestProblem, sampleProblem } from './grpc-check'
import { checkStepRequests } from './steps-check'
import type { ConfigProblem } from '../errors'

type Problem = ConfigProblem

/** Why an expression's value is unusable (null: it is usable). */
type Check = (v: unknown) => string | null

/**
 * Run every expression of a mapping on the interface's example messages (init message, utterance) and
 * the mapping's own sample vendor messages; report what an expression produced when it is unusable.
 */
export async function dryRunMapping(mapping: CompiledMapping, route: RouteConfig): Promise<Problem[]> {
  const problems: Problem[] = await dryRunText(mapping, route)
  const audio = mapping.audio
  if (audio === null) return problems
  const base = exampleAudioInput(route)
  // A gRPC mapping's unary steps (mapping/steps-check.ts): the setup's results are `steps` of all that follows.
  const setup = await checkStepRequests(mapping.file, audio.setup ?? [], base, problems)
  await checkStepRequests(mapping.file, audio.teardown ?? [], base, problems, setup)
  if ((audio.setup ?? []).length > 0) base.steps = setup
  const dry = new AudioDryRun(mapping, audio, problems)
  dry.grpcSamples()
  await dry.opening(route, base)
  for (const msg of mapping.samples.audio) await dry.sample({ ...base, msg })
  await dry.closing(base)
  return dedupe(problems)
}

/** The input of the audio expressions for the bundled example init message, on the route's first replica. */
function exampleAudioInput(route: RouteConfig): MappingInput {
  const example = JSON.parse(readFileSync(join(packageRoot(), 'examples', 'init-message.json'), 'utf8')) as unknown
  const checked = checkInit(example)
  if (!checked.ok) throw new Error('the bundled example init message does not match its schema')
  const upstream = route.upstreams[0]
  return {
    init: checked.init,
    leg: { id: 'dry-run', route: route.name, ...checked.identity },
    route: { name: route.name, params: route.params, checksToken: (route.auth.audio ?? []).length > 0 },
    session: {
      id: '00000000-0000-4000-8000-000000000000',
      state: {},
      audio: { paused: false, positionMs: 0, discardedMs: 0, pauseStartMs: null, pauseDiscardedMs: 0 }
    },
    upstream: {
      name: upstream.name,
      audio: upstream.audio ?? null,
      credential: upstream.credential === undefined ? null : '[credential]',
      hasCredential: upstream.credential !== undefined
    }
  }
}

const predicate: Check = v => (v === undefined || typeof v === 'boolean' ? null : 'must produce true or false')
const isObject: Check = v =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? null : 'must produce an object'
const patch: Check = v =>
  v === undefined || v === null || isObject(v) === null ? null : 'must produce an object (or null)'

/** The audio section's expressions, run in the order a vendor session would; problems are added as found. */
class AudioDryRun {
  private readonly file: string
  private readonly grpc: NonNullable<AudioMapping['grpc']> | null
  private readonly eventStream: boolean
  private readonly platformMessage = validator('platform-websocket-message')

  constructor(
    private readonly mapping: CompiledMapping,
    private readonly audio: AudioMapping,
    private readonly problems: Problem[]
  ) {
    this.file = mapping.file
    this.grpc = audio.grpc ?? null
    this.eventStream = audio.frames.framing === 'event-stream'
  }

  /** The expression's value (undefined when there is none or it failed); a failure or complaint is a problem. */
  private async evaluate(pointer: string, expr: Expr | null, input: MappingInput, check?: Check): Promise<unknown> {
    if (expr === null) return undefined
    const out = await run(expr, input)
    if (!out.ok) {
      this.problems.push({ file: this.file, pointer, message: out.error })
      return undefined
    }
    const complaint = check?.(out.value)
    if (complaint)
      this.problems.push({ file: this.file, pointer, message: `${complaint}; it produced ${describe(out.value)}` })
    return out.value
  }

  private readonly frame: Check = v => {
    if (v === undefined || v === null || typeof v === 'string') return null
    if (typeof v !== 'object' || Array.isArray(v)) return 'must produce an object, a string or null'
    return this.eventStream ? eventMessage(v) : null
  }

  private readonly frames: Check = v =>
    Array.isArray(v)
      ? v.every(x => this.frame(x) === null)
        ? null
        : 'must produce objects, strings or null'
      : this.frame(v)

  /** A gRPC mapping's frames are requests: each held to the method's request message (mapping/grpc-check.ts). */
  private framesAt(pointer: string): Check {
    const grpc = this.grpc
    if (grpc === null) return this.frames
    return v => {
      for (const x of Array.isArray(v) ? v : [v]) {
        const p = requestProblem(this.file, grpc, pointer, x)
        if (p !== null) this.problems.push(p)
      }
      return null
    }
  }

  private readonly emitted: Check = v =>
    (Array.isArray(v) ? v : [v]).every(x => x === undefined || x === null || this.platformMessage(x))
      ? null
      : 'must produce a PlatformWebSocketMessage {command, messageType, message, parameters}, an array of them or null'

  private readonly url: Check = v =>
    this.grpc !== null
      ? typeof v === 'string' && /^grpcs?:\/\//.test(v)
        ? null
        : 'must produce a grpcs:// or grpc:// URL'
      : typeof v === 'string' && /^wss?:\/\//.test(v)
        ? null
        : 'must produce a ws:// or wss:// URL'

  /** `time` on a result: each of its expressions gives a time in its unit (or nothing: the result has none). */
  private readonly aTime: Check = v =>
    v === undefined || v === null
      ? null
      : this.audio.time?.iso8601 === true
        ? typeof v === 'string' && parseIsoDuration(v) !== null
          ? null
          : 'must produce an ISO 8601 duration ("PT1.23S")'
        : typeof v === 'number' && Number.isFinite(v)
          ? null
          : 'must produce a number'

  /** A gRPC mapping's sample vendor messages, held to the method's response message. */
  grpcSamples(): void {
    const grpc = this.grpc
    if (grpc === null) return
    for (const [i, sample] of this.mapping.samples.audio.entries()) {
      const p = sampleProblem(this.file, grpc, i, sample)
      if (p !== null) this.problems.push(p)
    }
  }

  /** What opens a vendor session and keeps it: URL, signing, headers, frame shapes, open, keepalive, pause, resume. */
  async opening(route: RouteConfig, base: MappingInput): Promise<void> {
    const audio = this.audio
    await this.evaluate('/audio/url', audio.url, base, this.url)
    if (audio.sign != null) {
      await this.evaluate('/audio/sign/region', audio.sign.region, base, v =>
        typeof v === 'string' && /^[a-z0-9-]{1,64}$/.test(v) ? null : 'must produce an AWS region name (e.g. us-east-1)'
      )
      for (const u of route.upstreams)
        if (u.audio !== undefined && u.signing === undefined)
          this.problems.push({
            file: this.file,
            pointer: '/audio/sign',
            message: `route ${route.name}: replica ${u.name} has no signing keys`
          })
    }
    await this.evaluate('/audio/headers', audio.headers, base, isObject)
    await this.evaluate('/audio/frames/headers', audio.eventHeaders ?? null, base, v => eventMessage({ headers: v }))
    await this.evaluate('/audio/frames/template', audio.template, base, v => {
      if (isObject(v) !== null) return 'must produce an object'
      return JSON.stringify(v).includes('{{payload}}') ? null : 'must contain the {{payload}} placeholder'
    })
    await this.evaluate('/audio/open', audio.open, base, this.framesAt('/audio/open'))
    if (audio.keepalive !== null)
      await this.evaluate(
        '/audio/keepalive/frame',
        audio.keepalive.frame,
        base,
        this.framesAt('/audio/keepalive/frame')
      )
    await this.evaluate('/audio/pause', audio.pause, base, this.framesAt('/audio/pause'))
    await this.evaluate('/audio/resume', audio.resume, base, this.framesAt('/audio/resume'))
  }

  /** One sample vendor message: readiness, the control rules that match it, the result rules that match it. */
  async sample(input: MappingInput): Promise<void> {
    const audio = this.audio
    if (audio.ready !== null) {
      await this.evaluate('/audio/ready/when', audio.ready.when, input, predicate)
      await this.evaluate('/audio/ready/refused', audio.ready.refused, input, predicate)
    }
    for (const [j, rule] of (audio.control ?? []).entries()) {
      const at = `/audio/control/${j}`
      if ((await this.evaluate(`${at}/when`, rule.when, input, predicate)) !== true) continue
      await this.evaluate(`${at}/set`, rule.set, input, patch)
      await this.evaluate(`${at}/reply`, rule.reply, input, this.framesAt(`${at}/reply`))
      await this.evaluate(`${at}/emit`, rule.emit, input, this.emitted)
    }
    for (const [j, rule] of audio.results.entries()) {
      const when = await this.evaluate(`/audio/results/${j}/when`, rule.when, input, predicate)
      if (when !== true) continue
      // `each`: every item is a result of its own (its `time`, its `emit`, with the item as `item`).
      const each = rule.each == null ? [undefined] : await this.evaluate(`/audio/results/${j}/each`, rule.each, input)
      const items =
        rule.each == null ? each : each === undefined || each === null ? [] : Array.isArray(each) ? each : [each]
      for (const item of items as unknown[]) {
        const one = rule.each == null ? input : { ...input, item }
        await this.time(one)
        await this.evaluate(`/audio/results/${j}/emit`, rule.emit, one, this.emitted)
      }
    }
  }

  private async time(input: MappingInput): Promise<void> {
    const time = this.audio.time
    if (time == null) return
    await this.evaluate('/audio/time/start', time.start, input, this.aTime)
    await this.evaluate('/audio/time/end', time.end, input, this.aTime)
    await this.evaluate('/audio/time/duration', time.duration, input, this.aTime)
    await this.evaluate('/audio/time/final', time.final, input, predicate)
  }

  /** The close frame, then `closeWhen` on every sample vendor message. */
  async closing(base: MappingInput): Promise<void> {
    const audio = this.audio
    await this.evaluate('/audio/close', audio.close, base, this.framesAt('/audio/close'))
    for (const msg of this.mapping.samples.audio)
      if (audio.closeWhen !== null)
        await this.evaluate('/audio/closeWhen', audio.closeWhen, { ...base, msg }, predicate)
  }
}

/**
 * The text section on the interface's example utterance (2.7), for the route's first text replica with
 * a placeholder credential; then `text.response` on each `samples.text` answer.
 */
async function dryRunText(mapping: CompiledMapping, route: RouteConfig): Promise<Problem[]> {
  const problems: Problem[] = []
  const text = mapping.text
  if (text === null) return problems
  const file = mapping.file
  if (!validator('webhooks-messages-request')(EXAMPLE_UTTERANCE))
    throw new Error('the bundled example utterance does not match its schema')
  const checksToken = (route.auth.text ?? []).length > 0
  const { request, message } = normalizeUtterance(
    { ...EXAMPLE_UTTERANCE, authorizationHeader: '[platform credential]' },
    checksToken
  )
  const upstream = route.upstreams.find(u => u.text !== undefined) ?? route.upstreams[0]
  const input: TextInput = {
    request,
    message,
    requestId: 'dry-run',
    route: { name: route.name, params: route.params, checksToken },
    upstream: {
      name: upstream.name,
      credential: upstream.credential === undefined ? null : '[credential]',
      hasCredential: upstream.credential !== undefined,
      textPath: textPathOf(upstream.text)
    }
  }
  if (text.grpc != null) input.steps = await checkStepRequests(file, text.setup ?? [], input, problems)
  const parts = [await mapPath(text, input), await mapHeaders(text, input), await mapBody(text, input)]
  for (const part of parts) {
    if (part.ok) continue
    let why = part.error
    // At run time a header complaint never quotes values; here the credential is a placeholder, so say what came out.
    if (part.pointer === '/text/request/headers' && text.headers !== null) {
      const out = await runText(text.headers, input)
      if (out.ok) why += `; it produced ${describe(out.value)}`
    }
    problems.push({ file, pointer: part.pointer, message: why })
  }
  if (text.grpc != null) {
    const body = await runText(text.body, input)
    const p = body.ok ? requestProblem(file, text.grpc, '/text/request/body', body.value) : null
    if (p !== null) problems.push(p)
  }
  const stream = await streamAsked(mapping, input)
  if (stream !== null) problems.push(stream)
  if (text.response !== null) {
    for (const [i, sample] of mapping.samples.text.entries()) {
      const s = sample as { status?: number; headers?: Record<string, string>; body: unknown }
      const out = await runText(text.response, {
        ...input,
        response: { status: s.status ?? 200, headers: s.headers ?? {}, body: s.body }
      })
      if (!out.ok) problems.push({ file, pointer: '/text/response', message: `on samples/text/${i}: ${out.error}` })
      else if (out.value === undefined)
        problems.push({
          file,
          pointer: '/text/response',
          message: `on samples/text/${i}: must produce the answer for the platform; it produced nothing`
        })
    }
  }
  return problems
}

/**
 * A body that asks for a streamed answer (`"stream": true`, as OpenAI-compatible APIs and others take it: the
 * answer comes as server-sent events): the gateway reads one whole answer per utterance and runs text.response
 * once on it, so it is refused, at the `stream` key inside the expression when it is written there.
 */
async function streamAsked(mapping: CompiledMapping, input: TextInput): Promise<Problem | null> {
  const text = mapping.text
  if (text === null) return null
  const out = await runText(text.body, input)
  if (
    !out.ok ||
    out.value === null ||
    typeof out.value !== 'object' ||
    (out.value as { stream?: unknown }).stream !== true
  )
    return null
  const pointer = '/text/request/body'
  const problem: Problem = {
    file: mapping.file,
    pointer,
    message:
      'asks for a streamed answer ("stream": true); the gateway reads one whole answer per utterance (server-sent ' +
      'events are not read): leave stream out or false'
  }
  try {
    const source = readSource(mapping.file)
    const body = (source.value as { text?: { request?: { body?: unknown } } }).text?.request?.body
    const at = typeof body === 'string' ? body.search(/["']?\bstream\b["']?\s*:/) : -1
    return { ...problem, ...(source.where(pointer) ?? {}), ...(at >= 0 ? (source.at(pointer, at) ?? {}) : {}) }
  } catch {
    return problem
  }
}

/** null when `v` is an event-stream message a mapping may send ({headers, body | bodyBase64}), else why not. */
function eventMessage(v: unknown): string | null {
  try {
    messageFromMapping(v)
    return null
  } catch (err) {
    return `must produce an event-stream message {headers, body}: ${(err as Error).message}`
  }
}

function dedupe(problems: Problem[]): Problem[] {
  const seen = new Set<string>()
  return problems.filter(p => {
    const k = `${p.pointer}\n${p.message}`
    if (seen.has(k)) return false
    seen.add(k)
    return true
  })
}
