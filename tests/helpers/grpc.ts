import { Client, credentials, Metadata, type ServiceError, status as Status } from '@grpc/grpc-js'

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
