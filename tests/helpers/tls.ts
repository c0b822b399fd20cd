import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Agent, request } from 'undici'
import { startGateway, type TestGateway } from './gateway'
import { selfSignedPair } from './openssl'

type T = Parameters<typeof startGateway>[0]

export interface ThrowawayCert {
  cert: string
  key: string
  pem: string
}

let made: { cert: string; key: string } | null = null

/** One key pair and certificate per test process (RSA key generation costs CPU a busy machine lacks). */
function makeOnce(): { cert: string; key: string } {
  if (made !== null) return made
  const dir = mkdtempSync(join(tmpdir(), 'assist-gateway-cert-'))
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }))
  const { cert, key } = selfSignedPair(dir)
  made = { cert: readFileSync(cert, 'utf8'), key: readFileSync(key, 'utf8') }
  return made
}

/**
 * A self-signed certificate for localhost and 127.0.0.1, valid one day, made with the openssl CLI (once
 * per test process) and written into the test's dir.
 */
export function throwawayCert(t: T): ThrowawayCert {
  const dir = t.testdir()
  const cert = join(dir, 'cert.pem')
  const key = join(dir, 'key.pem')
  const pair = makeOnce()
  writeFileSync(cert, pair.cert)
  writeFileSync(key, pair.key, { mode: 0o600 })
  return { cert, key, pem: pair.cert }
}

export interface TlsGateway extends TestGateway {
  /** An undici Agent that trusts only the throwaway certificate (real verification, no shortcuts). */
  agent: Agent
  /** The certificate, as PEM text and as its file. */
  ca: string
  caFile: string
}

/**
 * A gateway serving HTTPS and WSS (uWS SSLApp) with a throwaway certificate, and a client that trusts it;
 * `tls` adds listen.tls keys.
 */
export async function startTlsGateway(
  t: T,
  config: Record<string, unknown>,
  env: Record<string, string> = {},
  opts: { connections?: number; tls?: Record<string, unknown>; files?: Record<string, string> } = {}
): Promise<TlsGateway> {
  const c = throwawayCert(t)
  const gw = await startGateway(
    t,
    { ...config, listen: { host: '127.0.0.1', port: 0, tls: { cert: c.cert, key: c.key, ...opts.tls } } },
    env,
    opts.files
  )
  const agent = new Agent({ connect: { ca: c.pem }, connections: opts.connections ?? 64 })
  t.teardown(async () => await agent.close())
  return { ...gw, agent, ca: c.pem, caFile: c.cert }
}

export interface Answer {
  status: number
  headers: Record<string, string>
  text: string
  json: any
}

/** POST a body (a string is sent as is, anything else as JSON) and read the whole answer. */
export async function post(
  agent: Agent,
  url: string,
  body: unknown,
  headers: Record<string, string> = {}
): Promise<Answer> {
  const res = await request(url, {
    method: 'POST',
    dispatcher: agent,
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body)
  })
  const text = await res.body.text()
  const flat: Record<string, string> = {}
  for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) flat[k] = Array.isArray(v) ? v.join(', ') : v
  let json: unknown = null
  try {
    json = JSON.parse(text)
  } catch {
    /* not JSON */
  }
  return { status: res.statusCode, headers: flat, text, json }
}

/** A valid WebHooksMessagesRequest (interface 2.7). */
export function utterance(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    contactId: 584930211,
    busNo: 4594,
    tenantId: 'tenant-eu-1',
    participantId: 'patron',
    messageBody: 'I was charged twice.',
    messageData: { channel: 'chat' },
    agentAssistAppConfig: { language: 'en-US' },
    ...overrides
  }
}
