import { connect } from 'node:net'
import WebSocket from 'ws'
import { request } from 'undici'
import type { UpstreamConfig } from '../config/types'
import { isGrpcUrl } from './grpc-url'

/** How a route's replicas are probed (built from the mapping's `health` section and the config). */
export type ProbeKind = 'upgrade' | 'http' | 'protocol' | 'tcp' | 'none'

/** One step of a protocol probe, bound to the probe's input: send a frame, or wait for an answer. */
export type BoundStep =
  | { kind: 'send'; frame: (last: unknown) => Promise<string | null> }
  | { kind: 'expect'; classify: (msg: unknown) => Promise<'match' | 'refused' | 'failed' | 'other'> }

/** What one probe of one replica needs, evaluated on a fresh probe input. A string: the mapping failed (the stage). */
export interface PreparedProbe {
  url: string
  headers: Record<string, string>
  method: string
  steps: readonly BoundStep[]
}

export interface ProbePlan {
  readonly kind: ProbeKind
  /** Build URL, headers and steps for one probe of `upstream`; a string says which mapping stage failed. */
  prepare: (upstream: UpstreamConfig) => Promise<PreparedProbe | string>
}

/** A probe's answer. Reasons never hold a URL or a header value (they may carry credentials). */
export type ProbeOutcome = { ok: true } | { ok: false; reason: string; credentialRefused: boolean }

const OK: ProbeOutcome = { ok: true }
const fail = (reason: string): ProbeOutcome => ({ ok: false, reason, credentialRefused: false })
const refused = (how: string): ProbeOutcome => ({
  ok: false,
  reason: `credential refused (${how})`,
  credentialRefused: true
})

/** 401 and 403 are the vendor saying no to the credential: a misconfiguration, not an outage. */
function byStatus(status: number, what: 'HTTP' | 'upgrade answered'): ProbeOutcome {
  if (status === 401 || status === 403) return refused(`${what} ${status}`)
  return fail(`${what} ${status}`)
}

/**
 * A plan from the gateway config alone (no mapping): `http` GETs the text URL (else the audio URL as
 * http) + `path` with the replica's headers; anything else upgrades to the audio URL with them.
 */
export function configPlan(active: { kind?: string; path: string }): ProbePlan {
  const kind: ProbeKind =
    active.kind === 'http' || active.kind === 'tcp' || active.kind === 'none' ? active.kind : 'upgrade'
  return {
    kind,
    prepare: async u => ({
      url: kind === 'http' ? new URL(active.path, u.text ?? u.audio!.replace(/^ws/, 'http')).toString() : u.audio!,
      headers: { ...u.headers },
      method: 'GET',
      steps: []
    })
  }
}

/** Run one probe of `upstream` under `plan`, within `timeoutMs`. Never throws. */
export async function runProbe(plan: ProbePlan, upstream: UpstreamConfig, timeoutMs: number): Promise<ProbeOutcome> {
  if (plan.kind === 'none') return OK
  // A replica with no audio URL has nothing to upgrade to: its text URL gets a TCP connect.
  const socketless = (plan.kind === 'upgrade' || plan.kind === 'protocol') && upstream.audio === undefined
  // A gRPC replica (grpcs://, grpc://) has no upgrade either: a TCP connect to its address.
  if (plan.kind === 'tcp' || socketless || isGrpcUrl(upstream.audio))
    return await tcpProbe((upstream.audio ?? upstream.text)!, timeoutMs)
  let prepared: PreparedProbe | string
  try {
    prepared = await plan.prepare(upstream)
  } catch {
    prepared = 'input'
  }
  if (typeof prepared === 'string') return fail(`the mapping's health ${prepared} failed`)
  if (plan.kind === 'http') return await httpProbe(prepared, timeoutMs)
  return await socketProbe(prepared, timeoutMs)
}

async function httpProbe(p: PreparedProbe, timeoutMs: number): Promise<ProbeOutcome> {
  try {
    const res = await request(p.url, {
      method: p.method as 'GET',
      headers: p.headers,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs)
    })
    await res.body.dump()
    return res.statusCode < 400 ? OK : byStatus(res.statusCode, 'HTTP')
  } catch (err) {
    return fail((err as { code?: string }).code ?? 'request failed')
  }
}

