import t from 'tap'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { runCli } from '../helpers/cli'

// Issue 30 item 7, through the command line as it ships: the vendor emulator's port clash says what the
// gateway's does (README), and `check` refuses a secret with an inline default, where it is.

t.test('vendor on a port another process holds: the gateway’s "cannot listen" message and exit 1', async t => {
  const taken = createServer()
  await new Promise<void>(resolve => taken.listen(0, '127.0.0.1', () => resolve()))
  t.teardown(() => taken.close())
  const port = (taken.address() as { port: number }).port
  const r = await runCli(['vendor', '--kind', 'json-events', '--port', String(port)])
  t.equal(r.code, 1)
  t.equal(r.stderr.trim(), `assist-gateway: cannot listen on 127.0.0.1:${port} (in use by another process)`)
  t.notMatch(r.stderr, /EADDRINUSE|\n\s+at /, 'no raw error, no stack')
})

t.test('check refuses ${VAR:-inline} in a secret field with file:line:col, set or not; exit 2', async t => {
  const dir = t.testdir({
    'gateway.yaml': [
      'routes:',
      '  demo:',
      '    mapping: mappings/json-events.yaml',
      '    auth: { audio: ["${DEMO_AUDIO_TOKEN}"] }',
      '    upstreams:',
      '      - { name: a, audio: "ws://127.0.0.1:9/x", credential: "${VENDOR_KEY:-inline-secret-0123}" }',
      ''
    ].join('\n')
  })
  const file = join(dir, 'gateway.yaml')
  for (const env of [{}, { VENDOR_KEY: 'from-the-environment' }] as Record<string, string>[]) {
    const r = await runCli(['check', '--config', file], { DEMO_AUDIO_TOKEN: 'audio-token-0123', ...env })
    t.equal(r.code, 2, `exit 2 (${Object.keys(env).join(', ') || 'VENDOR_KEY unset'})`)
    t.match(
      r.stderr,
      `${file}:6:49: /routes/demo/upstreams/0/credential: a secret must not have an inline default`,
      'file:line:col: /pointer: message'
    )
    t.notMatch(r.stderr + r.stdout, /inline-secret-0123|from-the-environment/, 'and never prints the value')
  }
})
