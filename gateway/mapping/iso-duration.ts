/**
 * ISO 8601 durations as vendors write audio offsets in them (AudioHook's transcript entities: "PT1.23S",
 * "PT2M3.5S"). Only the designators whose length is fixed: days (24 h), hours, minutes and seconds, after
 * `P` and `T` as ISO 8601 places them; a fraction only on the last one given, with `.` or `,`. Years,
 * months and weeks have no fixed length in ms, and a negative duration is no audio offset: both are
 * refused. Pure functions, no state.
 */

const ISO_DURATION =
  /^P(?:(\d+(?:[.,]\d+)?)D)?(?:T(?:(\d+(?:[.,]\d+)?)H)?(?:(\d+(?:[.,]\d+)?)M)?(?:(\d+(?:[.,]\d+)?)S)?)?$/
const UNIT_MS = [86_400_000, 3_600_000, 60_000, 1000]

/** The duration in milliseconds (a fraction of a ms kept); null when `text` is not one (see above). */
export function parseIsoDuration(text: string): number | null {
  const m = ISO_DURATION.exec(text)
  if (m === null || text === 'P' || text.endsWith('T')) return null
  let ms = 0
  let last = -1
  for (let i = 1; i <= 4; i++) if (m[i] !== undefined) last = i
  if (last < 0) return null
  for (let i = 1; i <= 4; i++) {
    const part = m[i]
    if (part === undefined) continue
    if (/[.,]/.test(part) && i !== last) return null
    // Whole and fraction apart, so "PT4097.676S" is 4097676 ms exactly (not 4097.676 × 1000 in floats).
    const [whole, frac = ''] = part.split(/[.,]/)
    ms += Number(whole) * UNIT_MS[i - 1] + (frac === '' ? 0 : (Number(frac) * UNIT_MS[i - 1]) / 10 ** frac.length)
  }
  return ms
}

/** `ms` (≥ 0) as the shortest ISO 8601 duration in seconds with ms precision: 1230 → "PT1.23S", 0 → "PT0S". */
export function formatIsoDuration(ms: number): string {
  const whole = Math.round(ms)
  const s = Math.floor(whole / 1000)
  const frac = whole % 1000
  return frac === 0 ? `PT${s}S` : `PT${s}.${String(frac).padStart(3, '0').replace(/0+$/, '')}S`
}
