import t from 'tap'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { validateAll } from '../../../gateway/check'
import { transcribeConfig } from '../../helpers/vendors'

// Every sample config in examples/vendors/ passes `check` (schema, mappings compiled, dry-run on the
// interface's example messages and the mapping's samples) with its variables set, and names what it needs.

const DIR = join(__dirname, '..', '..', '..', 'examples', 'vendors')
const ENV = {
  PLATFORM_AUDIO_TOKEN: 'platform-audio-token',
  PLATFORM_TEXT_TOKEN: 'platform-text-token',
  AWS_ACCESS_KEY_ID: 'AKIAEXAMPLE000000000',
  AWS_SECRET_ACCESS_KEY: 'example-secret',
  SPEECHMATICS_API_KEY: 'example-key',
  OPENAI_API_KEY: 'sk-example'
}

t.test('every sample vendor config is check-clean', async t => {
  const files = readdirSync(DIR).filter(f => f.endsWith('.yaml'))
  t.ok(files.length >= 1)
  for (const f of files) {
    const v = await validateAll(join(DIR, f), ENV)
    t.same(v.ok ? [] : v.problems, [], `${f}: no problem`)
    t.ok(v.ok, `${f}: check passes`)
  }
})

t.test('a signing mapping on a replica without signing keys is a check problem', async t => {
  const dir = t.testdir({
    'gw.yaml': transcribeConfig(
      '{ name: a, audio: "wss://transcribestreaming.us-east-1.amazonaws.com:8443/stream-transcription-websocket" }',
      '    params: { region: us-east-1 }'
    )
  })
  const v = await validateAll(join(dir, 'gw.yaml'), {})
  t.match(v.ok ? [] : v.problems, [{ pointer: '/audio/sign', message: /replica a has no signing keys/ }])
})
