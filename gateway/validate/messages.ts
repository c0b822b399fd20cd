import { GatewayError } from '../errors'
import type { Result } from '../result'
import { escapePointer, problemsOf, validator, type Problem } from './compile'

export type Perspective = 'TX' | 'RX' | 'MIX'

/** The fields of an init message the gateway itself relies on, normalized. */
export interface LegIdentity {
  contactId: string
  busNo: string
  requestId: string | null
  perspective: Perspective
}

export type Parsed = Result<unknown, GatewayError>

/** JSON.parse that never throws. Deep nesting beyond V8's limit is a parse failure, not a crash. */
export function parseJson(text: string): Parsed {
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch {
    return { ok: false, error: new GatewayError('MESSAGE_NOT_JSON') }
  }
}

export type InitCheck =
  | { ok: true; init: Record<string, unknown>; identity: LegIdentity }
  | { ok: false; error: GatewayError; problems: Problem[] }

const PERSPECTIVES: Record<string, Perspective> = {
  TX: 'TX',
  RX: 'RX',
  MIX: 'MIX',
  MX: 'MIX',
  0: 'TX',
  1: 'RX',
  2: 'MIX'
}

/** The numeric ids of executionInfo (2.2). */
const ID_FIELDS = ['contactId', 'busNo', 'requestId', 'actionId'] as const
const MAX_EXACT_ID = BigInt(Number.MAX_SAFE_INTEGER)

/**
 * Ids above 2^53-1 are refused, not passed on: JSON.parse has already rounded such a number, and
 * mappings compute in IEEE doubles (`$number(leg.contactId)`), so a larger id would reach the vendor
 * changed. Strings of digits are judged by their value, numbers by whether they are still exact.
 */
function inexactIds(value: unknown): Problem[] {
  const info = (value as { executionInfo?: unknown } | null)?.executionInfo
  if (info === null || typeof info !== 'object') return []
  const out: Problem[] = []
  for (const k of ID_FIELDS) {
    const v = (info as Record<string, unknown>)[k]
    const inexact =
      typeof v === 'number'
        ? Number.isInteger(v) && !Number.isSafeInteger(v)
        : typeof v === 'string' && /^[0-9]{1,400}$/.test(v) && BigInt(v) > MAX_EXACT_ID
    if (inexact)
      out.push({
        pointer: `/executionInfo/${k}`,
        message: `is above ${Number.MAX_SAFE_INTEGER} (2^53-1), which cannot be kept exact`
      })
  }
  return out
}

function invalid(problems: Problem[]): InitCheck {
  return { ok: false, error: new GatewayError('MESSAGE_INVALID', { pointers: problems.map(p => p.pointer) }), problems }
}

/**
 * Validate a parsed init message: nesting (MAX_DEPTH, like the text hook, before anything recursive
 * sees it), exact ids, then schemas/websocket-hook-initialize-message.schema.json.
 */
export function checkInit(value: unknown): InitCheck {
  const deep = tooDeep(value, MAX_DEPTH)
  if (deep !== null) return invalid([{ pointer: deep, message: `nests deeper than ${MAX_DEPTH} levels` }])
  const validate = validator('websocket-hook-initialize-message')
  const ids = inexactIds(value)
  if (!validate(value) || ids.length > 0) {
    const seen = new Set(ids.map(p => p.pointer))
    return invalid([...ids, ...problemsOf(validate.errors).filter(p => !seen.has(p.pointer))])
  }
  const init = value as Record<string, unknown>
  const info = init.executionInfo as Record<string, unknown>
  return {
    ok: true,
    init,
    identity: {
      contactId: String(info.contactId),
      busNo: String(info.busNo),
      requestId: info.requestId === undefined ? null : String(info.requestId),
      perspective: PERSPECTIVES[String(init.streamPerspective)]
    }
  }
}

// ---- utterances (text hook): validation, then the one shape every text mapping sees ---------------

/** Deepest nesting accepted in a body: deeper JSON is refused (400) before anything recursive sees it. */
export const MAX_DEPTH = 64

/** One utterance in the one shape every text mapping sees. Never holds a credential. */
export interface Utterance {
  contactId: number
  busNo: number
  tenantId: string
  participantId: 'patron' | 'agent' | 'system'
  messageBody: string
  /** `messageData` (2.7) or `messageMetaData` (2.8); `{}` when neither came. */
  messageData: Record<string, unknown>
  /** 2.9 configuration parameters; `{}` when none came. */
  agentAssistAppConfig: Record<string, unknown>
}

/** An interface example utterance (2.7), for `check` dry-runs. */
export const EXAMPLE_UTTERANCE = Object.freeze({
  contactId: 584930211,
  busNo: 4594,
  tenantId: 'tenant-eu-1',
  participantId: 'patron',
  messageBody: 'Hi, I was charged twice for my last order.',
  messageData: { channel: 'chat', links: ['https://example.com/orders/1234'] },
  agentAssistAppConfig: { language: 'en-US', knowledgeBase: 'billing' }
})

/** Nesting, then the interface schema (2.8 when the body names its data messageMetaData, else 2.7). */
export function checkUtterance(msg: Record<string, unknown>): Problem[] {
  const deep = tooDeep(msg, MAX_DEPTH)
  if (deep !== null) return [{ pointer: deep, message: `nests deeper than ${MAX_DEPTH} levels` }]
  const validate =
    'messageMetaData' in msg && !('messageData' in msg)
      ? validator('agent-assist-utterance')
      : validator('webhooks-messages-request')
  return validate(msg) ? [] : problemsOf(validate.errors)
}

/** JSON pointer of the first value nested deeper than `max` (the root is depth 0), or null. Iterative. */
export function tooDeep(root: unknown, max: number): string | null {
  const values: unknown[] = [root]
  const depths: number[] = [0]
  const parents: number[] = [-1]
  const keys: string[] = ['']
  const stack: number[] = [0]
  while (stack.length > 0) {
    const i = stack.pop()!
    const v = values[i]
    if (v === null || typeof v !== 'object') continue
    if (depths[i] >= max) {
      const parts: string[] = []
      for (let j = i; j > 0; j = parents[j]) parts.push(escapePointer(keys[j]))
      return `/${parts.reverse().join('/')}`
    }
    for (const k of Object.keys(v)) {
      values.push((v as Record<string, unknown>)[k])
      depths.push(depths[i] + 1)
      parents.push(i)
      keys.push(k)
      stack.push(values.length - 1)
    }
  }
  return null
}

/**
 * The normalized utterance of a validated platform message. `checksToken`: the route checks the
 * credential itself, so `message` drops it (it was meant for the gateway, as on the audio hook).
 */
export function normalizeUtterance(
  msg: Record<string, unknown>,
  checksToken: boolean
): { request: Utterance; message: Record<string, unknown> } {
  const data = msg.messageData ?? msg.messageMetaData
  const config = msg.agentAssistAppConfig
  const request: Utterance = {
    contactId: Number(msg.contactId),
    busNo: Number(msg.busNo),
    tenantId: msg.tenantId as string,
    participantId: msg.participantId as Utterance['participantId'],
    messageBody: msg.messageBody as string,
    messageData: data !== null && typeof data === 'object' ? (data as Record<string, unknown>) : {},
    agentAssistAppConfig: config !== null && typeof config === 'object' ? (config as Record<string, unknown>) : {}
  }
  let message = msg
  if (checksToken && 'authorizationHeader' in msg) {
    const { authorizationHeader: _dropped, ...rest } = msg
    message = rest
  }
  return { request, message }
}
