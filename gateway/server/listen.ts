import { createServer } from 'node:net'
import * as uWS from 'uWebSockets.js'
import { cannotListen } from '../errors'

/**
 * How a listener holds its port. uWebSockets.js binds with SO_REUSEPORT unless told otherwise, and Linux
 * then lets any process of the same user bind the same port beside it and splits new connections between
 * them: a second gateway started on a taken port would serve half the calls without a word. So every
 * listener is `exclusive` (a second bind fails, and that gateway does not start) except the public and
 * fleet listeners of the workers of one `serve --workers N`, which are `shared` among those workers;
 * their main process claims the port first (`claimPort`) and reserves it until they listen (`reservePort`).
 */
export type PortUse = 'exclusive' | 'shared'

/** uSockets' LIBUS_LISTEN_EXCLUSIVE_PORT: bind without SO_REUSEPORT (the build's types name it only in an enum it does not export). */
const EXCLUSIVE_PORT = 1

type ListenWithOptions = (
  host: string,
  port: number,
  options: number,
  cb: (socket: uWS.us_listen_socket | false) => void
) => void

/** Listen on host:port (0: an ephemeral port); rejects with a message naming the address when it cannot. */
export function listen(
  app: uWS.TemplatedApp,
  host: string,
  port: number,
  use: PortUse = 'exclusive'
): Promise<uWS.us_listen_socket> {
  // The build's types omit the (host, port, options, cb) form its native listen takes.
  const listenWith = app.listen.bind(app) as unknown as ListenWithOptions
  return new Promise((resolve, reject) => {
    listenWith(host, port, use === 'exclusive' ? EXCLUSIVE_PORT : 0, socket => {
      if (socket === false)
        reject(new Error(`cannot listen on ${host}:${port} (in use by another process, or not permitted)`))
      else resolve(socket)
    })
  })
}

/**
 * The main process of `serve --workers N`, before its workers share host:port: bind it alone (a plain
 * Node listener, no SO_REUSEPORT) and let it go, so a port another process holds, shared or not, stops the
 * start with a clear error instead of being joined. Port 0 picks a free one. Resolves with the port.
 */
export async function claimPort(host: string, port: number): Promise<number> {
  const s = createServer()
  await new Promise<void>((resolve, reject) => {
    s.once('error', (err: NodeJS.ErrnoException) => reject(cannotListen(host, port, err.code ?? err.message)))
    s.listen(port, host, () => resolve())
  })
  const bound = (s.address() as { port: number }).port
  await new Promise<void>(resolve => s.close(() => resolve()))
  return bound
}

/**
 * The main process of `serve --workers N`, from its claim of host:port until every worker listens there:
 * hold the port in the group the workers join (SO_REUSEPORT, same user), so nothing else on the machine
 * takes it in between. Workers take a second or two to start, and a port the claim picked (port 0) is an
 * ephemeral one, which any outgoing connection of the machine may be given meanwhile; the workers' binds
 * then failed. A connection that reaches the hold (none should: the instance is not listening yet) is
 * closed. Returns the release.
 */
export async function reservePort(host: string, port: number): Promise<() => void> {
  const app = uWS.App().any('/*', res => {
    res.close()
  })
  const socket = await listen(app, host, port, 'shared')
  let held = true
  return () => {
    if (held) uWS.us_listen_socket_close(socket)
    held = false
  }
}
