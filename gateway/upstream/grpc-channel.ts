import { Client, credentials } from '@grpc/grpc-js'
import type { GrpcTarget } from './grpc-url'

// The gRPC channels of this process, one per vendor address: every call to a replica shares one HTTP/2
// connection (gRPC multiplexes calls), as every leg to a WebSocket vendor shares the process's sockets.

const channels = new Map<string, Client>()

/**
 * HTTP/2 keepalive finds a vendor that went away without a word (the gRPC counterpart of the WebSocket
 * heartbeat): a ping every 10 s while calls run, the connection dropped when its ack is 5 s late.
 */
const CHANNEL_OPTIONS = {
  'grpc.keepalive_time_ms': 10_000,
  'grpc.keepalive_timeout_ms': 5_000,
  'grpc.max_receive_message_length': 4 << 20,
  // A replica back from an outage is found within seconds (the library's own backoff grows to 120 s).
  'grpc.initial_reconnect_backoff_ms': 500,
  'grpc.max_reconnect_backoff_ms': 5_000
}

/** The shared channel to `target` (created on first use). */
export function channelFor(target: GrpcTarget): Client {
  const key = `${target.secure ? 's' : 'p'}:${target.address}`
  let client = channels.get(key)
  if (client === undefined) {
    const creds = target.secure ? credentials.createSsl() : credentials.createInsecure()
    client = new Client(target.address, creds, CHANNEL_OPTIONS)
    channels.set(key, client)
  }
  return client
}

/** Close every channel (a worker shutting down; tests). */
export function closeChannels(): void {
  for (const c of channels.values()) c.close()
  channels.clear()
}
