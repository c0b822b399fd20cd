import t from 'tap'
import { SignOfLife } from '../../../../gateway/audio/connection/sign-of-life'

// What a loss may have cost (audio/feed/feed.ts `recover` replays it): audio written since the vendor's last
// sign of life. Issue 19: a frozen vendor's kernel buffers held audio a message-based watermark called read.

t.test(
  'a pong moves the watermark exactly; a message by all but our own buffer (issue 32: pings only to the silent)',
  async t => {
    const life = new SignOfLife()
    life.reset(0, 0)
    life.ping(1000, 8000)
    // A result arrives when 16,000 bytes were handed to the kernel and our socket buffer held 4,000 of them.
    life.message(12_000, 1500)
    t.equal(life.since(16_000), 4000, 'a message: all but our own buffer counts as read')
    t.equal(life.at, 1500, 'and the vendor was alive then')
    life.pong(null)
    t.equal(life.since(16_000), 4000, 'a pong to an older ping moves nothing back')
    t.equal(life.at, 1500, 'nor the time of the last sign of life')
    life.ping(2000, 15_000)
    life.pong(null)
    t.equal(life.since(16_000), 1000, 'the pong answers what was written before its ping')
    t.equal(life.at, 2000)
  }
)

t.test('a message is the only sign there is: all but our own buffer counts as read', async t => {
  const life = new SignOfLife()
  life.reset(0, 0)
  life.message(12_000, 700)
  t.equal(life.since(16_000), 4000)
  life.message(10_000, 800)
  t.equal(life.since(16_000), 4000, 'the watermark never goes back')
})
