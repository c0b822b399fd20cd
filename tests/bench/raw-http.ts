/**
 * The cheapest HTTP/1.1 client Node can run, for the text floor only (`text --floor`, mode `raw`): a
 * fixed set of keep-alive `net` sockets, one request in flight on each, the request written as one
 * buffer, the answer read up to its Content-Length. It knows nothing of chunked answers, `connection:
 * close`, 1xx, timeouts, errors mid-answer, TLS or retries: it measures what a hand-written client could
 * at best save over undici, not something the gateway could ship.
 */
import { connect, type Socket } from 'node:net'

type Done = (status: number, body: Buffer | null) => void

const HEAD_END = Buffer.from('\r\n\r\n')

class RawConn {
  private buf: Buffer | null = null
  done: Done | null = null

  constructor(
    readonly sock: Socket,
    private readonly release: (c: RawConn) => void
  ) {
    sock.setNoDelay(true)
    sock.on('data', chunk => this.read(chunk))
    sock.on('error', () => this.fail())
    sock.on('close', () => this.fail())
  }

  private read(chunk: Buffer): void {
    const buf = this.buf === null ? chunk : Buffer.concat([this.buf, chunk])
    const end = buf.indexOf(HEAD_END)
    if (end < 0) {
      this.buf = buf
      return
    }
    const head = buf.toString('latin1', 0, end)
    const m = /\r\ncontent-length:\s*(\d+)/i.exec(head)
    const len = m === null ? 0 : Number(m[1])
    if (buf.length < end + 4 + len) {
      this.buf = buf
      return
    }
    this.buf = null
    const done = this.done
    this.done = null
    this.release(this)
    done?.(Number(head.slice(9, 12)), buf.subarray(end + 4, end + 4 + len))
  }

  private fail(): void {
    const done = this.done
    this.done = null
    done?.(0, null)
  }
}

export class RawPool {
  private readonly idle: RawConn[] = []
  private readonly waiting: { req: Buffer; done: Done }[] = []
  private open = 0

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly max: number,
    private readonly path: string
  ) {}

  /** POST `body` as JSON; `done` gets the status and the answer's body (0 and null on a broken socket). */
  post(body: Buffer, done: Done): void {
    const req = Buffer.concat([
      Buffer.from(
        `POST ${this.path} HTTP/1.1\r\nhost: ${this.host}:${this.port}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`,
        'latin1'
      ),
      body
    ])
    const conn = this.idle.pop() ?? (this.open < this.max ? this.connect() : null)
    if (conn === null) this.waiting.push({ req, done })
    else this.send(conn, req, done)
  }

  private connect(): RawConn {
    this.open++
    return new RawConn(connect(this.port, this.host), c => this.idle.push(c))
  }

  private send(conn: RawConn, req: Buffer, done: Done): void {
    conn.done = (status, body) => {
      done(status, body)
      const next = this.waiting.shift()
      if (next !== undefined && this.idle.length > 0) this.send(this.idle.pop()!, next.req, next.done)
    }
    conn.sock.write(req)
  }
}
