import t from 'tap'
import { FinalScrape, lingerMs } from '../../../gateway/telemetry/final-scrape'

// The linger after a drain (shutdown.metricsLingerSeconds): which scrape ends it, and how long it may last.

t.test('only a scrape that began after the drain finished ends the linger', async t => {
  let now = 0
  const final = new FinalScrape(() => now)
  const early = final.begin()
  final.answered(early)
  now = 10
  final.finished()
  const waiting = final.wait(3_600_000)
  now = 11
  const during = final.begin()
  let settled = false
  void waiting.then(() => {
    settled = true
  })
  // A scrape that began before the drain finished may carry counters that were not final yet.
  final.answered(early)
  await Promise.resolve()
  t.equal(settled, false, 'a scrape begun before the drain finished does not count')
  final.answered(during)
  t.equal(await waiting, 'scraped')
})

t.test('no linger when it is 0, and none after a second signal', async t => {
  const final = new FinalScrape()
  final.finished()
  t.equal(await final.wait(0), 'timeout')
  const waiting = final.wait(3_600_000)
  final.cancel()
  t.equal(await waiting, 'cancelled')
  t.equal(await final.wait(3_600_000), 'cancelled', 'and not later either')
})

t.test('the linger never runs past the drain deadline', async t => {
  const s = { metricsLingerSeconds: 15, deadlineSeconds: 30 }
  t.equal(lingerMs(s, 10_000), 15_000, 'drained early: the whole linger')
  t.equal(lingerMs(s, 20_000), 10_000, 'drained late: until the deadline')
  t.equal(lingerMs(s, 31_000), 0, 'cut at the deadline: none')
  t.equal(lingerMs({ metricsLingerSeconds: 0, deadlineSeconds: 30 }, 0), 0)
})
