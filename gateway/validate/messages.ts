import { GatewayError } from '../errors'
import { problemsOf, validator, type Problem } from './compile'

export type Perspective = 'TX' | 'RX' | 'MIX'

/** The fields of an init message the gateway itself relies on, normalized. */
export interface LegIdentity {
  contactId: string
  busNo: string
  requestId: string | null
  perspective: Perspective
}

export type Parsed = { ok: true; value: unknown } | { ok: false; error: GatewayError }

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

/** Validate a parsed init message against schemas/websocket-hook-initialize-message.schema.json. */
export function checkInit(value: unknown): InitCheck {
  const validate = validator('websocket-hook-initialize-message')
  if (!validate(value)) {
    const problems = problemsOf(validate.errors)
    return {
      ok: false,
      error: new GatewayError('MESSAGE_INVALID', { pointers: problems.map(p => p.pointer) }),
      problems
    }
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
