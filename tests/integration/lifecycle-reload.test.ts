import t from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import { parse, stringify } from 'yaml'
import { sha256, stream } from '../helpers/audio'
import { platformLeg, routeTo, startVendor, until, ADMIN_WRITE } from '../helpers/gateway'
import { spawnGateway, type GatewayProcess } from '../helpers/process'
import { audioInit } from '../helpers/legs'

// Reload over a real process and real signals: SIGHUP, POST /admin/reload, a broken file, a stray signal.
// No active probes: the emulators' session lists hold the legs' vendor sessions only.
// No re-attach grace: a leg's vendor session ends with it.
const health = { active: { kind: 'none' } }
const audio = { reattachGraceSeconds: 0 }
const count = (g: GatewayProcess, event: string): number => g.output().split(`"event":"${event}"`).length - 1
const alive = (g: GatewayProcess): boolean => {
  try {
    process.kill(g.pid, 0)
    return true
  } catch {
    return false
  }
}
const rewrite = (g: GatewayProcess, change: (cfg: Record<string, any>) => void): void => {
  const cfg = parse(readFileSync(g.file, 'utf8')) as Record<string, any>
  change(cfg)
  writeFileSync(g.file, stringify(cfg))
}

t.test('SIGHUP: a changed and an added route serve new legs; a live leg streams on untouched', async t => {
  const a = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
  const b = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
  const g = await spawnGateway(t, { health, audio, routes: { demo: routeTo([a], 'mappings/json-events.yaml') } })

  const live = platformLeg(t, g.url('/audio/demo'), audioInit(710001))
  t.equal((await live.answer).command, 'CONNECTED')
  const before = stream(live, 0, 60)
  // demo now points at b; a new route appears.
  rewrite(g, cfg => {
    cfg.routes.demo = routeTo([b], 'mappings/json-events.yaml')
    cfg.routes.extra = routeTo([b], 'mappings/json-events.yaml')
  })
  process.kill(g.pid, 'SIGHUP')
  t.ok(await until(() => count(g, 'config_reloaded') === 1), 'the reload is logged')
  t.match(g.output(), /"event":"config_reloaded"[^\n]*"added":\["extra"\][^\n]*"changed":\["demo"\]/)
  const sent = Buffer.concat([await before, await stream(live, 60, 120)])

  const fresh = platformLeg(t, g.url('/audio/demo'), audioInit(710002))
  t.equal((await fresh.answer).command, 'CONNECTED', 'a new leg on the changed route connects')
  const added = platformLeg(t, g.url('/audio/extra'), audioInit(710003))
  t.equal((await added.answer).command, 'CONNECTED', 'a new leg on the added route connects')
  t.equal(b.sessions().length, 2, 'both went to the new config’s replica')

  live.ws.close(1000)
  await live.closed
  t.ok(await until(() => a.sessions()[0]?.closed === true), 'the live leg’s vendor session ended with the leg')
  t.equal(a.sessions().length, 1, 'the live leg kept its vendor session')
  t.equal(a.sessions()[0].bytes, 120 * 160, 'its vendor got every frame (in fewer writes: audio.coalesceMs)')
  t.equal(a.sessions()[0].sha256, sha256(sent), 'in order')
  t.match(await (await fetch(g.adminUrl('/metrics'))).text(), 'assist_gateway_config_reloads_total{result="ok"} 1')
})

t.test('SIGHUP with a broken file: nothing changes, one log line, the process lives', async t => {
  const a = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
  const g = await spawnGateway(t, { health, audio, routes: { demo: routeTo([a], 'mappings/json-events.yaml') } })
  const live = platformLeg(t, g.url('/audio/demo'), audioInit(720001))
  t.equal((await live.answer).command, 'CONNECTED')
  const good = readFileSync(g.file, 'utf8')

  writeFileSync(g.file, `${good}\nroutes: [unclosed\n`)
  process.kill(g.pid, 'SIGHUP')
  t.ok(await until(() => count(g, 'config_reload_failed') === 1), 'the refusal is logged')
  // A schema problem (valid YAML): refused the same way.
  writeFileSync(g.file, good)
  rewrite(g, cfg => {
    cfg.routes.demo.upstreams = 'nowhere'
  })
  process.kill(g.pid, 'SIGHUP')
  t.ok(await until(() => count(g, 'config_reload_failed') === 2), 'the second refusal is logged')
  t.ok(alive(g), 'the process lives')
  // Signals it has no use for are logged, never fatal.
  process.kill(g.pid, 'SIGUSR2')
  t.ok(await until(() => count(g, 'signal_ignored') === 1), 'a stray SIGUSR2 is logged')
  t.ok(alive(g))

  const fresh = platformLeg(t, g.url('/audio/demo'), audioInit(720002))
  t.equal((await fresh.answer).command, 'CONNECTED', 'the old config still serves new legs')
  const sent = await stream(live, 0, 20)
  live.ws.close(1000)
  await live.closed
  t.ok(await until(() => a.sessions()[0]?.closed === true))
  t.equal(a.sessions()[0].sha256, sha256(sent), 'the live leg streamed through the refused reloads')
  const metrics = await (await fetch(g.adminUrl('/metrics'))).text()
  t.match(metrics, 'assist_gateway_config_reloads_total{result="failed"} 2')

  // POST /admin/reload: 409 with the problems while the file is broken, 200 once it is good again.
  const refused = await fetch(g.adminUrl('/admin/reload'), { method: 'POST', headers: ADMIN_WRITE })
  t.equal(refused.status, 409)
  t.match(((await refused.json()) as { problems: string[] }).problems.join('\n'), /upstreams/)
  writeFileSync(g.file, good)
  const ok = await fetch(g.adminUrl('/admin/reload'), { method: 'POST', headers: ADMIN_WRITE })
  t.equal(ok.status, 200)
  t.same(((await ok.json()) as { changed: string[] }).changed, [], 'an unchanged route keeps its runtime')

  // A listener-level key: accepted, reported and logged as needing a restart.
  rewrite(g, cfg => {
    cfg.uws = { idleTimeoutSeconds: 60 }
  })
  const later = await fetch(g.adminUrl('/admin/reload'), { method: 'POST', headers: ADMIN_WRITE })
  t.match(await later.json(), { ok: true, restartRequired: ['uws'] })
  t.ok(await until(() => count(g, 'config_restart_required') === 1), 'the restart-only change is logged')
})
