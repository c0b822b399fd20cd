import type { RouteConfig } from '../../config/types'
import type { CompiledMapping } from '../../mapping/compile'

type Problem = { file: string; pointer: string; message: string }

/**
 * A route's `join` against its mapping's channels (checked by `check` and before `serve` listens): a
 * join route needs a two-channel audio mapping, and a two-channel mapping needs a join route (one leg
 * alone would be sent as stereo it is not).
 */
export function joinProblems(
  route: RouteConfig,
  mapping: CompiledMapping,
  configFile: string,
  holdBufferBytes = Number.POSITIVE_INFINITY
): Problem[] {
  const audio = mapping.audio
  const channels = audio?.frames.channels ?? 1
  if (route.join !== undefined && (audio === null || channels !== 2))
    return [
      {
        file: configFile,
        pointer: `/routes/${route.name}/join`,
        message:
          audio === null
            ? 'needs a mapping with an audio section'
            : `needs a two-channel mapping (audio.frames.channels: 2); ${mapping.file} declares ${channels}`
      }
    ]
  // The first leg's audio is mixed from its first frame (arrival-time alignment) and held until the vendor
  // is ready: the wait plus about a second of connecting, at 16000 bytes/s of stereo µ-law.
  const need = route.join === undefined ? 0 : (route.join.waitSeconds + 1) * 16000
  if (need > holdBufferBytes)
    return [
      {
        file: configFile,
        pointer: `/routes/${route.name}/join/waitSeconds`,
        message:
          `${route.join!.waitSeconds} s of waiting needs audio.holdBufferBytes of at least ${need} ` +
          `(stereo: 16000 bytes/s, plus 1 s to connect); it is ${holdBufferBytes}`
      }
    ]
  if (route.join === undefined && channels === 2)
    return [
      {
        file: configFile,
        pointer: `/routes/${route.name}/mapping`,
        message: `${mapping.file} declares two channels (audio.frames.channels: 2): the route needs join: { channels: [TX, RX] }`
      }
    ]
  return []
}
