/**
 * The soak bench's TCP balancer, for machines without nginx: least connections, and a backend whose
 * connect fails is skipped for the next one (every backend is tried once per connection; none is ever
 * marked down, as nginx with `max_fails=0`). Bytes are piped both ways untouched, so WebSocket upgrades,
 * close frames and resets pass as they are. Run as its own process (fork, so it has its own core time):
 * env SOAK_LB_PORT (0: a free one) and SOAK_LB_BACKENDS (comma-separated 127.0.0.1 ports); it sends
 * {listening: port} over IPC and exits when its parent goes.
 */
import { connect, createServer, type Server, type Socket } from 'node:net'

export interface Balancer {
  server: Server
  port: number
  /** Connections open now per backend port. */
  active: Map<number, number>
}

export async function startBalancer(port: number, backends: number[]): Promise<Balancer> {
  const active = new Map(backends.map(b => [b, 0]))
  let turn = 0
  /** Backends by open connections, fewest first; ties in turn, so equal ones share new connections. */
  const order = (): number[] => {
    turn = (turn + 1) % backends.length
    const rotated = [...backends.slice(turn), ...backends.slice(0, turn)]
    return rotated.sort((a, b) => active.get(a)! - active.get(b)!)
  }
  const server = createServer({ noDelay: true, pauseOnConnect: true }, client => {
    client.on('error', () => client.destroy())
    const tries = order()
    const next = (): void => {
      const b = tries.shift()
      if (b === undefined || client.destroyed) return void client.destroy()
      const up: Socket = connect({ port: b, host: '127.0.0.1', noDelay: true })
      let connected = false
      up.once('connect', () => {
        connected = true
        active.set(b, active.get(b)! + 1)
        up.once('close', () => active.set(b, active.get(b)! - 1))
        client.pipe(up)
        up.pipe(client)
        client.once('close', () => up.destroy())
        up.once('close', () => client.destroy())
        client.resume()
      })
      up.on('error', () => {
        if (!connected) next()
        else up.destroy()
      })
    }
    next()
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen({ port, host: '127.0.0.1', backlog: 4096 }, () => resolve())
  })
  const addr = server.address()
  return { server, port: typeof addr === 'object' && addr !== null ? addr.port : port, active }
}

if (require.main === module) {
  const backends = (process.env.SOAK_LB_BACKENDS ?? '')
    .split(',')
    .filter(s => s !== '')
    .map(Number)
  startBalancer(Number(process.env.SOAK_LB_PORT ?? 0), backends).then(
    b => {
      process.once('disconnect', () => process.exit(0))
      process.send?.({ listening: b.port })
    },
    (err: unknown) => {
      process.send?.({ error: String(err) })
      process.exit(1)
    }
  )
}
