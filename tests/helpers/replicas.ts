import type { HealthSettings, RouteConfig, UpstreamConfig } from '../../gateway/config/types'
import type { Store } from '../../gateway/store/port'
import { MemoryStore } from '../../gateway/store/memory'
import { UpstreamPool } from '../../gateway/upstream/pool'
import type { FakeClock } from './fake-clock'

// A route's replicas for tests that build an UpstreamPool themselves (unit tests of the pool, rebalancing,
// probes and the audio core): one route `r`, its replicas, and the health settings, said once.

/** No active probe: the test drives health itself (the prober's timing fields as the shipped defaults). */
export const NO_PROBE: HealthSettings['active'] = {
  kind: 'none',
  path: '/',
  intervalSeconds: 5,
  timeoutSeconds: 2,
  unhealthyThreshold: 3,
  healthyThreshold: 2
}

/** Health settings: `active` (no probe by default), ejected after `consecutiveFailures` gateway-side failures. */
export function health(active: HealthSettings['active'] = NO_PROBE, consecutiveFailures = 3): HealthSettings {
  return { active, passive: { consecutiveFailures, baseEjectionSeconds: 30, maxEjectionSeconds: 300 } }
}

/** A replica named `name` at ws://name/ and http://name/, room for `limit` streams, handshakes and requests. */
export function replica(name: string, limit = 10, over: Partial<UpstreamConfig> = {}): UpstreamConfig {
  return {
    name,
    audio: `ws://${name}/`,
    text: `http://${name}/`,
    headers: {},
    weight: 1,
    maxStreams: limit,
    maxPendingHandshakes: limit,
    maxInFlight: limit,
    ...over
  }
}

/** Route `r` of `mapping` over `upstreams`. */
export function routeOf(
  upstreams: readonly UpstreamConfig[],
  mapping = 'm.yaml',
  extra: Partial<RouteConfig> = {}
): RouteConfig {
  return { name: 'r', default: false, async: false, mapping, auth: {}, params: {}, upstreams, ...extra }
}

/** The pool of route `r` over `upstreams`, on `clock`, with its own memory store unless one is given. */
export function poolOf(
  upstreams: readonly UpstreamConfig[],
  clock: FakeClock,
  settings: HealthSettings = health(),
  store: Store = new MemoryStore('i1')
): UpstreamPool {
  return new UpstreamPool(routeOf(upstreams), store, settings, clock)
}
