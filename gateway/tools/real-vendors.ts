/**
 * Strict emulators of four real streaming APIs, for tests and local runs:
 *
 * | kind           | path                     | the gateway is | audio                         |
 * |----------------|--------------------------|----------------|-------------------------------|
 * | `deepgram`     | `/v1/listen`             | client         | binary (mulaw / linear16)     |
 * | `assemblyai`   | `/v3/ws`                 | client         | binary (pcm_mulaw / pcm_s16le)|
 * | `twilio-media` | `/media`                 | Twilio's side  | JSON `media.payload` base64   |
 * | `audiohook`    | `/api/v1/audiohook/ws`   | AudioHook client (Genesys' side) | binary PCMU |
 *
 * Every frame is checked against the vendor's documented shape; each violation is appended to the
 * session's `errors` (a conforming client leaves it empty). Where the real service answers a
 * violation (an `Error` frame, a close code, an AudioHook `disconnect`), the emulator answers the
 * same way; where the documentation says nothing, it records the error and carries on.
 * Results are emitted on a fixed cadence of *audio time* received (`resultEveryMs`), so tests are
 * deterministic whatever the send rate.
 *
 * Session report counters: `frames` = audio-carrying messages (binary frames, or Twilio `media`
 * events), `bytes` = their size on the wire, `audioBytes` = audio payload bytes (equal to `bytes`
 * for binary kinds; base64-decoded for Twilio), `sha256` = hash of the audio payload bytes in order.
 * `texts` = every text message received, parsed, except Twilio `media` events (counted in frames).
 * Upgrades refused at the HTTP level also appear as (closed) sessions, with the reason in `errors`.
 *
 * Choices where the public documentation is silent are marked "(choice)" in each vendor's file.
 *
 * One file per vendor in vendors/ (deepgram.ts, assemblyai.ts, twilio-media.ts, audiohook.ts), on the
 * session recorder every emulator shares (vendors/recorder.ts); vendors/real-server.ts listens and
 * hands each socket event to the vendor's protocol. This module is their public face.
 */
export { startRealVendor } from './vendors/real-server'
export { twilioSignature } from './vendors/twilio-media'
export {
  REAL_VENDOR_PATHS,
  type RealVendorEmulator,
  type RealVendorKind,
  type RealVendorOptions,
  type RealVendorSession
} from './vendors/types'
