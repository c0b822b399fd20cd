import { connect, createServer, type Socket } from 'node:net'

type T = { teardown: (fn: () => unknown) => void }

export interface Gate {
  /** http://127.0.0.1:<port>: use it in place of the server's own URL. */
  url: string
  /** Connections made to the gate so far (held or relayed). */
  connections: () => number
  /** Let every held connection through, and every later one at once. */
  release: () => void
}

/**
 * A TCP relay in front of `target` (an http:// URL) that holds every connection, unread, until
 * `release()`: nothing sent through it reaches the server before the test says so. An ordering tool,
 * not a timer: "the gateway answered before the vendor got the request" holds by construction, on any
 * machine.
 */
export async function holdingGate(t: T, target: string): Promise<Gate> {
  const { hostname, port } = new URL(target)
  const held: Socket[] = []
  const sockets = new Set<Socket>()
  let open = false
  let count = 0
  const relay = (down: Socket): void => {
    const up = connect(Number(port), hostname)
    sockets.add(up)
    up.on('close', () => sockets.delete(up))
    up.on('error', () => down.destroy())
    down.on('error', () => up.destroy())
    down.pipe(up)
    up.pipe(down)
  }
  const server = createServer(down => {
    count++
    sockets.add(down)
    down.on('close', () => sockets.delete(down))
    down.on('error', () => {})
    // Not read until relayed: what the client sends waits in the socket.
    if (open) relay(down)
    else held.push(down)
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => {
    for (const s of sockets) s.destroy()
    await new Promise(resolve => server.close(resolve))
  })
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    connections: () => count,
    release: () => {
      open = true
      for (const down of held.splice(0)) if (!down.destroyed) relay(down)
    }
  }
}
