import t from 'tap'
import { join } from 'node:path'
import { runCli } from '../helpers/cli'

// `check` is run through the real command line, as an operator would (the built CLI, bin/assist-gateway.js).
async function check(
  args: string[],
  env: Record<string, string> = {}
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const r = await runCli(['check', ...args], env)
  return { status: r.code, stdout: r.stdout, stderr: r.stderr }
}

t.test('check accepts the shipped default config and its mapping', async t => {
  const r = await check(['--config', join(__dirname, '..', '..', 'ops', 'gateway.yaml')])
  t.equal(r.status, 0, r.stderr)
  t.match(r.stdout, /^ok: /m)
})

t.test('check reports a broken config with file and JSON pointer and exits non-zero', async t => {
  const dir = t.testdir({
    'gateway.yaml': [
      'listen: { port: 70000 }',
      'uws: { idleTimeoutSeconds: 5 }',
      'routes:',
      '  demo:',
      '    mapping: mappings/json-events.yaml',
      '    auth: { audio: ["inline-secret"] }',
      '    upstreams:',
      '      - { name: a, audio: "http://wrong-scheme" }',
      '      - { name: b }'
    ].join('\n')
  })
  const file = join(dir, 'gateway.yaml')
  const r = await check(['--config', file])
  t.equal(r.status, 2, 'a config problem exits 2')
  t.match(r.stderr, `${file}: /listen/port: `)
  t.match(r.stderr, `${file}: /uws/idleTimeoutSeconds: `)
  t.match(r.stderr, `${file}: /routes/demo/upstreams/0/audio: `)
  t.match(r.stderr, `${file}: /routes/demo/upstreams/1: `)
})

t.test('check refuses an inline secret and names an unset variable', async t => {
  const dir = t.testdir({
    'gateway.yaml': [
      'routes:',
      '  demo:',
      '    mapping: mappings/json-events.yaml',
      '    auth: { audio: ["inline-secret"], text: ["${NOT_SET_ANYWHERE_TOKEN}"] }',
      '    upstreams: [{ name: a, audio: "ws://127.0.0.1:1/x" }]'
    ].join('\n')
  })
  const file = join(dir, 'gateway.yaml')
  const r = await check(['--config', file])
  t.equal(r.status, 2, 'a config problem exits 2')
  t.match(
    r.stderr,
    `${file}: /routes/demo/auth/text/0: must NOT have fewer than 1 characters (environment variable NOT_SET_ANYWHERE_TOKEN is not set)`
  )
  const r2 = await check(['--config', file], { NOT_SET_ANYWHERE_TOKEN: 'x-1234' })
  t.match(r2.stderr, `${file}: /routes/demo/auth/audio/0: secrets must be written as \${VAR} references, not inline`)
  t.notMatch(r2.stderr + r2.stdout, 'x-1234', 'a secret value is never printed')
})

t.test('check reports a broken mapping with file and pointer and exits non-zero', async t => {
  const dir = t.testdir({
    'bad.yaml': [
      'vendor: bad-vendor',
      'audio:',
      '  open: "{ \\"event\\": "',
      '  frames: { framing: carrier-pigeon }',
      '  results:',
      '    - when: msg.event = "x"'
    ].join('\n'),
    'emits.yaml': [
      'vendor: emits-wrong',
      'audio:',
      '  open: \'{"event": "start"}\'',
      '  results:',
      '    - when: msg.event = "transcript"',
      '      emit: \'{"command": "SHOUT", "text": msg.text}\'',
      'samples:',
      '  audio:',
      '    - { event: transcript, text: hi }'
    ].join('\n'),
    'syntax.yaml': ['vendor: syntax', 'audio:', '  open: \'{"event": \'', '  close: "$notAFunction("'].join('\n'),
    'gateway.yaml': [
      'routes:',
      '  a: { mapping: bad.yaml, upstreams: [{ name: a, audio: "ws://127.0.0.1:1/x" }] }',
      '  b: { mapping: emits.yaml, upstreams: [{ name: a, audio: "ws://127.0.0.1:1/x" }] }',
      '  c: { mapping: syntax.yaml, upstreams: [{ name: a, audio: "ws://127.0.0.1:1/x" }] }'
    ].join('\n')
  })
  const r = await check(['--config', join(dir, 'gateway.yaml')])
  t.equal(r.status, 2, 'a config problem exits 2')
  t.match(r.stderr, `${join(dir, 'bad.yaml')}: /audio/frames/framing: must be one of "binary"`)
  t.match(r.stderr, `${join(dir, 'bad.yaml')}: /audio/results/0/emit: is required`)
  t.match(
    r.stderr,
    new RegExp(
      `${join(dir, 'emits.yaml').replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: /audio/results/0/emit: must produce a PlatformWebSocketMessage .*; it produced \\{"command":"SHOUT","text":"hi"\\}`
    )
  )
  t.match(r.stderr, `${join(dir, 'syntax.yaml')}: /audio/open: JSONata`)
  t.match(r.stderr, `${join(dir, 'syntax.yaml')}: /audio/close: JSONata`)
})

t.test('check reports an unreadable config and a YAML syntax error', async t => {
  const dir = t.testdir({ 'broken.yaml': 'routes: [unclosed\n  - a: b: c\n' })
  const r = await check(['--config', join(dir, 'missing.yaml')])
  t.equal(r.status, 2, 'a config problem exits 2')
  t.match(r.stderr, `${join(dir, 'missing.yaml')}: /: cannot read file (ENOENT)`)
  const r2 = await check(['--config', join(dir, 'broken.yaml')])
  t.equal(r2.status, 2, 'a config problem exits 2')
  t.match(r2.stderr, `${join(dir, 'broken.yaml')}: /: YAML`)
})
