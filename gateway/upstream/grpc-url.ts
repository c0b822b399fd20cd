// A replica's gRPC URL, read without loading the gRPC library: every process reads its routes' URLs, and
// only one that opens a gRPC call pays for @grpc/grpc-js (upstream/vendor-leg.ts requires it then).

/** Where a `grpc://` or `grpcs://` URL points: host:port (443 for grpcs without one), and TLS or not. */
export interface GrpcTarget {
  readonly address: string
  readonly secure: boolean
}

/** Parses a replica's gRPC URL; throws a TypeError naming the expected form. */
export function grpcTarget(url: string): GrpcTarget {
  const m = /^(grpcs?):\/\/([^/?#]+)\/?$/.exec(url)
  if (m === null) throw new TypeError('a gRPC upstream is grpcs://host[:port] or grpc://host:port, without a path')
  const secure = m[1] === 'grpcs'
  const hostPort = m[2] as string
  const hasPort = /:\d+$/.test(hostPort) && !/^\[[^\]]*\]$/.test(hostPort)
  return { address: hasPort ? hostPort : `${hostPort}:${secure ? 443 : 80}`, secure }
}

/** True for a gRPC replica URL. */
export function isGrpcUrl(url: string | null | undefined): boolean {
  return url !== null && url !== undefined && /^grpcs?:\/\//.test(url)
}
