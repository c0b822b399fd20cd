import t, { type Test } from 'tap'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parse, stringify } from 'yaml'
import { platformLeg, routeTo, startGateway, startVendor, until } from '../helpers/gateway'
import { audioInit } from '../helpers/legs'

// issue 8: a vendor connection the mapping cannot build is a mapping failure, reported at once, and
// nothing an expression produced (its value or its error text, which may quote the init message) goes back.

type Json = Record<string, any>
const ROOT = join(__dirname, '..', '..')
const SECRET = 'init-secret-4242'

const init = (): Json => ({
  ...audioInit(1001),
  appParams: { note: SECRET }
})

/**
 * json-events.yaml with `audio[key]` set, in a folder of its own. The expression fails only on an init
 * message carrying `appParams.note` (this test's): `serve` dry-runs every mapping on the interface's
 * example init message before it starts, and a mapping failing there never serves.
 */
function mappingWith(t: Test, key: 'url' | 'headers', expr: string): string {
  const m = parse(readFileSync(join(ROOT, 'mappings', 'json-events.yaml'), 'utf8')) as Json
  m.audio[key] = expr
  const dir = mkdtempSync(join(tmpdir(), 'mapping-failure-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'broken.yaml'), stringify(m))
  return join(dir, 'broken.yaml')
}

for (const [key, how, expr] of [
  ['url', 'throws', 'init.appParams.note ? $error("cannot build a URL from " & init.appParams.note) : upstream.audio'],
  ['url', 'is not a string', 'init.appParams.note ? { "u": init.appParams.note } : upstream.audio'],
  ['headers', 'throws', 'init.appParams.note ? $error("cannot build a header from " & init.appParams.note) : {}']
] as const) {
  t.test(
    `audio.${key} ${how}: the leg ends with MAPPING_FAILED at once, and nothing of it reaches the platform`,
    async t => {
      const file = mappingWith(t, key, expr)
      const a = await startVendor(t, { kind: 'json-events' })
      const b = await startVendor(t, { kind: 'json-events' })
      const gw = await startGateway(t, { routes: { demo: routeTo([a, b], file) } })
      const leg = platformLeg(t, gw.url('/audio/demo'), init())
      const answer = await leg.answer
      t.match(answer, { command: 'ERROR', messageType: 'MAPPING_FAILED', parameters: { code: 'MAPPING_FAILED' } })
      t.equal((await leg.closed).code, 1011)
      t.notOk(JSON.stringify(answer).includes(SECRET), 'no expression text reaches the platform')
      t.notOk(JSON.stringify(answer).includes('cannot build'), 'not even the error message')
      t.equal(a.sessions().length + b.sessions().length, 0, 'no replica is tried: the mapping fails everywhere')
      const metrics = await (await fetch(gw.adminUrl('/metrics'))).text()
      t.match(metrics, new RegExp(`assist_gateway_mapping_errors_total\\{route="demo",stage="${key}"\\} 1\\b`))
      t.ok(
        await until(() => gw.logs.lines.some(l => l.event === 'mapping_error' && l.stage === key)),
        'the detail is logged'
      )
      t.ok(await until(() => gw.logs.lines.some(l => l.event === 'leg_failed' && l.code === 'MAPPING_FAILED')))
    }
  )
}
