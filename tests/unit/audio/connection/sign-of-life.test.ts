import t from 'tap'
import { SignOfLife } from '../../../../gateway/audio/connection/sign-of-life'

// What a loss may have cost (audio/feed/feed.ts `recover` replays it): audio written since the vendor's last
// sign of life. Issue 19: a frozen vendor's kernel buffers held audio a message-based watermark called read.

t.test('with pings, only a pong moves the watermark; a message says the vendor is alive', async t => {
  const life = new SignOfLife()
  life.pongs = true
  life.reset(0, 0)
  life.ping(1000, 8000)
  // A result arrives when 16,000 bytes were handed to the kernel: some may sit unread in socket buffers.
  life.message(16_000, 1500)
  t.equal(life.since(16_000), 16_000, 'nothing counts as read on a message')
  t.equal(life.at, 1500, 'but the vendor was alive then')
  life.pong(null)
  t.equal(life.since(16_000), 8000, 'the pong answers what was written before its ping')
  t.equal(life.at, 1500, 'the last sign of life stays the latest')
})

t.test('without pings a message is the only sign there is: all but our own buffer counts as read', async t => {
  const life = new SignOfLife()
  life.reset(0, 0)
  life.message(12_000, 700)
  t.equal(life.since(16_000), 4000)
  life.message(10_000, 800)
  t.equal(life.since(16_000), 4000, 'the watermark never goes back')
})
