import t from 'tap'
import { createLogger } from '../../../gateway/telemetry/log'
import { LogCapture } from '../../helpers/gateway'

t.test('credential fields are redacted by name, and configured secrets wherever they appear', async t => {
  const cap = new LogCapture()
  const secret = 'configured-secret-"quoted"-value'
  const log = createLogger({ level: 'info', secrets: [secret, 'plain-secret-1234'], destination: cap.stream })
  log.info(
    {
      authenticationToken: 'tok-aaaa',
      init: { authenticationToken: 'tok-bbbb' },
      authorizationHeader: 'hdr-cccc',
      headers: { authorization: 'Bearer dddd' }
    },
    'fields'
  )
  log.info({ note: `the value plain-secret-1234 leaked into text` }, `message with ${secret}`)
  log.info({ nested: { deeper: { value: 'plain-secret-1234' } } }, 'deep')
  const raw = cap.raw
  for (const s of ['tok-aaaa', 'tok-bbbb', 'hdr-cccc', 'Bearer dddd', 'plain-secret-1234', 'configured-secret-'])
    t.notMatch(raw, s, `${s} is not written`)
  const lines = cap.lines
  t.equal(lines.length, 3, 'every line still parses as JSON')
  t.equal(lines[0].authenticationToken, '[REDACTED]')
  t.match(lines[1].msg, 'message with [REDACTED]')
})
