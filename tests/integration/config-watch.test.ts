import t from 'tap'
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parse, stringify } from 'yaml'
import { sha256, stream } from '../helpers/audio'
import { spawnCli } from '../helpers/cli'
import { AUDIO_TOKEN, TEXT_TOKEN, platformLeg, routeTo, sleep, startVendor, until } from '../helpers/gateway'
import { freePort, spawnGateway } from '../helpers/process'
import { utterance } from '../helpers/tls'
import { audioInit } from '../helpers/legs'

// serve --watch-config / reload.watch, as shipped (2 workers): the main process watches and reloads every worker.
const health = { active: { kind: 'none' } }
const audio = { reattachGraceSeconds: 0 }
const count = (out: string, event: string): number => out.split(`"event":"${event}"`).length - 1

async function textStatus(url: string): Promise<number> {
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: TEXT_TOKEN },
      body: JSON.stringify(utterance())
    })
    await res.arrayBuffer()
    return res.status
  } catch {
    return 0
  }
}

t.test(
  'reload.watch: editing the file adds a route that then serves; a leg streaming through it keeps every frame',
  async t => {
    const a = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
    const b = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
    const g = await spawnGateway(t, {
      health,
      audio,
      reload: { watch: true },
      routes: { demo: routeTo([a], 'mappings/json-events.yaml') }
    })
    t.ok(await until(() => count(g.output(), 'config_watch') === 1), 'the main process watches the files')
    t.equal(await textStatus(g.url('/text/extra')), 404, 'no route extra yet')

    const live = platformLeg(t, g.url('/audio/demo'), audioInit(760001))
    t.equal((await live.answer).command, 'CONNECTED')
    const streaming = stream(live, 0, 150)
    await sleep(500)
    const cfg = parse(readFileSync(g.file, 'utf8')) as Record<string, any>
    cfg.routes.extra = routeTo([b], 'mappings/json-events.yaml')
    writeFileSync(g.file, stringify(cfg))
    t.ok(
      await until(async () => (await textStatus(g.url('/text/extra'))) === 200),
      'the added route serves, no signal sent'
    )
    t.ok(await until(() => count(g.output(), 'config_reloaded') === 1), 'the instance reloaded, announced once')
    t.match(g.output(), /"event":"config_reloaded"[^\n]*"trigger":"watch"[^\n]*"added":\["extra"\]/)
    t.equal(count(g.output(), 'config_changed'), 1, 'one change, one reload')
    const added = platformLeg(t, g.url('/audio/extra'), audioInit(760002))
    t.equal((await added.answer).command, 'CONNECTED', 'an audio leg on the added route connects')
    const sent = await streaming

    live.ws.close(1000)
    const closed = await live.closed
    t.equal(closed.code, 1000, 'the live leg was never cut: it ends when the platform ends it')
    t.ok(await until(() => a.sessions()[0]?.closed === true), 'its vendor session ended with it')
    t.equal(a.sessions().length, 1, 'one vendor session for the whole leg')
    t.equal(a.sessions()[0].bytes, 150 * 160, 'every frame reached the vendor')
    t.equal(a.sessions()[0].sha256, sha256(sent), 'in order')
    t.equal(count(g.output(), 'worker_started'), 2, 'no process restarted')
  }
)

/** A ConfigMap volume as the kubelet lays it out: gateway.yaml → ..data/gateway.yaml, ..data → ..<timestamp>. */
class ConfigMapVolume {
  private version = 0
  constructor(readonly dir: string) {}
  get file(): string {
    return join(this.dir, 'gateway.yaml')
  }
  /** A new timestamped folder, its link renamed over ..data (atomic), the old folder removed: the kubelet's update. */
  publish(config: Record<string, unknown>): void {
    const old = this.version === 0 ? null : `..v${this.version}`
    const next = `..v${++this.version}`
    mkdirSync(join(this.dir, next))
    writeFileSync(join(this.dir, next, 'gateway.yaml'), stringify(config))
    symlinkSync(next, join(this.dir, '..data_tmp'))
    renameSync(join(this.dir, '..data_tmp'), join(this.dir, '..data'))
    if (old === null) symlinkSync(join('..data', 'gateway.yaml'), this.file)
    else rmSync(join(this.dir, old), { recursive: true })
  }
}

t.test(
  'serve --watch-config follows a ConfigMap update; a change that needs a restart applies nothing of itself',
  async t => {
    const a = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
    const [port, metricsPort, adminPort, fleetPort, otherPort] = await Promise.all(
      Array.from({ length: 5 }, async () => await freePort())
    )
    const dir = mkdtempSync(join(tmpdir(), 'assist-gateway-configmap-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    const volume = new ConfigMapVolume(dir)
    const config: Record<string, any> = {
      listen: { host: '127.0.0.1', port },
      metrics: { host: '127.0.0.1', port: metricsPort },
      admin: { host: '127.0.0.1', port: adminPort },
      fleet: { host: '127.0.0.1', port: fleetPort },
      health,
      audio,
      auth: { failureDelayMs: 0, failureBudget: { failures: 0 } },
      shutdown: { drainDelaySeconds: 0, legDrainSeconds: 0, metricsLingerSeconds: 0 },
      routes: { demo: routeTo([a], 'mappings/json-events.yaml') }
    }
    volume.publish(config)
    const child = spawnCli(['serve', '--config', volume.file, '--watch-config'], {
      env: {
        ...process.env,
        AUDIO_TOKEN,
        TEXT_TOKEN,
        PORT: '',
        ADMIN_PORT: '',
        METRICS_PORT: '',
        REDIS_URL: '',
        GATEWAY_CONFIG: ''
      }
    })
    let out = ''
    child.stdout!.on('data', d => (out += String(d)))
    child.stderr!.on('data', d => (out += String(d)))
    const exited = new Promise(resolve => child.once('exit', resolve))
    t.teardown(async () => {
      if (child.exitCode !== null || child.signalCode !== null) return
      child.kill('SIGTERM')
      await exited
    })
    const url = (p: string, at = port): string => `http://127.0.0.1:${at}${p}`
    t.ok(await until(async () => (await fetch(url('/livez', metricsPort)).catch(() => null))?.status === 200, 60_000))
    t.equal(await textStatus(url('/text/demo')), 200)

    volume.publish({ ...config, routes: { ...config.routes, extra: routeTo([a], 'mappings/json-events.yaml') } })
    t.ok(await until(async () => (await textStatus(url('/text/extra'))) === 200), 'the route the update added serves')
    t.ok(await until(() => count(out, 'config_reloaded') === 1), 'one reload, announced once for the instance')

    // The next update moves the public listener: that needs a restart, and is reported as SIGHUP's would be.
    volume.publish({ ...config, listen: { host: '127.0.0.1', port: otherPort }, routes: config.routes })
    t.ok(
      await until(() => count(out, 'config_restart_required') === 1),
      'the instance reports the restart it needs, once'
    )
    t.match(out, /"event":"config_restart_required","keys":\["listen"\]/)
    t.equal(await textStatus(url('/text/demo')), 200, 'the old port still serves')
    t.equal(await textStatus(url('/text/demo', otherPort)), 0, 'the new one is not opened')
    t.ok(child.exitCode === null, 'the process lives on')
  }
)
