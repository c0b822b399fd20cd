import { type ChildProcess, spawn } from 'node:child_process'
import type { Test } from 'tap'
import { until } from './gateway'

// A front end of a gRPC emulator as a process of its own: a TCP proxy to the emulator's port, so that two
// replicas of a route can be two front ends of one service (one emulator's state, as one region's
// conversations are the same whichever front end carries a call) and one of them can be SIGKILLed mid-call.
// The kernel then closes the gateway's connections to it (no GOAWAY, no status: the HTTP/2 connection just
// goes) and its connections to the emulator, whose streams end CANCELLED, as a service's streams do when
// the front end that carried them dies. Each connection it opens to the emulator is printed with its local
// port, so a test can tell which of the emulator's calls came through it (the call's peer).

const PROXY = `
const net = require('node:net')
const [host, port] = [process.argv[1], Number(process.argv[2])]
const server = net.createServer(client => {
  client.pause()
  const up = net.connect({ host, port }, () => {
    process.stdout.write('upstream ' + up.localPort + '\\n')
    client.pipe(up)
    up.pipe(client)
    client.resume()
  })
  const done = () => { client.destroy(); up.destroy() }
  for (const s of [client, up]) { s.on('error', done); s.on('close', done) }
})
server.listen(0, '127.0.0.1', () => process.stdout.write('front end on ' + server.address().port + '\\n'))
`

export interface FrontEnd {
  /** Its gRPC address (plaintext), for a replica's `audio` and `text`. */
  url: string
  child: ChildProcess
  /** The local ports of its connections to the emulator so far: a call whose peer has one came through it. */
  upstreamPorts: Set<number>
}

/** A front end (a TCP proxy process) to the emulator on 127.0.0.1:`port`; killed at teardown. */
export async function frontEnd(t: Test, port: number): Promise<FrontEnd> {
  const child = spawn(process.execPath, ['-e', PROXY, '127.0.0.1', String(port)], {
    stdio: ['ignore', 'pipe', 'inherit']
  })
  t.teardown(() => {
    child.kill('SIGKILL')
  })
  const upstreamPorts = new Set<number>()
  let own = 0
  let out = ''
  child.stdout.on('data', d => {
    out += String(d)
    for (;;) {
      const nl = out.indexOf('\n')
      if (nl < 0) break
      const line = out.slice(0, nl)
      out = out.slice(nl + 1)
      const m = /^(upstream|front end on) (\d+)$/.exec(line)
      if (m?.[1] === 'upstream') upstreamPorts.add(Number(m[2]))
      else if (m !== null) own = Number(m[2])
    }
  })
  t.ok(await until(() => own > 0, 20_000), 'the front end process is up')
  return { url: `grpc://127.0.0.1:${own}`, child, upstreamPorts }
}
