import t from 'tap'
import { join } from 'node:path'
import { EMITS_WRONG_MAPPING, runCli } from '../helpers/cli'

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

t.test('check reports a broken config as file:line:col: /pointer: message and exits non-zero', async t => {
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
  t.match(r.stderr, `${file}:1:11: /listen/port: `)
  t.match(r.stderr, `${file}:2:8: /uws/idleTimeoutSeconds: `)
  t.match(r.stderr, `${file}:8:20: /routes/demo/upstreams/0/audio: `)
  t.match(r.stderr, `${file}:9:9: /routes/demo/upstreams/1/audio: is required`)
  for (const line of r.stderr.trim().split('\n'))
    t.match(line, /^\/\S+:\d+:\d+: \/\S*: \S/, 'every problem line is file:line:col: /pointer: message')
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
    `${file}:4:46: /routes/demo/auth/text/0: must NOT have fewer than 1 characters (environment variable NOT_SET_ANYWHERE_TOKEN is not set)`
  )
  const r2 = await check(['--config', file], { NOT_SET_ANYWHERE_TOKEN: 'x-1234' })
  t.match(
    r2.stderr,
    `${file}:4:21: /routes/demo/auth/audio/0: secrets must be written as \${VAR} references, not inline`
  )
  t.notMatch(r2.stderr + r2.stdout, 'x-1234', 'a secret value is never printed')
})

t.test(
  'check reports a broken mapping with file, line, column and pointer, JSONata errors where the expression is wrong',
  async t => {
    const dir = t.testdir({
      'bad.yaml': [
        'vendor: bad-vendor',
        'audio:',
        '  open: "{ \\"event\\": "',
        '  frames: { framing: carrier-pigeon }',
        '  results:',
        '    - when: msg.event = "x"',
        '  time: { none: a test mapping }'
      ].join('\n'),
      'emits.yaml': EMITS_WRONG_MAPPING,
      'syntax.yaml': [
        'vendor: syntax',
        'audio:',
        '  open: \'{"event": \'',
        '  close: "$notAFunction("',
        '  results:',
        '    - when: |',
        '        msg.type = "x" and',
        '          msg.a.b.c ]',
        '      emit: >-',
        '        { "command": "MESSAGE",',
        '          "text": msg.text + + }',
        '  time: { none: a test mapping }'
      ].join('\n'),
      'gateway.yaml': [
        'routes:',
        '  a: { mapping: bad.yaml, upstreams: [{ name: a, audio: "ws://127.0.0.1:1/x" }] }',
        '  b: { mapping: emits.yaml, upstreams: [{ name: a, audio: "ws://127.0.0.1:1/x" }] }',
        '  c: { mapping: syntax.yaml, upstreams: [{ name: a, audio: "ws://127.0.0.1:1/x" }] }'
      ].join('\n')
    })
    const r = await check(['--config', join(dir, 'gateway.yaml')])
    t.equal(r.status, 2, 'a config problem exits 2')
    t.match(r.stderr, `${join(dir, 'bad.yaml')}:4:13: /audio/frames/framing: must be one of "binary"`)
    t.match(r.stderr, `${join(dir, 'bad.yaml')}:6:7: /audio/results/0/emit: is required`)
    t.match(
      r.stderr,
      new RegExp(
        `${join(dir, 'emits.yaml').replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}:6:7: /audio/results/0/emit: must produce a PlatformWebSocketMessage .*; it produced \\{"command":"SHOUT","text":"hi"\\}`
      )
    )
    // The end of an unfinished expression: just past its last character, on its own line of the file.
    t.match(
      r.stderr,
      `${join(dir, 'syntax.yaml')}:3:20: /audio/open: JSONata S0203: Expected "}" before end of expression`
    )
    t.match(r.stderr, `${join(dir, 'syntax.yaml')}:4:25: /audio/close: JSONata S0203: Expected ")"`)
    // Inside block scalars: the offending token's own line and column, not an offset in the expression.
    t.match(r.stderr, `${join(dir, 'syntax.yaml')}:8:21: /audio/results/0/when: JSONata S0201: Syntax error: "]"`)
    t.match(r.stderr, `${join(dir, 'syntax.yaml')}:11:30: /audio/results/0/emit: JSONata S0211: The symbol "+"`)
  }
)

t.test('check reports an unreadable config and a YAML syntax error', async t => {
  const dir = t.testdir({ 'broken.yaml': 'routes: [unclosed\n  - a: b: c\n' })
  const r = await check(['--config', join(dir, 'missing.yaml')])
  t.equal(r.status, 2, 'a config problem exits 2')
  t.match(r.stderr, `${join(dir, 'missing.yaml')}: /: cannot read file (ENOENT)`, 'no line in a file that is not there')
  const r2 = await check(['--config', join(dir, 'broken.yaml')])
  t.equal(r2.status, 2, 'a config problem exits 2')
  t.match(
    r2.stderr,
    new RegExp(`${join(dir, 'broken.yaml').replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}:\\d+:\\d+: /: YAML \\w+: `)
  )
})

t.test('an unclosed ${ is refused, not taken as text (a fleet would run alone on local state)', async t => {
  const dir = t.testdir({
    'gateway.yaml': [
      'redis: ${REDIS_URL',
      'routes:',
      '  demo:',
      '    mapping: mappings/json-events.yaml',
      '    auth: { audio: ["${TOK}"] }',
      '    upstreams: [{ name: a, audio: "ws://127.0.0.1:1/${PATH_PART" }]'
    ].join('\n')
  })
  const file = join(dir, 'gateway.yaml')
  const r = await check(['--config', file], { TOK: 'abcd-token', REDIS_URL: 'redis://127.0.0.1:6379' })
  t.equal(r.status, 2, 'refused, although REDIS_URL is set')
  t.match(
    r.stderr,
    `${file}:1:1: /redis: a \`\${\` that is not a complete reference: write \${NAME} or \${NAME:-default}`
  )
  t.match(r.stderr, `${file}:6:28: /routes/demo/upstreams/0/audio: a \`\${\``)
  t.notMatch(r.stderr, 'redis://127.0.0.1:6379', 'the environment value is not printed')
})
