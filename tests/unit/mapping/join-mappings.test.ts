import t from 'tap'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { validateAll } from '../../../gateway/check'
import { joinProblems } from '../../../gateway/audio/session/join-config'
import type { RouteConfig } from '../../../gateway/config/types'
import { loadMapping } from '../../../gateway/mapping/compile'
import { dryRunMapping } from '../../../gateway/mapping/dry-run'

// The shipped stereo mappings compile with two channels and a channel rule; the route/mapping pairing is checked.

const ROOT = join(__dirname, '..', '..', '..')
const routeOf = (mapping: string, joined: boolean): RouteConfig =>
  ({
    name: 'x',
    mapping,
    auth: {},
    params: {},
    upstreams: [{ name: 'v', audio: 'wss://vendor.invalid/v1/listen', credential: 'k', headers: {} }],
    ...(joined ? { join: { channels: ['TX', 'RX'], waitSeconds: 2 } } : {})
  }) as unknown as RouteConfig

for (const name of ['deepgram-stereo', 'audiohook-stereo']) {
  t.test(`${name}: two channels, results routed by channel`, async t => {
    const file = join(ROOT, 'mappings', `${name}.yaml`)
    const m = loadMapping(file)
    t.equal(m.audio?.frames.channels, 2)
    t.ok(
      m.audio?.results.some(r => r.channel != null),
      'a result rule names its channel'
    )
    t.same(joinProblems(routeOf(file, true), m, 'c.yaml'), [])
    const route = { ...routeOf(file, true), params: { organizationId: '11111111-2222-4333-8444-555555555555' } }
    t.same(await dryRunMapping(m, route as RouteConfig), [], 'its samples dry-run clean')
    t.match(joinProblems(routeOf(file, false), m, 'c.yaml'), [{ pointer: '/routes/x/mapping', message: /needs join/ }])
  })
}

t.test('a join route with a one-channel mapping is refused', async t => {
  const file = join(ROOT, 'mappings', 'deepgram.yaml')
  t.match(joinProblems(routeOf(file, true), loadMapping(file), 'c.yaml'), [
    { pointer: '/routes/x/join', message: /two-channel mapping/ }
  ])
})

t.test('check: a join route is validated with its mapping, and join itself by the schema', async t => {
  const cfg = (join: unknown, mapping: string) =>
    stringify({
      listen: { host: '127.0.0.1', port: 0 },
      routes: {
        x: { mapping, upstreams: [{ name: 'v', audio: 'ws://v.invalid/' }], join }
      }
    })
  const dir = t.testdir({
    'mono.yaml': cfg({ channels: ['TX', 'RX'] }, join(ROOT, 'mappings', 'deepgram.yaml')),
    'twice.yaml': cfg({ channels: ['TX', 'TX'] }, join(ROOT, 'mappings', 'deepgram-stereo.yaml')),
    'good.yaml': cfg({ channels: ['RX', 'TX'] }, join(ROOT, 'mappings', 'deepgram-stereo.yaml')),
    'long.yaml': cfg({ channels: ['TX', 'RX'], waitSeconds: 10 }, join(ROOT, 'mappings', 'deepgram-stereo.yaml'))
  })
  const mono = await validateAll(join(dir, 'mono.yaml'), {})
  t.match(mono, { ok: false, problems: [{ pointer: '/routes/x/join', message: /two-channel mapping/ }] })
  const twice = await validateAll(join(dir, 'twice.yaml'), {})
  t.match(twice, { ok: false, problems: [{ pointer: /^\/routes\/x\/join\/channels/ }] })
  const long = await validateAll(join(dir, 'long.yaml'), {})
  t.match(long, {
    ok: false,
    problems: [{ pointer: '/routes/x/join/waitSeconds', message: /needs audio.holdBufferBytes of at least 176000/ }]
  })
  const good = await validateAll(join(dir, 'good.yaml'), {})
  t.equal(good.ok, true, JSON.stringify(good.ok ? [] : good.problems))
  if (good.ok)
    t.same(good.config.routes.x.join, { channels: ['RX', 'TX'], waitSeconds: 2 }, 'waitSeconds defaults to 2')
})
