import { request as httpRequest } from 'node:http'
import { request as httpsRequest } from 'node:https'
/** `simulate text`: act as the platform's script engine and POST one utterance to the text hook. */

export interface SimulateTextOptions {
  /** The text hook: https://host:port/text/{route} or …/agent_assist_text_webhooks/utterance. */
  url: string
  /** Sent as the body's authorizationHeader, as the platform does (or as `Authorization: Bearer` with authHeader). */
  token?: string
  authHeader?: boolean
  /** Default patron. */
  participant?: 'patron' | 'agent' | 'system'
  text: string
  /** Default 1000000. */
  contactId?: number
  /** Default 4594. */
  busNo?: number
  /** Default tenant-sim. */
  tenantId?: string
  messageData?: Record<string, unknown>
  agentAssistAppConfig?: Record<string, unknown>
  /** Accept self-signed TLS certificates. */
  insecure?: boolean
  /** Default 30000. */
  timeoutMs?: number
  print?: (line: string) => void
}

export interface SimulatedUtterance {
  /** HTTP status; 0 when no answer came. */
  status: number
  contentType: string
  requestId: string | null
  /** The answer, parsed when it is JSON, else its text. */
  answer: unknown
  error?: string
}

/** A complete WebHooksMessagesRequest (spec 2.7), as the platform script engine sends it. */
export function utteranceMessage(opts: {
  token?: string
  contactId: number
  busNo: number
  tenantId: string
  participant: string
  text: string
  messageData?: Record<string, unknown>
  agentAssistAppConfig?: Record<string, unknown>
}): Record<string, unknown> {
  const msg: Record<string, unknown> = {}
  if (opts.token !== undefined) msg.authorizationHeader = opts.token
  msg.contactId = opts.contactId
  msg.busNo = opts.busNo
  msg.tenantId = opts.tenantId
  msg.participantId = opts.participant
  msg.messageBody = opts.text
  msg.messageData = opts.messageData ?? {}
  msg.agentAssistAppConfig = opts.agentAssistAppConfig ?? {}
  return msg
}

/** Acts as the platform's script engine: POSTs one utterance to the text hook; prints the status and the answer. */
export function simulateText(opts: SimulateTextOptions): Promise<SimulatedUtterance> {
  const token = opts.token
  const print = (line: string): void => {
    // A server may echo the token back; it must never reach the output.
    if (opts.print) opts.print(token ? line.split(token).join('[REDACTED]') : line)
  }
  let url: URL
  try {
    url = new URL(opts.url)
  } catch {
    return Promise.reject(new Error(`not a URL: ${opts.url}`))
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return Promise.reject(new Error('the text hook URL must be http:// or https://'))
  const body = JSON.stringify(
    utteranceMessage({
      token: opts.authHeader === true ? undefined : token,
      contactId: opts.contactId ?? 1000000,
      busNo: opts.busNo ?? 4594,
      tenantId: opts.tenantId ?? 'tenant-sim',
      participant: opts.participant ?? 'patron',
      text: opts.text,
      messageData: opts.messageData,
      agentAssistAppConfig: opts.agentAssistAppConfig
    })
  )
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body)
  }
  if (opts.authHeader === true && token !== undefined) headers.authorization = `Bearer ${token}`
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest
  return new Promise<SimulatedUtterance>(resolve => {
    const req = send(
      url,
      { method: 'POST', headers, rejectUnauthorized: !opts.insecure, timeout: opts.timeoutMs ?? 30000 },
      res => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8')
          const contentType = String(res.headers['content-type'] ?? '')
          let answer: unknown = text
          if (/json/i.test(contentType)) {
            try {
              answer = JSON.parse(text) as unknown
            } catch {
              // keep the text
            }
          }
          const requestId = typeof res.headers['x-request-id'] === 'string' ? res.headers['x-request-id'] : null
          print(`status ${res.statusCode ?? 0}${requestId !== null ? ` (request ${requestId})` : ''}`)
          print(`answer ${typeof answer === 'string' ? answer : JSON.stringify(answer)}`)
          resolve({ status: res.statusCode ?? 0, contentType, requestId, answer })
        })
        res.on('error', (err: Error) => {
          print(`error ${err.message}`)
          resolve({ status: res.statusCode ?? 0, contentType: '', requestId: null, answer: null, error: err.message })
        })
      }
    )
    req.on('timeout', () => req.destroy(new Error('no answer in time')))
    req.on('error', (err: Error) => {
      print(`error ${err.message}`)
      resolve({ status: 0, contentType: '', requestId: null, answer: null, error: err.message })
    })
    req.end(body)
  })
}
