import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import WebSocket from 'ws'
import { sleep } from './gateway'

type T = { teardown: (fn: () => unknown) => void }

/** How long one DevTools step (a command, a page load) may take on a busy machine before it fails by name. */
const STEP_MS = 60_000

/** Debian's `chromium` (the package .ci/run installs), or null when it is not there. */
export function chromiumPath(): string | null {
  for (const p of [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'])
    if (p !== undefined && p !== '' && existsSync(p)) return p
  const found = spawnSync('sh', ['-c', 'command -v chromium'], { encoding: 'utf8' }).stdout.trim()
  return found === '' ? null : found
}

/** A request the page made, as Chromium sent it. */
export interface SeenRequest {
  url: string
  method: string
  headers: Record<string, string>
}

export interface BrowserPage {
  /** Load `url`; answers a Basic challenge with `credentials` (the way a person types them into the dialog). */
  goto: (url: string) => Promise<void>
  /** An expression evaluated in the page; its value, by JSON. */
  evaluate: <V>(expression: string) => Promise<V>
  /** PNG of the viewport. */
  screenshot: () => Promise<Buffer>
  requests: () => SeenRequest[]
  /** Console errors, uncaught exceptions and security (CSP) reports the page produced. */
  problems: () => string[]
  /** Basic challenges answered. */
  challenges: () => number
}

/**
 * Headless Chromium driven over the DevTools protocol (a WebSocket; no driver library): one page, every
 * request seen on its way out, auth challenges answered with `credentials`. Stopped at teardown.
 */
export async function openPage(
  t: T,
  credentials: { username: string; password: string } | null,
  size = { width: 1280, height: 900 }
): Promise<BrowserPage> {
  const chromium = chromiumPath()
  if (chromium === null) throw new Error('chromium is not installed')
  const profile = mkdtempSync(join(tmpdir(), 'assist-gateway-chromium-'))
  const child = spawn(
    chromium,
    [
      '--headless=new',
      '--no-sandbox', // the tests may run as root (CI does), where Chromium's sandbox refuses to start
      '--disable-gpu',
      '--no-first-run',
      '--no-default-browser-check',
      '--remote-debugging-port=0',
      `--user-data-dir=${profile}`,
      `--window-size=${size.width},${size.height}`,
      'about:blank'
    ],
    { stdio: 'ignore' }
  )
  const exited = new Promise(resolve => child.once('exit', resolve))
  t.teardown(async () => {
    child.kill('SIGKILL')
    await exited
    rmSync(profile, { recursive: true, force: true })
  })
  // Chromium writes the port it took into DevToolsActivePort once it listens: the port, a newline, the browser's
  // path. The file appears before it is written (seen: read empty, the port taken as 80), so wait for a whole line.
  const portFile = join(profile, 'DevToolsActivePort')
  const portIn = (): string | null =>
    existsSync(portFile) ? (/^(\d+)\n/.exec(readFileSync(portFile, 'utf8'))?.[1] ?? null) : null
  for (let i = 0; i < 1200 && portIn() === null; i++) await sleep(50)
  const port = portIn()
  if (port === null) throw new Error('chromium did not open its DevTools port within 60 s')
  const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as {
    type: string
    webSocketDebuggerUrl: string
  }[]
  const ws = new WebSocket(targets.find(x => x.type === 'page')!.webSocketDebuggerUrl, { perMessageDeflate: false })
  await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject))
  t.teardown(() => ws.close())

  let nextId = 1
  const waiting = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>()
  const listeners = new Map<string, ((params: any) => void)[]>()
  const on = (method: string, fn: (params: any) => void): void => {
    listeners.set(method, [...(listeners.get(method) ?? []), fn])
  }
  ws.on('message', data => {
    const m = JSON.parse(String(data))
    if (m.id !== undefined) {
      const w = waiting.get(m.id)
      waiting.delete(m.id)
      if (m.error !== undefined) w?.reject(new Error(`${m.error.message} (${m.error.code})`))
      else w?.resolve(m.result)
    } else for (const fn of listeners.get(m.method) ?? []) fn(m.params)
  })
  // A browser that died or hangs fails the step that waited on it, by name, instead of the whole file's timeout.
  let gone: string | null = null
  const fail = (why: string): void => {
    gone = why
    for (const w of waiting.values()) w.reject(new Error(why))
    waiting.clear()
  }
  ws.once('close', code => fail(`the DevTools socket closed (${code}); chromium exited or crashed`))
  child.once('exit', (code, signal) => fail(`chromium exited (${code ?? signal})`))
  const send = (method: string, params: Record<string, unknown> = {}): Promise<any> =>
    new Promise((resolve, reject) => {
      if (gone !== null) return reject(new Error(gone))
      const id = nextId++
      const timer = setTimeout(() => {
        waiting.delete(id)
        reject(new Error(`chromium did not answer ${method} within ${STEP_MS / 1000} s`))
      }, STEP_MS)
      const settle =
        <V>(f: (v: V) => void) =>
        (v: V) => {
          clearTimeout(timer)
          f(v)
        }
      waiting.set(id, { resolve: settle(resolve), reject: settle(reject) })
      ws.send(JSON.stringify({ id, method, params }))
    })

  const requests: SeenRequest[] = []
  const problems: string[] = []
  let challenges = 0
  on('Fetch.requestPaused', p => {
    requests.push({ url: p.request.url, method: p.request.method, headers: p.request.headers })
    send('Fetch.continueRequest', { requestId: p.requestId }).catch(() => {})
  })
  on('Fetch.authRequired', p => {
    challenges++
    const response =
      credentials === null ? { response: 'CancelAuth' } : { response: 'ProvideCredentials', ...credentials }
    send('Fetch.continueWithAuth', { requestId: p.requestId, authChallengeResponse: response }).catch(() => {})
  })
  on('Runtime.exceptionThrown', p =>
    problems.push(`exception: ${p.exceptionDetails?.exception?.description ?? p.exceptionDetails?.text}`)
  )
  on('Log.entryAdded', p => {
    if (p.entry.level === 'error' || p.entry.source === 'security') problems.push(`${p.entry.source}: ${p.entry.text}`)
  })
  await send('Fetch.enable', { handleAuthRequests: true, patterns: [{ urlPattern: '*' }] })
  await send('Runtime.enable')
  await send('Log.enable')
  await send('Page.enable')

  return {
    goto: async url => {
      let timer: NodeJS.Timeout | undefined
      const loaded = new Promise<void>((resolve, reject) => {
        on('Page.loadEventFired', () => resolve())
        timer = setTimeout(() => reject(new Error(`${url} did not load within ${STEP_MS / 1000} s`)), STEP_MS)
      })
      await send('Page.navigate', { url })
      await loaded.finally(() => clearTimeout(timer))
    },
    evaluate: async <V>(expression: string): Promise<V> => {
      const r = await send('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true })
      if (r.exceptionDetails !== undefined) throw new Error(`in the page: ${r.exceptionDetails.text}`)
      return r.result.value as V
    },
    screenshot: async () => Buffer.from((await send('Page.captureScreenshot', { format: 'png' })).data, 'base64'),
    requests: () => requests.slice(),
    problems: () => problems.slice(),
    challenges: () => challenges
  }
}
