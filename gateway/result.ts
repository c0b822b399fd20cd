/**
 * An expected outcome as a value (an expression that failed, a request that could not be built), as
 * AudioHook's `VerifyResult`: never a throw. Throw only at boundaries, and for bugs.
 */
export type Result<T, E = string> = { ok: true; value: T } | { ok: false; error: E }
