import t from 'tap'
import fc from 'fast-check'
import { formatIsoDuration, parseIsoDuration } from '../../../gateway/mapping/iso-duration'

// ISO 8601 durations as AudioHook writes its transcript entities' offset and duration (the Genesys
// AudioHook protocol's `Duration` type, e.g. "PT1.23S"; EventEntityDataTranscript in
// purecloudlabs/audiohook-reference-implementation protocol/entities-transcript.ts).

t.test('what AudioHook and ISO 8601 write', async t => {
  t.equal(parseIsoDuration('PT1.23S'), 1230)
  t.equal(parseIsoDuration('PT0S'), 0)
  t.equal(parseIsoDuration('PT12S'), 12_000)
  t.equal(parseIsoDuration('PT.5S'), null, 'ISO 8601 wants a digit before the fraction')
  t.equal(parseIsoDuration('PT2M3.5S'), 123_500)
  t.equal(parseIsoDuration('PT1H'), 3_600_000)
  t.equal(parseIsoDuration('P1DT1S'), 86_401_000)
  t.equal(parseIsoDuration('PT0,25S'), 250, 'a comma as the decimal sign')
  t.equal(parseIsoDuration('PT1.5M'), 90_000, 'a fraction on the last designator')
})

t.test('what is not an audio offset is refused (null)', async t => {
  for (const bad of ['', 'P', 'PT', 'PT1', '1.2S', 'PT-1S', '-PT1S', 'P1Y', 'P1M', 'P1W', 'PT1.5M3S', 'PT1S ', 'pt1s'])
    t.equal(parseIsoDuration(bad), null, JSON.stringify(bad))
})

t.test('round trip: any whole number of ms formats and parses back to itself (fast-check)', async t => {
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 48 * 3_600_000 }), ms => parseIsoDuration(formatIsoDuration(ms)) === ms)
  )
  t.equal(formatIsoDuration(1230), 'PT1.23S')
  t.equal(formatIsoDuration(0), 'PT0S')
  t.equal(formatIsoDuration(5), 'PT0.005S')
})

t.test('any combination of designators parses to the sum of its parts (fast-check)', async () => {
  const part = fc.option(fc.integer({ min: 0, max: 99 }), { nil: undefined })
  fc.assert(
    fc.property(part, part, part, part, fc.integer({ min: 0, max: 999 }), (d, h, m, s, frac) => {
      const time = `${h === undefined ? '' : `${h}H`}${m === undefined ? '' : `${m}M`}${s === undefined ? '' : `${s}.${String(frac).padStart(3, '0')}S`}`
      const text = `P${d === undefined ? '' : `${d}D`}${time === '' ? '' : `T${time}`}`
      const want =
        (d ?? 0) * 86_400_000 + (h ?? 0) * 3_600_000 + (m ?? 0) * 60_000 + (s === undefined ? 0 : s * 1000 + frac)
      const got = parseIsoDuration(text)
      return text === 'P' ? got === null : got !== null && Math.abs(got - want) < 1e-6
    })
  )
})
