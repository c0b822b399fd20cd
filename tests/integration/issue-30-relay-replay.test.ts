import t from 'tap'
import { FleetKey } from '../../gateway/auth/fleet-key'
import { RELAY_TOKEN_HEADER, RelayTokens } from '../../gateway/auth/relay-token'
import { platformLeg, routeTo, startVendor, until, upgradeStatus } from '../helpers/gateway'
import { freePort, spawnGateway } from '../helpers/process'
import { audioInit } from '../helpers/legs'

// Issue 30 item 6: a relay token is taken once per instance, whichever of its workers it reaches. The fleet
// port is shared by the workers of `serve` as it ships (two here); the kernel picks which one a connection
// reaches, so the same token is replayed until each worker has refused it.

const FLEET_SECRET = 'issue-30-fleet-secret-0123456789'

function lines(out: string): Record<string, unknown>[] {
  return out
    .split('\n')
    .filter(l => l.startsWith('{'))
    .map(l => JSON.parse(l) as Record<string, unknown>)
}

t.test('a relay token taken by one worker is refused by every worker of the instance', async t => {
  const vendor = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
  const fleetPort = await freePort()
  const gw = await spawnGateway(
    t,
    {
      fleet: { host: '127.0.0.1', port: fleetPort, advertiseUrl: 'ws://127.0.0.1', secret: '${FLEET_SECRET}' },
      auth: { failureDelayMs: 0, failureBudget: { failures: 1, windowSeconds: 60 } },
      routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') }
    },
    { FLEET_SECRET }
  )
  const relayUrl = `ws://127.0.0.1:${fleetPort}/relay/audio/demo`
  const view = (await (await fetch(gw.adminUrl('/admin/upstreams'))).json()) as { instance: string }
  // A token as the instance's fleet peers sign it (the same fleet.secret), naming a victim's address.
  const victim = '127.0.0.9'
  const signer = new RelayTokens(FleetKey.fromConfig({ fleet: { secret: FLEET_SECRET }, secrets: [] })!)
  const captured = signer.sign({
    hop: 'instance',
    to: view.instance,
    key: 'demo:4594:9100:TX',
    address: victim,
    from: 'another-instance'
  })
  const relayed = platformLeg(t, relayUrl, audioInit(9100), {
    headers: { [RELAY_TOKEN_HEADER]: captured }
  })
  t.equal((await relayed.answer).command, 'CONNECTED', 'the relay it was made for is served')
  const connected = (): Record<string, unknown> | undefined => lines(gw.output()).find(l => l.event === 'connected')
  t.ok(await until(() => connected() !== undefined), 'its line is written')
  const served = connected()
  t.type(served?.worker, 'number', 'by one worker')

  // Replayed until each worker has refused it at least once (the kernel spreads the connections).
  const refusedBy = (): Set<unknown> =>
    new Set(
      lines(gw.output())
        .filter(l => l.event === 'relay_refused' && l.reason === 'replayed')
        .map(l => l.worker)
    )
  const statuses: number[] = []
  t.ok(
    await until(
      async () => {
        statuses.push(await upgradeStatus(relayUrl, { [RELAY_TOKEN_HEADER]: captured }))
        return refusedBy().size === 2 || statuses.length >= 200
      },
      120_000,
      0
    ),
    'replays reached both workers'
  )
  t.same([...new Set(statuses)], [403], `every replay is refused (${statuses.length} tries)`)
  t.ok(refusedBy().has(served?.worker), 'by the worker that took it')
  t.ok(
    [...refusedBy()].some(w => w !== served?.worker),
    'and by a worker that had never seen it'
  )
  const metrics = await (await fetch(gw.adminUrl('/metrics'))).text()
  t.match(
    metrics,
    new RegExp(`assist_gateway_auth_failures_total\\{hook="relay",reason="replayed"\\} ${statuses.length}\\n`),
    'each replay counted'
  )
  // The address the token names was charged nothing (a failure budget of 1 would show it).
  const own = platformLeg(t, gw.url('/audio/demo'), audioInit(9101), {
    localAddress: victim
  })
  t.equal((await own.answer).command, 'CONNECTED', 'the victim address is served')
  for (const l of [relayed, own]) l.ws.close(1000)
})
