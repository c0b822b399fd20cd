import t from 'tap'
import { DeliveryQueue } from '../../../gateway/text/delivery-queue'

t.test('outstanding counts accepted jobs until they finish, running or waiting (a drain waits for them)', async t => {
  const q = new DeliveryQueue(10, 1)
  const release: (() => void)[] = []
  const job = async (): Promise<void> => await new Promise<void>(resolve => release.push(resolve))
  t.equal(q.outstanding, 0)
  t.ok(q.offer(job))
  t.ok(q.offer(job))
  t.equal(q.outstanding, 2, 'one running, one waiting')
  t.equal(q.pending, 1)
  release.shift()!()
  await new Promise(resolve => setImmediate(resolve))
  t.equal(q.outstanding, 1, 'the first finished, the second now runs')
  release.shift()!()
  await new Promise(resolve => setImmediate(resolve))
  t.equal(q.outstanding, 0, 'nothing left to wait for')
})
