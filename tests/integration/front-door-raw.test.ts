import t from 'tap'
import { spawn } from 'node:child_process'
import { X509Certificate } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { connect as tlsConnect } from 'node:tls'
import { parse, stringify } from 'yaml'
import { validateAll } from '../../gateway/check'
import { initMessage } from '../../gateway/tools/simulate'
import { AUDIO_TOKEN, TEXT_TOKEN, platformLeg, routeTo, startVendor, until } from '../helpers/gateway'
import { selfSignedPair } from '../helpers/openssl'
import { startTlsGateway, throwawayCert, utterance, type TlsGateway } from '../helpers/tls'

// Each front-door case of issue 11 over a raw socket (TLS, as in production), against one gateway and a real
// vendor emulator that counts what reaches it. What uWebSockets.js does before any gateway code runs is
// pinned as it is (closed at once, or held until its idle timeout), with no vendor request and the process
// serving on.

const CIPHERS = 'ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-CHACHA20-POLY1305'

interface Raw {
  text: () => string
  closed: Promise<void>
  isClosed: () => boolean
  destroy: () => void
}

/** One connection that writes `bytes` in one write and records every byte until the server closes it. */
function raw(gw: TlsGateway, bytes: string): Raw {
  let text = ''
  let closed = false
  const s = tlsConnect({ host: '127.0.0.1', port: gw.port, ca: gw.ca, servername: 'localhost' }, () => s.write(bytes))
  s.on('data', d => {
    text += String(d)
  })
  s.on('error', () => {})
  const done = new Promise<void>(resolve =>
    s.on('close', () => {
      closed = true
      resolve()
    })
  )
  return { text: () => text, closed: done, isClosed: () => closed, destroy: () => s.destroy() }
}

/** Send, wait for the server to close, and return what it wrote. */
async function exchange(gw: TlsGateway, bytes: string): Promise<string> {
  const r = raw(gw, bytes)
  await r.closed
  return r.text()
}

const statuses = (text: string): number[] => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map(m => Number(m[1]))

const BODY = JSON.stringify(utterance())
const head = (lines: string[]): string => `${lines.join('\r\n')}\r\n\r\n`
const textPost = (extra: string[] = [], body = BODY, path = '/text/demo'): string =>
  head([
    `POST ${path} HTTP/1.1`,
    'Host: localhost',
    'Content-Type: application/json',
    `Authorization: ${TEXT_TOKEN}`,
    `Content-Length: ${Buffer.byteLength(body)}`,
    ...extra
  ]) + body
const upgrade = (lines: string[]): string => head(['GET /audio/demo HTTP/1.1', 'Host: localhost', ...lines])
const KEY = 'dGhlIHNhbXBsZSBub25jZQ=='

async function refusals(gw: TlsGateway, reason: string): Promise<number> {
  const m = await (await fetch(gw.adminUrl('/metrics'))).text()
  const hit = new RegExp(`assist_gateway_front_door_refusals_total\\{reason="${reason}"\\} (\\d+)`).exec(m)
  return hit === null ? 0 : Number(hit[1])
}

