import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { CODES, GatewayError, logLevelOf } from '../../gateway/errors'

t.test('the error catalogue is pinned', async t => {
  const codes = Object.keys(CODES)
  t.equal(
    codes.length,
    39,
    'adding or removing a code is a contract change: update this count (and `npm run docs` writes the failure table)'
  )
  const flags = codes.map(c => CODES[c as keyof typeof CODES].flag)
  t.equal(new Set(flags).size, flags.length, 'every flag is unique')
  for (const c of codes) {
    const row = CODES[c as keyof typeof CODES]
    t.ok(row.status >= 400 && row.status < 600, `${c} has an HTTP error status`)
    t.ok(row.close >= 1000 && row.close < 5000, `${c} has a WebSocket close code`)
  }
})

t.test('every code appears in the failure table (docs/reference/errors.md)', async t => {
  const page = readFileSync(join(__dirname, '..', '..', 'docs', 'reference', 'errors.md'), 'utf8')
  for (const c of Object.keys(CODES)) t.match(page, new RegExp(`\\| \`${c}\` \\|`), `${c} is documented`)
})

t.test('errors carry pointers, never values, and log at the right level', async t => {
  const e = new GatewayError('MESSAGE_INVALID', { pointers: ['/a/b'] })
  t.same(e.pointers, ['/a/b'])
  t.equal(e.message, CODES.MESSAGE_INVALID.text)
  t.equal(logLevelOf('AUTH_INVALID'), 'info')
  t.equal(logLevelOf('UPSTREAM_CLOSED'), 'error')
})
