import t from 'tap'
import { relayedAddress, signRelayedAddress } from '../../../gateway/auth/hook-auth'

// The signed platform address a relaying instance passes on with a join leg (audio/join-relay.ts).

t.test('a signed address reads back; a forged, altered or unsigned one is ignored', async t => {
  t.equal(relayedAddress(signRelayedAddress('10.1.2.3')), '10.1.2.3')
  t.equal(relayedAddress(signRelayedAddress('::ffff:10.1.2.3')), '::ffff:10.1.2.3', 'IPv6 text (it holds colons)')
  const signed = signRelayedAddress('10.1.2.3')
  const sig = signed.slice(signed.lastIndexOf(';'))
  t.equal(relayedAddress(`10.1.2.4${sig}`), null, 'another address with that signature')
  t.equal(relayedAddress('10.1.2.3;bogus'), null, 'a made-up signature')
  t.equal(relayedAddress('10.1.2.3'), null, 'no signature')
  t.equal(relayedAddress(''), null, 'no header')
  t.equal(relayedAddress(';x'), null, 'no address')
})
