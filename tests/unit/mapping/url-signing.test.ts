import t from 'tap'
import { join } from 'node:path'
import { Sha256 } from '@aws-crypto/sha256-js'
import { SignatureV4 } from '@smithy/signature-v4'
import type { UpstreamConfig } from '../../../gateway/config/types'
import { loadConfig } from '../../../gateway/config/load'
import { loadMapping } from '../../../gateway/mapping/compile'
import { queryPairs } from '../../../gateway/mapping/sigv4'
import { vendorTarget } from '../../../gateway/mapping/vendor-target'
import type { MappingInput } from '../../../gateway/mapping/audio'
import { transcribeConfig } from '../../helpers/vendors'

// `audio.sign` as a feature of the mapping layer, on its own: the URL the mapping builds is presigned with
// the replica's `signing` keys from the gateway's config, and the AWS SDK's signer (the oracle) signs the
// same request to the same signature. Keys in the config must be ${VAR}s and are collected as secrets.

const ROOT = join(__dirname, '..', '..', '..')
const KEYS = {
  accessKeyId: 'AKIASIGNTEST00000001',
  secretAccessKey: 'sign/test+secret=key',
  sessionToken: 'FwoGZXIvYXdzE'
}

function input(params: Record<string, unknown>, audio: string): MappingInput {
  return {
    init: {},
    leg: { id: 'l', route: 'r', perspective: 'TX', contactId: '1', busNo: '2', requestId: null },
    route: { name: 'r', params, checksToken: false },
    upstream: { name: 'u', audio, credential: null, hasCredential: false },
    session: { id: '8f7b1e52-2b1d-4f0e-9d51-6a1c2f3e4d5a' }
  }
}

t.test('the mapping URL is presigned with the replica keys; the AWS SDK signer agrees on the signature', async t => {
  const mapping = loadMapping(join(ROOT, 'mappings', 'amazon-transcribe.yaml'))
  const upstream = {
    name: 'u',
    audio: 'wss://transcribestreaming.eu-central-1.amazonaws.com:8443/stream-transcription-websocket',
    headers: {},
    signing: KEYS
  } as unknown as UpstreamConfig
  const target = await vendorTarget(mapping.audio!, upstream, input({ 'language-code': 'de-DE' }, upstream.audio!))
  if (!target.ok) {
    t.fail(target.error)
    return
  }
  const url = new URL(target.url)
  const q = Object.fromEntries(queryPairs(url.search))
  t.match(q, {
    'language-code': 'de-DE',
    'media-encoding': 'pcm',
    'sample-rate': '8000',
    'session-id': '8f7b1e52-2b1d-4f0e-9d51-6a1c2f3e4d5a',
    'X-Amz-Credential': /^AKIASIGNTEST00000001\/\d{8}\/eu-central-1\/transcribe\/aws4_request$/,
    'X-Amz-Security-Token': KEYS.sessionToken,
    'X-Amz-Expires': '300',
    'X-Amz-SignedHeaders': 'host'
  })
  const signedAt = q['X-Amz-Date'].replace(/^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/, '$1-$2-$3T$4:$5:$6Z')
  const { 'X-Amz-Signature': signature, ...unsigned } = q
  const sdk = await new SignatureV4({
    credentials: KEYS,
    region: 'eu-central-1',
    service: 'transcribe',
    sha256: Sha256
  }).presign(
    {
      method: 'GET',
      protocol: 'wss:',
      hostname: url.hostname,
      port: 8443,
      path: url.pathname,
      query: Object.fromEntries(Object.entries(unsigned).filter(([k]) => !k.startsWith('X-Amz-'))),
      headers: { host: url.host }
    },
    { expiresIn: 300, signingDate: new Date(signedAt) }
  )
  t.equal(signature, (sdk.query as Record<string, string>)['X-Amz-Signature'], 'the SDK computes the same signature')
  t.notMatch(target.url, KEYS.secretAccessKey, 'the secret key is not in the URL')
})

t.test('a replica without signing keys cannot be connected to: the mapping says why, without a key', async t => {
  const mapping = loadMapping(join(ROOT, 'mappings', 'amazon-transcribe.yaml'))
  const upstream = { name: 'u', audio: 'wss://transcribestreaming.us-east-1.amazonaws.com:8443/x', headers: {} }
  const target = await vendorTarget(mapping.audio!, upstream as unknown as UpstreamConfig, input({}, upstream.audio))
  t.match(target, { ok: false, stage: 'url', error: /replica u has no signing keys/ })
})

t.test('signing keys must be ${VAR}s in the config, and are secrets (redacted from logs)', async t => {
  const dir = t.testdir({
    'inline.yaml': transcribeConfig(
      '{ name: a, audio: "wss://h:8443/x", signing: { accessKeyId: AKIAINLINE, secretAccessKey: inline-secret } }'
    ),
    'vars.yaml': transcribeConfig(
      '{ name: a, audio: "wss://h:8443/x", signing: { accessKeyId: "${ID}", secretAccessKey: "${SECRET}" } }'
    )
  })
  let problems: unknown = null
  try {
    loadConfig(join(dir, 'inline.yaml'), {})
  } catch (err) {
    problems = (err as { problems?: unknown }).problems
  }
  t.match(problems, [
    { pointer: '/routes/x/upstreams/0/signing/accessKeyId', message: /\$\{VAR\}/ },
    { pointer: '/routes/x/upstreams/0/signing/secretAccessKey', message: /\$\{VAR\}/ }
  ])
  const cfg = loadConfig(join(dir, 'vars.yaml'), { ID: 'AKIAFROMENV', SECRET: 'secret-from-env' })
  t.ok(cfg.secrets.includes('secret-from-env') && cfg.secrets.includes('AKIAFROMENV'), 'both are redacted from logs')
  t.same(cfg.routes.x.upstreams[0].signing, { accessKeyId: 'AKIAFROMENV', secretAccessKey: 'secret-from-env' })
})
