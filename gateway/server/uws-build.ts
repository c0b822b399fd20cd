import * as uWS from 'uWebSockets.js'
import type { Config } from '../config/types'
import type { Logger } from '../telemetry/log'
import type { Metrics } from '../telemetry/metrics'

/**
 * Which uWebSockets.js loaded. The unofficial build silently falls back to a pure-JS server when its
 * native binary does not load; native functions print as `[native code]`, the fallback's do not.
 */
function uwsBuild(): { native: boolean; binary: string | null } {
  const native = /\[native code\]/.test(Function.prototype.toString.call(uWS.App))
  const binary = Object.keys(require.cache).find(k => /uws_.*\.node$/.test(k)) ?? null
  return { native, binary }
}

/** The build that loaded, counted in build_info and logged; the fallback is refused unless `uws.allowFallback`. */
export function checkUwsBuild(config: Config, log: Logger, metrics: Metrics, version: string): { native: boolean } {
  const build = uwsBuild()
  metrics.buildInfo.set({ version, uws_native: String(build.native) }, 1)
  if (!build.native) {
    if (!config.uws.allowFallback) {
      throw new Error(
        'uWebSockets.js loaded its pure-JS fallback, not the native binary: refusing to serve ' +
          '(set uws.allowFallback: true to serve anyway, never in production)'
      )
    }
    log.warn(
      { event: 'uws_fallback' },
      'uWebSockets.js is running its slow pure-JS fallback because uws.allowFallback is true'
    )
  } else {
    log.info({ event: 'uws_native', binary: build.binary }, 'uWebSockets.js native build loaded')
  }
  return build
}
