import type { AudioLeg } from '../../gateway/audio/leg/leg'
import type { PlatformLeg } from '../../gateway/audio/leg/leg-contract'
import { initMessage } from '../../gateway/tools/simulate'

type Json = Record<string, any>

/**
 * The one fake platform socket of the unit tests: what a platform leg (audio/leg/leg.ts PlatformLeg) sends
 * is parsed into `sent`, its closes are kept in `ended` and, as uWS does, reported to the leg at once
 * (synchronously). `status` is what a send returns (1 sent, 0 backed up) and `buffered` the socket's
 * buffered amount; a test sets them to back the platform up. `bind` names the leg the closes go to.
 */
export function fakePlatform() {
  const sent: Json[] = []
  const ended: { code: number; reason: string }[] = []
  const state = { status: 1, buffered: 0 }
  let leg: AudioLeg | null = null
  const socket: PlatformLeg = {
    sendText: text => {
      sent.push(JSON.parse(text))
      return state.status
    },
    end: (code, reason) => {
      ended.push({ code, reason })
      leg?.onPlatformClose(code)
    },
    bufferedAmount: () => state.buffered
  }
  return {
    socket,
    sent,
    ended,
    state,
    bind: (l: AudioLeg): void => {
      leg = l
    }
  }
}

/** An init message (gateway/tools/simulate.ts initMessage) as the bytes a platform leg's first text frame holds. */
export function initFrame(opts: Parameters<typeof initMessage>[0]): ArrayBuffer {
  const bytes = Buffer.from(JSON.stringify(initMessage(opts)))
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length) as ArrayBuffer
}