async function tcpProbe(base: string, timeoutMs: number): Promise<ProbeOutcome> {
  let host: string
  let port: number
  try {
    const u = new URL(base)
    host = u.hostname.replace(/^\[|\]$/g, '')
    port = u.port !== '' ? Number(u.port) : /^(wss|https|grpcs):$/.test(u.protocol) ? 443 : 80
  } catch {
    return fail('bad replica URL')
  }
  return await new Promise<ProbeOutcome>(resolve => {
    const socket = connect({ host, port, timeout: timeoutMs })
    socket.once('connect', () => {
      socket.destroy()
      resolve(OK)
    })
    socket.once('timeout', () => {
      socket.destroy()
      resolve(fail('TCP connect timed out'))
    })
    socket.once('error', (err: Error & { code?: string }) => resolve(fail(err.code ?? 'TCP connect failed')))
  })
}

/** The vendor's text answers, parsed as the mapping sees them: JSON, else `{ text }`. */
function parse(data: WebSocket.RawData): unknown {
  const text = Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.concat(data as Buffer[]).toString('utf8')
  try {
    return JSON.parse(text)
  } catch {
    return { text }
  }
}

/**
 * `upgrade` (no steps: 101, then close 1000 with nothing sent) and `protocol` (the steps in order, then
 * close 1000). An upgrade answered 401/403, a close 1008 or a step's `refused` match is a credential refusal.
 */
async function socketProbe(p: PreparedProbe, timeoutMs: number): Promise<ProbeOutcome> {
  return await new Promise<ProbeOutcome>(resolve => {
    const ws = new WebSocket(p.url, {
      headers: p.headers,
      handshakeTimeout: timeoutMs,
      perMessageDeflate: false,
      followRedirects: false
    })
    let done = false
    let step = 0
    let last: unknown = null
    let waiting: ((msg: unknown) => void) | null = null
    const inbox: unknown[] = []
    const deadline = setTimeout(() => finish(fail(`no answer within ${timeoutMs} ms (step ${step + 1})`)), timeoutMs)
    const finish = (outcome: ProbeOutcome): void => {
      if (done) return
      done = true
      clearTimeout(deadline)
      if (ws.readyState === WebSocket.OPEN) ws.close(1000, 'health probe')
      else ws.terminate()
      resolve(outcome)
    }
    const next = (): Promise<unknown> =>
      new Promise(res => {
        const queued = inbox.shift()
        if (queued !== undefined) res(queued)
        else waiting = res
      })
    const dialogue = async (): Promise<void> => {
      for (; step < p.steps.length && !done; step++) {
        const s = p.steps[step]
        if (s.kind === 'send') {
          const frame = await s.frame(last)
          if (frame !== null && !done) ws.send(frame)
          continue
        }
        for (;;) {
          const msg = await next()
          if (done) return
          const verdict = await s.classify(msg)
          if (verdict === 'match') {
            last = msg
            break
          }
          if (verdict === 'refused') return finish(refused(`the vendor's answer at step ${step + 1}`))
          if (verdict === 'failed') return finish(fail(`the vendor's answer at step ${step + 1} says it failed`))
        }
      }
      finish(OK)
    }
    ws.on('message', (data, isBinary) => {
      if (isBinary) return
      const msg = parse(data)
      if (waiting !== null) {
        const w = waiting
        waiting = null
        w(msg)
      } else inbox.push(msg)
    })
    ws.on('open', () => {
      dialogue().catch(() => finish(fail(`the mapping's health step ${step + 1} failed`)))
    })
    ws.on('unexpected-response', (_req, res) => finish(byStatus(res.statusCode ?? 0, 'upgrade answered')))
    ws.on('error', (err: Error & { code?: string }) => finish(fail(err.code ?? 'connect failed')))
    ws.on('close', (code: number) =>
      finish(code === 1008 ? refused('closed 1008') : fail(`closed ${code} before the probe ended`))
    )
  })
}
