import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { readSource } from '../config/source'
import type { RouteConfig } from '../config/types'
import { packageRoot } from '../paths'
import { checkInit, EXAMPLE_UTTERANCE, normalizeUtterance } from '../validate/messages'
import { validator } from '../validate/compile'
import type { CompiledMapping, Expr } from './compile'
import { evaluate as runText } from './fast-path'
import { parseIsoDuration } from './iso-duration'
import { run, type MappingInput } from './run'
import type { TextInput } from './text'
import { describe, mapBody, mapHeaders, mapPath } from './text-request'
import { messageFromMapping } from './event-stream'
import { textPathOf } from './vendor-target'
import { requestProblem, sampleProblem } from './grpc-check'
import type { ConfigProblem } from '../errors'

type Problem = ConfigProblem

/**
 * Run every expression of a mapping on the interface's example messages (init message, utterance) and
 * the mapping's own sample vendor messages; report what an expression produced when it is unusable.
 */
export async function dryRunMapping(mapping: CompiledMapping, route: RouteConfig): Promise<Problem[]> {
  const problems: Problem[] = await dryRunText(mapping, route)
  const audio = mapping.audio
  if (audio === null) return problems
  const example = JSON.parse(readFileSync(join(packageRoot(), 'examples', 'init-message.json'), 'utf8')) as unknown
  const checked = checkInit(example)
  if (!checked.ok) throw new Error('the bundled example init message does not match its schema')
  const upstream = route.upstreams[0]
  const base: MappingInput = {
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
  const file = mapping.file
  const evaluate = async (
    pointer: string,
    expr: Expr | null,
    input: MappingInput,
    check?: (v: unknown) => string | null
  ): Promise<unknown> => {
    if (expr === null) return undefined
    const out = await run(expr, input)
    if (!out.ok) {
      problems.push({ file, pointer, message: out.error })
      return undefined
    }
    const complaint = check?.(out.value)
    if (complaint) problems.push({ file, pointer, message: `${complaint}; it produced ${describe(out.value)}` })
    return out.value
  }
  const eventStream = audio.frames.framing === 'event-stream'
  const frame = (v: unknown): string | null => {
    if (v === undefined || v === null || typeof v === 'string') return null
    if (typeof v !== 'object' || Array.isArray(v)) return 'must produce an object, a string or null'
    return eventStream ? eventMessage(v) : null
  }
  const predicate = (v: unknown): string | null =>
    v === undefined || typeof v === 'boolean' ? null : 'must produce true or false'
  const platformMessage = validator('platform-websocket-message')
  const emitted = (v: unknown): string | null =>
    (Array.isArray(v) ? v : [v]).every(x => x === undefined || x === null || platformMessage(x))
      ? null
      : 'must produce a PlatformWebSocketMessage {command, messageType, message, parameters}, an array of them or null'
  const patch = (v: unknown): string | null =>
    v === undefined || v === null || isObject(v) === null ? null : 'must produce an object (or null)'

  const frames = (v: unknown): string | null =>
    Array.isArray(v) ? (v.every(x => frame(x) === null) ? null : 'must produce objects, strings or null') : frame(v)
  const grpc = audio.grpc ?? null
  const isString = (v: unknown): string | null =>
    grpc !== null
      ? typeof v === 'string' && /^grpcs?:\/\//.test(v)
        ? null
        : 'must produce a grpcs:// or grpc:// URL'
      : typeof v === 'string' && /^wss?:\/\//.test(v)
        ? null
        : 'must produce a ws:// or wss:// URL'
  // A gRPC mapping's frames are requests: each held to the method's request message (mapping/grpc-check.ts).
  const framesAt =
    (pointer: string) =>
    (v: unknown): string | null => {
      if (grpc === null) return frames(v)
      for (const x of Array.isArray(v) ? v : [v]) {
        const p = requestProblem(file, grpc, pointer, x)
        if (p !== null) problems.push(p)
      }
      return null
    }
  if (grpc !== null)
    for (const [i, sample] of mapping.samples.audio.entries()) {
      const p = sampleProblem(file, grpc, i, sample)
      if (p !== null) problems.push(p)
    }
  const isObject = (v: unknown): string | null =>
    v !== null && typeof v === 'object' && !Array.isArray(v) ? null : 'must produce an object'
  await evaluate('/audio/url', audio.url, base, isString)
  if (audio.sign != null) {
    await evaluate('/audio/sign/region', audio.sign.region, base, v =>
      typeof v === 'string' && /^[a-z0-9-]{1,64}$/.test(v) ? null : 'must produce an AWS region name (e.g. us-east-1)'
    )
    for (const u of route.upstreams)
      if (u.audio !== undefined && u.signing === undefined)
        problems.push({
          file,
          pointer: '/audio/sign',
          message: `route ${route.name}: replica ${u.name} has no signing keys`
        })
  }
  await evaluate('/audio/headers', audio.headers, base, isObject)
  await evaluate('/audio/frames/headers', audio.eventHeaders ?? null, base, v => eventMessage({ headers: v }))
  await evaluate('/audio/frames/template', audio.template, base, v => {
    if (isObject(v) !== null) return 'must produce an object'
    return JSON.stringify(v).includes('{{payload}}') ? null : 'must contain the {{payload}} placeholder'
  })
  await evaluate('/audio/open', audio.open, base, framesAt('/audio/open'))
  if (audio.keepalive !== null)
    await evaluate('/audio/keepalive/frame', audio.keepalive.frame, base, framesAt('/audio/keepalive/frame'))
  await evaluate('/audio/pause', audio.pause, base, framesAt('/audio/pause'))
  await evaluate('/audio/resume', audio.resume, base, framesAt('/audio/resume'))
  // `time` on a result: each of its expressions gives a time in its unit (or nothing: the result has none).
  const time = audio.time
  const aTime = (v: unknown): string | null =>
    v === undefined || v === null
      ? null
      : time?.iso8601 === true
        ? typeof v === 'string' && parseIsoDuration(v) !== null
          ? null
          : 'must produce an ISO 8601 duration ("PT1.23S")'
        : typeof v === 'number' && Number.isFinite(v)
          ? null
          : 'must produce a number'
  const checkTime = async (input: MappingInput): Promise<void> => {
    if (time == null) return
    await evaluate('/audio/time/start', time.start, input, aTime)
    await evaluate('/audio/time/end', time.end, input, aTime)
    await evaluate('/audio/time/duration', time.duration, input, aTime)
    await evaluate('/audio/time/final', time.final, input, predicate)
  }
  for (const msg of mapping.samples.audio) {
    const input = { ...base, msg }
    if (audio.ready !== null) {
      await evaluate('/audio/ready/when', audio.ready.when, input, predicate)
      await evaluate('/audio/ready/refused', audio.ready.refused, input, predicate)
    }
    for (const [j, rule] of (audio.control ?? []).entries()) {
      const at = `/audio/control/${j}`
      if ((await evaluate(`${at}/when`, rule.when, input, predicate)) !== true) continue
      await evaluate(`${at}/set`, rule.set, input, patch)
      await evaluate(`${at}/reply`, rule.reply, input, framesAt(`${at}/reply`))
      await evaluate(`${at}/emit`, rule.emit, input, emitted)
    }
    for (const [j, rule] of audio.results.entries()) {
      const when = await evaluate(`/audio/results/${j}/when`, rule.when, input, predicate)
      if (when !== true) continue
      // `each`: every item is a result of its own (its `time`, its `emit`, with the item as `item`).
      const each = rule.each == null ? [undefined] : await evaluate(`/audio/results/${j}/each`, rule.each, input)
      const items =
        rule.each == null ? each : each === undefined || each === null ? [] : Array.isArray(each) ? each : [each]
      for (const item of items as unknown[]) {
        const one = rule.each == null ? input : { ...input, item }
        await checkTime(one)
        await evaluate(`/audio/results/${j}/emit`, rule.emit, one, emitted)
      }
    }
  }
  await evaluate('/audio/close', audio.close, base, framesAt('/audio/close'))
  for (const msg of mapping.samples.audio)
    if (audio.closeWhen !== null) await evaluate('/audio/closeWhen', audio.closeWhen, { ...base, msg }, predicate)
  return dedupe(problems)
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
