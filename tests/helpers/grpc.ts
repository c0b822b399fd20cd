import { Client, credentials, Metadata, type ServiceError, status as Status } from '@grpc/grpc-js'
import { readFileSync, writeFileSync } from 'node:fs'
import { basename, join } from 'node:path'
import type { Test } from 'tap'

/**
 * One bidirectional gRPC call to an emulator at `url` (grpc://host:port): these requests as raw bytes, then a
 * half-close; resolves to the status it ended with (null: OK).
 */
export async function rawStreamCall(
  url: string,
  path: string,
  requests: Buffer[],
  metadata = new Metadata()
): Promise<ServiceError | null> {
  const client = new Client(url.replace('grpc://', ''), credentials.createInsecure())
  try {
    return await new Promise(resolve => {
      const c = client.makeBidiStreamRequest(
        path,
        (b: Buffer) => b,
        (b: Buffer) => b,
        metadata
      )
      c.on('data', () => {})
      c.on('error', err => resolve(err as ServiceError))
      c.on('status', s => {
        if (s.code === Status.OK) resolve(null)
      })
      for (const r of requests) c.write(r)
      c.end()
    })
  } finally {
    client.close()
  }
}

/**
 * What a rotation test asks of a gRPC emulator's streams once the leg is over: each ended OK (half-closed by the
 * gateway, none at the vendor's limit), none past `limitMs` of audio, and the call's `totalBytes` of audio once
 * between them (none missing, none sent twice).
 */
export function checkRotatedStreams(
  t: Test,
  streams: readonly { ended: string | null; audioMs: number; audioBytes: number }[],
  limitMs: number,
  totalBytes: number
): void {
  t.same(
    streams.map(s => s.ended),
    streams.map(() => 'OK'),
    'every stream ended OK (half-closed by the gateway): none at the limit'
  )
  t.ok(
    streams.every(s => s.audioMs <= limitMs),
    'no stream over its limit'
  )
  t.equal(
    streams.reduce((n, s) => n + s.audioBytes, 0),
    totalBytes,
    'the streams had the call audio once between them: none missing, none sent twice'
  )
}

/** A copy of a shipped mapping with `from` written as `to` (which must change it), in the test's own folder. */
export function mappingCopy(t: Test, shipped: string, from: string, to: string): string {
  const text = readFileSync(shipped, 'utf8')
  const copy = text.replace(from, to)
  t.not(copy, text, `the test mapping differs from the shipped one only in ${to}`)
  const file = join(t.testdir({}), basename(shipped))
  writeFileSync(file, copy)
  return file
}
