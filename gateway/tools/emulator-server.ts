import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { WebSocketServer } from 'ws'
import { cannotListen } from '../errors'

/** What every bundled emulator's listener gives its caller. */
export interface Listening {
  port: number
  /** `ws://host:port` (the emulator appends its own path). */
  wsBase: string
  httpUrl: string
  /** Stop listening, run `beforeClose` (terminate sessions, clear timers), resolve when fully closed. Idempotent. */
  close: () => Promise<void>
}

/** Listen on `host:port` (0: ephemeral) and hand back the emulator's addresses and its close. */
export async function listenEmulator(
  server: Server,
  wss: WebSocketServer,
  host: string,
  port: number,
  beforeClose: () => void
): Promise<Listening> {
  await new Promise<void>((resolve, reject) => {
    // A port another process holds: the gateway's own message (errors.ts), which the CLI prints before exit 1.
    const failed = (err: NodeJS.ErrnoException): void => reject(cannotListen(host, port, err.code ?? err.message))
    server.once('error', failed)
    server.listen({ port, host, backlog: 2048 }, () => {
      server.off('error', failed)
      resolve()
    })
  })
  const actual = (server.address() as AddressInfo).port
  const hostPart = host.includes(':') ? `[${host}]` : host
  let closing: Promise<void> | null = null
  return {
    port: actual,
    wsBase: `ws://${hostPart}:${actual}`,
    httpUrl: `http://${hostPart}:${actual}`,
    close: () => {
      closing ??= new Promise<void>(done => {
        beforeClose()
        wss.close()
        server.close(() => done())
        server.closeAllConnections()
      })
      return closing
    }
  }
}
