import { execFileSync } from 'node:child_process'
import { join } from 'node:path'

/**
 * A self-signed certificate for localhost and 127.0.0.1, valid one day, made with the openssl CLI in
 * `dir` as `<name>cert.pem` and `<name>key.pem`; `passphrase` encrypts the key.
 */
export function selfSignedPair(dir: string, name = '', passphrase?: string): { cert: string; key: string } {
  const cert = join(dir, `${name}cert.pem`)
  const key = join(dir, `${name}key.pem`)
  const secret = passphrase === undefined ? ['-nodes'] : ['-passout', `pass:${passphrase}`]
  execFileSync(
    'openssl',
    [
      ...['req', '-x509', '-newkey', 'rsa:2048', ...secret, '-keyout', key, '-out', cert, '-days', '1'],
      ...['-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1']
    ],
    { stdio: 'ignore' }
  )
  return { cert, key }
}
