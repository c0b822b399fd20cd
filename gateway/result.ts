/**
 * An expected outcome as a value (an expression that failed, a request that could not be built), as
 * AudioHook's `VerifyResult`: never a throw. Throw only at boundaries, and for bugs.
 */
export type Result<T, E = string> = { ok: true; value: T } | { ok: false; error: E }

/**
 * The `default` of a switch that names every member of a union: its argument's type is `never` there, so a
 * member added to the union and not named is a compile error, never a silent default. Throws if reached
 * anyway (a value from outside the types).
 */
export function unhandled(value: never): never {
  throw new Error(`unhandled case ${JSON.stringify(value)}`)
}
