import { readFileSync } from 'node:fs'
import { extname } from 'node:path'

// G.711 mu-law constants (ITU-T G.711 / Sun g711.c).
const BIAS = 0x84
const CLIP = 32635

const RAW_EXTENSIONS = new Set(['.ulaw', '.mulaw', '.raw', '.ul'])
const WAV_EXTENSIONS = new Set(['.wav', '.wave'])

const FORMAT_PCM = 1
const FORMAT_MULAW = 7
const FORMAT_EXTENSIBLE = 0xfffe

/** Encodes one signed 16-bit linear PCM sample as a G.711 mu-law byte. */
export function linearToMulaw(sample: number): number {
  let s = Math.round(sample)
  if (Number.isNaN(s)) s = 0
  if (s > 32767) s = 32767
  if (s < -32768) s = -32768
  const sign = s < 0 ? 0x80 : 0
  if (sign) s = -s
  if (s > CLIP) s = CLIP
  s += BIAS
  // Exponent = position of the highest set bit above bit 7 (s >= 0x84 so bit 7 or higher is set).
  let exponent = 7
  for (let mask = 0x4000; (s & mask) === 0 && exponent > 0; mask >>= 1) exponent--
  const mantissa = (s >> (exponent + 3)) & 0x0f
  return ~(sign | (exponent << 4) | mantissa) & 0xff
}

/** Decodes one G.711 mu-law byte to a signed 16-bit linear PCM sample. */
export function mulawToLinear(byte: number): number {
  const u = ~byte & 0xff
  const exponent = (u >> 4) & 0x07
  const t = (((u & 0x0f) << 3) + BIAS) << exponent
  return u & 0x80 ? BIAS - t : t - BIAS
}

/**
 * Reads an audio clip and returns raw G.711 mu-law, 8 kHz, mono bytes.
 * Raw files (.ulaw/.mulaw/.raw/.ul) are returned as they are; WAV files must be
 * 8000 Hz mono, either mu-law (tag 7, 8-bit) or PCM16 (tag 1, encoded here).
 */
export function readAudioClip(path: string): Buffer {
  let data: Buffer
  try {
    data = readFileSync(path)
  } catch (err) {
    throw new Error(`${path}: cannot read file (${(err as Error).message})`)
  }
  if (data.length === 0) throw new Error(`${path}: file is empty`)
  const ext = extname(path).toLowerCase()
  if (RAW_EXTENSIONS.has(ext)) return data
  if (WAV_EXTENSIONS.has(ext) || isRiffWave(data)) return parseWav(path, data)
  throw new Error(
    `${path}: unknown audio file type "${ext || '(no extension)'}" ` +
      '(need a WAV file or raw mu-law with extension .ulaw, .mulaw, .raw or .ul)'
  )
}

function isRiffWave(data: Buffer): boolean {
  return data.length >= 12 && data.toString('latin1', 0, 4) === 'RIFF' && data.toString('latin1', 8, 12) === 'WAVE'
}

interface WavFormat {
  tag: number
  channels: number
  sampleRate: number
  bitsPerSample: number
}

function parseWav(path: string, data: Buffer): Buffer {
  if (!isRiffWave(data)) throw new Error(`${path}: not a RIFF/WAVE file`)
  let format: WavFormat | null = null
  let samples: Buffer | null = null
  let offset = 12
  while (offset + 8 <= data.length) {
    const id = data.toString('latin1', offset, offset + 4)
    const size = data.readUInt32LE(offset + 4)
    const start = offset + 8
    // Streaming writers may leave the size at 0xFFFFFFFF or too large: clamp to what the file holds.
    const end = Math.min(start + size, data.length)
    if (id === 'fmt ') {
      format = parseFmt(path, data.subarray(start, end))
    } else if (id === 'data') {
      samples = data.subarray(start, end)
      break
    }
    // Chunks are word-aligned: an odd-sized chunk is followed by one pad byte.
    offset = start + size + (size & 1)
  }
  if (!format) throw new Error(`${path}: WAV has no "fmt " chunk before its "data" chunk`)
  if (!samples) throw new Error(`${path}: WAV has no "data" chunk`)
  if (format.channels !== 1) throw new Error(`${path}: WAV has ${format.channels} channels, not supported (need mono)`)
  if (format.sampleRate !== 8000) {
    throw new Error(`${path}: WAV sample rate ${format.sampleRate} not supported (need 8000)`)
  }
  if (format.tag === FORMAT_MULAW) {
    if (format.bitsPerSample !== 8) {
      throw new Error(`${path}: WAV mu-law with ${format.bitsPerSample} bits per sample not supported (need 8)`)
    }
    if (samples.length === 0) throw new Error(`${path}: WAV data chunk is empty`)
    return Buffer.from(samples)
  }
  if (format.tag === FORMAT_PCM) {
    if (format.bitsPerSample !== 16) {
      throw new Error(`${path}: WAV PCM with ${format.bitsPerSample} bits per sample not supported (need 16)`)
    }
    const count = samples.length >> 1
    if (count === 0) throw new Error(`${path}: WAV data chunk is empty`)
    const out = Buffer.allocUnsafe(count)
    for (let i = 0; i < count; i++) out[i] = linearToMulaw(samples.readInt16LE(i * 2))
    return out
  }
  throw new Error(`${path}: WAV format tag ${format.tag} not supported (need 7 = mu-law or 1 = PCM16)`)
}

function parseFmt(path: string, fmt: Buffer): WavFormat {
  if (fmt.length < 16) throw new Error(`${path}: WAV "fmt " chunk is too short (${fmt.length} bytes, need 16)`)
  let tag = fmt.readUInt16LE(0)
  if (tag === FORMAT_EXTENSIBLE) {
    // WAVE_FORMAT_EXTENSIBLE: the real tag is the first two bytes of the SubFormat GUID at offset 24.
    if (fmt.length < 40)
      throw new Error(`${path}: WAV extensible "fmt " chunk is too short (${fmt.length} bytes, need 40)`)
    tag = fmt.readUInt16LE(24)
  }
  return {
    tag,
    channels: fmt.readUInt16LE(2),
    sampleRate: fmt.readUInt32LE(4),
    bitsPerSample: fmt.readUInt16LE(14)
  }
}
