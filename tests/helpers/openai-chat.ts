import { startRealVendor, type RealVendorEmulator, type RealVendorOptions } from '../../gateway/tools/real-vendors'
import { EXAMPLE_UTTERANCE } from '../../gateway/validate/messages'
import { startGateway, TEXT_TOKEN, type TestGateway } from './gateway'

// A route of mappings/openai-chat.yaml in a real gateway (`serve`), in front of strict OpenAI emulators, and the
// platform's script engine posting utterances to it (tests/integration/vendor-openai-chat.test.ts, issue-34-*).

type T = { teardown: (fn: () => unknown) => void; testdir: (fixture?: Record<string, string>) => string }
export type Json = Record<string, any>

export const CHAT_KEY = 'sk-chat-0123456789abcdef'
export const CHAT_PARAMS = {
  model: 'gpt-4.1-mini',
  systemPrompt: 'You help billing agents.',
  temperature: 0.2,
  sendContact: true
}

/** An OpenAI emulator taking CHAT_KEY, closed at the test's end. */
export async function openaiEmulator(t: T, opts: Omit<RealVendorOptions, 'kind'> = {}): Promise<RealVendorEmulator> {
  const emu = await startRealVendor({ kind: 'openai', apiKey: CHAT_KEY, ...opts })
  t.teardown(async () => await emu.close())
  return emu
}

export interface ChatRoute {
  key?: string
  text?: Json
  /** Added to each emulator's URL to make the replica's text URL (its base URL), e.g. `/v1`. */
  path?: string
  /** Probe the replicas with the mapping's own probe every 0.25 s (default: no active probe). */
  probe?: boolean
}

/** A gateway whose route `x` sends utterances to `emus` (replicas v0, v1…) through mappings/openai-chat.yaml. */
export async function chatGateway(t: T, emus: RealVendorEmulator[], route: ChatRoute = {}): Promise<TestGateway> {
  return await chatGatewayOf(t, { x: { emus, path: route.path } }, route)
}

/** One gateway with several such routes, each with its own replicas and base URL path (`key`, `text`, `probe` shared). */
export async function chatGatewayOf(
  t: T,
  routes: Record<string, { emus: RealVendorEmulator[]; path?: string }>,
  opts: ChatRoute = {}
): Promise<TestGateway> {
  const route = (emus: RealVendorEmulator[], path = ''): Json => ({
    mapping: 'mappings/openai-chat.yaml',
    auth: { text: ['${TEXT_TOKEN}'] },
    params: CHAT_PARAMS,
    upstreams: emus.map((e, i) => ({ name: `v${i}`, text: e.httpUrl + path, credential: '${VENDOR_KEY}' }))
  })
  return await startGateway(
    t,
    {
      text: { timeoutSeconds: 5, ...opts.text },
      ...(opts.probe === true ? { health: { active: { kind: undefined, intervalSeconds: 0.25 } } } : {}),
      routes: Object.fromEntries(Object.entries(routes).map(([name, r]) => [name, route(r.emus, r.path)]))
    },
    { VENDOR_KEY: opts.key ?? CHAT_KEY }
  )
}

/** The platform's script engine posts one utterance to `route` (default `x`); the answer's status and JSON body. */
export async function say(gw: TestGateway, messageBody: string, route = 'x'): Promise<{ status: number; body: Json }> {
  const res = await fetch(gw.url(`/text/${route}`), {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: TEXT_TOKEN },
    body: JSON.stringify({ ...EXAMPLE_UTTERANCE, messageBody })
  })
  return { status: res.status, body: (await res.json()) as Json }
}