t.test('the front door, case by case, over raw sockets', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startTlsGateway(
    t,
    { text: { maxBodyBytes: 1024 }, routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } },
    {},
    { tls: { ciphers: CIPHERS } }
  )
  const vendorSaw = (): number => vendor.textRequests().length

  // Held by uWS: its parser takes only `HTTP/1.1` request lines and a request with at least one header, and
  // waits for more bytes (up to 4 KiB) until its 10 s idle timeout.
  const hold = (): Raw[] => [
    raw(gw, head(['GET /readyz HTTP/1.0', 'Host: localhost'])),
    raw(gw, head(['GET /readyz HTTP/1.0'])),
    raw(gw, head(['GET /readyz HTTP/1.1']))
  ]
  let held = hold()
  // "Closed at once" below: closed while three held connections, opened at the check before, still wait for
  // the idle timeout. Each check opens the next three, so the window is one exchange however slow the machine.
  const renew = (): void => {
    for (const h of held) h.destroy()
    held = hold()
  }
  const heldOpen = (): boolean => {
    const open = held.every(h => !h.isClosed())
    renew()
    return open
  }

  await t.test('pipelined requests: refused without reaching the vendor, or answered in order', async t => {
    const three = await exchange(gw, textPost() + textPost() + textPost())
    t.equal(three, '', 'three valid POSTs in one write: the connection is closed without an answer')
    t.equal(await refusals(gw, 'aborted_before_dispatch'), 1, 'the first, aborted by uWS, was dropped before dispatch')
    t.equal(vendorSaw(), 0, 'the vendor got none of them: a retry delivers each once')

    const ids = ['a1b2c3d4', 'e5f6a7b8', 'c9d0e1f2']
    const sync = raw(gw, ids.map(id => textPost([`X-Request-Id: ${id}`], BODY, '/text/nope')).join(''))
    t.ok(await until(() => statuses(sync.text()).length === 3), 'three pipelined requests answered at once...')
    t.same(
      [...sync.text().matchAll(/x-request-id: (\w+)/gi)].map(m => m[1]),
      ids,
      '...in order'
    )
    t.same(statuses(sync.text()), [404, 404, 404])
    sync.destroy()

    const one = raw(gw, textPost())
    t.ok(await until(() => statuses(one.text()).length === 1), 'a lone POST is answered')
    t.same(statuses(one.text()), [200])
    t.equal(vendorSaw(), 1, 'and reaches the vendor once')
    one.destroy()
  })

  await t.test('content-length and host', async t => {
    for (const cl of ['-1', 'abc', '12345678901234567890']) {
      const before = await refusals(gw, 'content_length')
      const got = await exchange(gw, head(['POST /text/demo HTTP/1.1', 'Host: localhost', `Content-Length: ${cl}`]))
      t.equal(got, '', `content-length ${cl}: closed by uWS, no status (its parser fails after the handler)`)
      t.ok(heldOpen(), 'at once')
      t.equal(await refusals(gw, 'content_length'), before + 1, `content-length ${cl}: seen and counted`)
    }
    for (const [cls, what] of [
      [['3', '2'], 'two different'],
      [['2', '2'], 'two equal']
    ] as const) {
      const got = await exchange(
        gw,
        textPost([`Content-Length: ${cls[0]}`, `Content-Length: ${cls[1]}`], '{}').replace(
          /Content-Length: \d+\r\n/,
          ''
        )
      )
      t.same(statuses(got), [400], `${what} content-lengths: 400, then closed`)
      t.ok(heldOpen(), 'at once')
      t.match(got, /\r\nconnection: close\r\n/i)
      t.match(got, /"code":"BAD_REQUEST"/)
    }
    const hosts = await exchange(gw, textPost(['Host: elsewhere']))
    t.same(statuses(hosts), [400], 'two host fields: 400, then closed')
    t.match(hosts, /more than one host/)
    t.equal(await exchange(gw, head(['POST /text/demo HTTP/1.1', 'Content-Length: 0'])), '', 'no host: closed by uWS')
    t.equal(
      await exchange(gw, head(['FOO /text/demo HTTP/1.1', 'Host: localhost'])),
      '',
      'unknown method: closed by uWS'
    )
    t.ok(heldOpen(), 'both at once')
    t.equal(vendorSaw(), 1, 'none of these reached the vendor')
  })

  await t.test('connection: close, and the connection after a 413', async t => {
    const closing = await exchange(gw, textPost(['Connection: close']))
    t.same(statuses(closing), [200], 'connection: close is honoured: answered...')
    t.ok(heldOpen(), '...and closed by the server at once (before its idle timeout closes the held ones)')
    const nf = await exchange(gw, head(['GET /nope HTTP/1.1', 'Host: localhost', 'Connection: close']))
    t.same(statuses(nf), [404], 'on the catch-all too')
    t.ok(heldOpen())
    const get = await exchange(gw, head(['GET /text/demo HTTP/1.1', 'Host: localhost', 'Connection: close']))
    t.same(statuses(get), [405], 'and on a text path with the wrong method')
    t.ok(heldOpen())
    // A request pipelined behind one that closes: uWS would serve it; the closing answer waits for the end
    // of the parse pass, so uWS sees the pipelining and closes the connection with neither served.
    for (const first of [
      head(['GET /nope HTTP/1.1', 'Host: localhost', 'Connection: close']),
      textPost(['Connection: close'])
    ])
      t.same(statuses(await exchange(gw, first + textPost())), [], 'nothing is served behind a connection: close')

    const big = JSON.stringify(utterance({ messageBody: 'x'.repeat(2000) }))
    const tooLarge = await exchange(gw, textPost([], big))
    t.same(statuses(tooLarge), [413], 'a body a little over the limit: read, 413, then closed by the server')
    t.ok(heldOpen(), 'at once')
    t.match(tooLarge, /\r\nconnection: close\r\n/i)
    t.same(statuses(await exchange(gw, textPost([], big) + textPost())), [], 'and nothing is served behind it')
    t.equal(vendorSaw(), 2, 'only the one request answered 200 reached the vendor')
  })

  await t.test('RFC 6455 upgrades', async t => {
    const base = ['Upgrade: websocket', 'Connection: Upgrade', 'Sec-WebSocket-Version: 13', `Sec-WebSocket-Key: ${KEY}`]
    const cases: [string, string[], number, string][] = [
      ['no upgrade header', base.slice(1), 400, 'upgrade must name websocket'],
      ['upgrade: h2c', ['Upgrade: h2c', ...base.slice(1)], 400, 'upgrade must name websocket'],
      ['no connection header', [base[0], ...base.slice(2)], 400, 'connection must name upgrade'],
      [
        'version 8',
        [...base.slice(0, 2), 'Sec-WebSocket-Version: 8', base[3]],
        426,
        'sec-websocket-version must be 13'
      ],
      ['a key that is not base64', [...base.slice(0, 3), 'Sec-WebSocket-Key: !!!!!!!!!!!!!!!!!!!!!!!!'], 400, 'base64'],
      ['a key of 15 bytes', [...base.slice(0, 3), 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25j'], 400, 'base64'],
      ['no key', base.slice(0, 3), 400, 'base64'],
      ['a plain GET', [], 400, 'upgrade must name websocket']
    ]
    for (const [what, lines, status, detail] of cases) {
      const got = await exchange(gw, upgrade(lines))
      t.same(statuses(got), [status], `${what}: ${status}, then closed`)
      t.ok(heldOpen(), 'at once')
      t.match(got, detail)
      if (status === 426) t.match(got, /\r\nsec-websocket-version: 13\r\n/i)
    }
    t.equal(await refusals(gw, 'upgrade'), 4)
    t.equal(await refusals(gw, 'upgrade_version'), 1)
    t.equal(
      await refusals(gw, 'upgrade_key'),
      3,
      'each bad key, whether uWS ran the upgrade handler (24 characters) or not'
    )
    const ok = raw(gw, upgrade(base))
    t.ok(await until(() => /\r\n\r\n/.test(ok.text())), 'a valid upgrade...')
    t.same(statuses(ok.text()), [101], '...is accepted')
    ok.destroy()
  })

  await t.test('TLS: 1.0 and 1.1 refused, the configured ciphers only, a new certificate needs a restart', async t => {
    const sClient = (args: string[]): Promise<string> =>
      new Promise(resolve => {
        const p = spawn('openssl', ['s_client', '-connect', `127.0.0.1:${gw.port}`, ...args])
        let out = ''
        p.stdout.on('data', d => (out += String(d)))
        p.stderr.on('data', d => (out += String(d)))
        p.on('close', () => resolve(out))
        p.stdin.end()
      })
    // SECLEVEL=0: the client really offers the old versions (OpenSSL 3 would not otherwise).
    for (const v of ['-tls1', '-tls1_1']) {
      const out = await sClient([v, '-cipher', 'DEFAULT@SECLEVEL=0'])
      t.match(out, /alert protocol version/, `${v}: the server refuses the version`)
      t.match(out, /Cipher is \(NONE\)/)
    }
    const excluded = await sClient(['-tls1_2', '-cipher', 'ECDHE-RSA-AES128-GCM-SHA256'])
    t.match(excluded, /handshake failure/, 'TLS 1.2 offering only a cipher outside listen.tls.ciphers: refused')
    const allowed = await sClient(['-tls1_2', '-cipher', 'ECDHE-RSA-AES256-GCM-SHA384'])
    t.match(allowed, /Cipher is ECDHE-RSA-AES256-GCM-SHA384/, 'one inside it: accepted')
    const tls13 = await sClient(['-tls1_3'])
    t.match(tls13, /New, TLSv1\.3/, 'TLS 1.3 (its fixed suites) is served')

    // This uWS build cannot replace the default certificate of a listening SSLApp (addServerName only adds
    // SNI names): a reload reports the change as needing a restart, and the live leg and the old certificate stay.
    const leg = platformLeg(
      t,
      gw.url('/audio/demo'),
      initMessage({ token: AUDIO_TOKEN, contactId: 7, busNo: 8, perspective: 'RX' })
    )
    t.equal((await leg.answer).command, 'CONNECTED')
    const fresh = selfSignedPair(t.testdir(), 'new')
    writeFileSync(gw.caFile, readFileSync(fresh.cert))
    writeFileSync(join(dirname(gw.caFile), 'key.pem'), readFileSync(fresh.key))
    const certReload = await gw.reload()
    t.match(certReload, { ok: true, restartRequired: ['listen.tls (certificate or key file)'] })
    const cfg = parse(readFileSync(gw.configFile, 'utf8')) as { listen: { tls: { ciphers: string } } }
    cfg.listen.tls.ciphers = 'ECDHE-RSA-AES128-GCM-SHA256'
    writeFileSync(gw.configFile, stringify(cfg))
    t.match(await gw.reload(), { ok: true, restartRequired: ['listen'] }, 'a cipher change too')
    const served = await new Promise<string>(resolve => {
      const s = tlsConnect({ host: '127.0.0.1', port: gw.port, rejectUnauthorized: false }, () => {
        resolve(s.getPeerCertificate().fingerprint256)
        s.destroy()
      })
    })
    t.equal(served, new X509Certificate(gw.ca).fingerprint256, 'the certificate served is still the one started with')
    t.equal(leg.ws.readyState, leg.ws.OPEN, 'the live leg was not touched')
    leg.ws.close()
  })

  await t.test(
    'what uWS holds: answered with nothing, closed at its idle timeout; others served meanwhile',
    async t => {
      renew() // three this case holds to their idle timeout, opened now
      const served = raw(gw, head(['GET /readyz HTTP/1.1', 'Host: localhost']))
      t.ok(await until(() => statuses(served.text()).length === 1))
      t.same(statuses(served.text()), [200], 'a request on another connection is served while those are held')
      served.destroy()
      t.ok(
        held.every(h => !h.isClosed() && h.text() === ''),
        'HTTP/1.0 (with or without host) and a request with no header: no answer, still open'
      )
      const big = await exchange(gw, head(['GET /readyz HTTP/1.0', 'Host: localhost', `X-Pad: ${'a'.repeat(5000)}`]))
      t.equal(big, '', 'past 4 KiB of an unparsable head: closed...')
      t.ok(heldOpen(), '...at once')
      // uWS's HTTP idle timeout is 10 s (compiled in); these close then, with no status.
      await Promise.all(held.map(h => h.closed))
      t.ok(
        held.every(h => h.text() === ''),
        'closed by the server with no status'
      )
      t.equal(vendorSaw(), 2, 'the vendor saw nothing more')
    }
  )
})

