import t from 'tap'
import { hashTaggedPrefix } from '../../../gateway/store/redis'

t.test('every key prefix carries a Redis Cluster hash tag, so one sync touches one slot', async t => {
  t.equal(hashTaggedPrefix('{assist-gateway}:'), '{assist-gateway}:', 'the default prefix is kept as written')
  t.equal(hashTaggedPrefix('fleet-a:'), '{fleet-a:}', 'a prefix without a tag is wrapped whole')
  t.equal(hashTaggedPrefix('prod:{gw}:'), 'prod:{gw}:', 'a tag anywhere in the prefix is used')
  t.equal(hashTaggedPrefix('x{}:'), '{x{}:}', 'an empty tag hashes the whole key in Redis, so it is wrapped')
  t.equal(hashTaggedPrefix('x}{:'), '{x}{:}', 'a } before the { is no tag')
})
