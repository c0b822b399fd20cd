import t from 'tap'
import { scrubberFor } from '../../../gateway/telemetry/scrub'

t.test('one scrubber per secrets list; none when there are no secrets', async t => {
  const secrets = Object.freeze(['alpha-secret-1'])
  t.equal(scrubberFor(secrets), scrubberFor(secrets), 'compiled once, shared')
  const none = scrubberFor([])
  t.equal(none.active, false)
  const s = 'text alpha-secret-1'
  t.equal(none.json(s), s)
})

t.test('JSON answers: unchanged without a secret, valid JSON with every form of one scrubbed', async t => {
  const quoted = 'q"uo\\te/secret'
  const sc = scrubberFor(['plain-secret-99', quoted, 'a+b c&d'])
  const clean = '{"command":"MESSAGE","message":"nothing here"}'
  t.equal(sc.json(clean), clean, 'the same string when nothing matches')
  const inner = JSON.stringify({ token: quoted })
  const frame = JSON.stringify({
    message: `key plain-secret-99 and ${quoted}`,
    parameters: { echo: inner, url: `/x?k=${encodeURIComponent('a+b c&d')}`, [quoted]: 1 }
  })
  const out = sc.json(frame)
  const parsed = JSON.parse(out) as { message: string; parameters: Record<string, unknown> }
  t.equal(parsed.message, 'key [REDACTED] and [REDACTED]')
  t.same(JSON.parse(parsed.parameters.echo as string), { token: '[REDACTED]' }, 'JSON text inside a string')
  t.equal(parsed.parameters.url, '/x?k=[REDACTED]', 'URL-encoded')
  t.ok('[REDACTED]' in parsed.parameters, 'keys too')
  t.notMatch(out, /plain-secret-99|uo\\\\te/)
})

t.test('text (log lines): every form replaced', async t => {
  const sc = scrubberFor(['line-secret-7'])
  t.equal(sc.text('a line-secret-7 b line-secret-7'), 'a [REDACTED] b [REDACTED]')
})

t.test('a secret the caller sent itself is left as it is: the answer never confirms a guess', async t => {
  const sc = scrubberFor(['vendor-key-0123', 'other-caller-credential'])
  const echo = JSON.stringify({ message: 'you said vendor-key-0123 and other-caller-credential' })
  const sent = 'an init message that holds the guess other-caller-credential'
  const out = JSON.parse(sc.json(echo, secret => sent.includes(secret))) as { message: string }
  t.equal(
    out.message,
    'you said [REDACTED] and other-caller-credential',
    'the guess comes back as sent, scrubbed or not'
  )
  t.equal(
    sc.text('x vendor-key-0123', s => s === 'vendor-key-0123'),
    'x vendor-key-0123'
  )
  t.equal(sc.text('x vendor-key-0123'), 'x [REDACTED]', 'nothing kept by default')
})
