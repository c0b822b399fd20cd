/**
 * The gRPC status codes the gateway acts on (google.rpc.Code, google/rpc/code.proto), by name. A plain table, so
 * the step runner, the text hook and a leg's setup can name a status without loading @grpc/grpc-js (a process
 * without a gRPC mapping never does: upstream/vendor-leg.ts says why); grpc-js's own `status` has the same numbers.
 */
export const GRPC = {
  CANCELLED: 1,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  RESOURCE_EXHAUSTED: 8,
  UNAVAILABLE: 14
} as const