t.test('check refuses a cipher list the TLS library cannot use, with its pointer', async t => {
  const c = throwawayCert(t)
  const dir = join(c.cert, '..')
  const write = (ciphers: string): string => {
    const file = join(dir, `gateway-${ciphers.length}.yaml`)
    writeFileSync(
      file,
      `listen: { host: 127.0.0.1, port: 0, tls: { cert: ${c.cert}, key: ${c.key}, ciphers: "${ciphers}" } }\n` +
        'routes:\n  a: { mapping: mappings/passthrough.yaml, upstreams: [{ name: a, audio: "ws://127.0.0.1:1/x" }] }\n'
    )
    return file
  }
  const tls13 = await validateAll(write('TLS_AES_128_GCM_SHA256'), {})
  t.equal(tls13.ok, false, 'a TLS 1.3 suite name (fixed in BoringSSL, accepted by Node) is refused')
  if (!tls13.ok) t.match(tls13.problems, [{ pointer: '/listen/tls/ciphers', message: /BoringSSL/ }])
  const syntax = await validateAll(write('AES 256'), {})
  t.equal(syntax.ok, false, 'a space is refused by the schema')
  if (!syntax.ok) t.match(syntax.problems, [{ pointer: '/listen/tls/ciphers' }])
  t.equal((await validateAll(write(CIPHERS), {})).ok, true, 'a usable list passes')
})
