import type { ConfigProblem } from '../errors'
import { requestProblem } from './grpc-check'
import { run } from './run'
import type { GrpcStep } from './steps'

// `check` on a mapping's unary steps (`audio.setup`, `audio.teardown`, `text.setup`: mapping/steps.ts) as on
// its streaming requests (mapping/grpc-check.ts): each step's request built on the example input and held to
// its method's request message; a field the message does not have is reported where its name is written.

/**
 * Each step's request on `input`, with `steps` the results so far: `known` (the steps before these, such as
 * the setup a teardown reads), and each step's own as it is checked. No call is made: a result is its response
 * message with each top-level string field a placeholder (`steps.conversation.name` is "[conversation.name]").
 * Returns the results, for what comes after.
 */
export async function checkStepRequests(
  file: string,
  steps: readonly GrpcStep[],
  input: object,
  problems: ConfigProblem[],
  known: Record<string, unknown> = {}
): Promise<Record<string, unknown>> {
  const results: Record<string, unknown> = { ...known }
  const seen = { ...input, steps: results }
  for (const step of steps) {
    const pointer = `${step.pointer}/request`
    const out = await run(step.request, seen)
    if (!out.ok) problems.push({ file, pointer, message: out.error })
    else {
      const p = requestProblem(file, step.method, pointer, out.value)
      if (p !== null) problems.push(p)
    }
    results[step.name] = placeholder(step)
  }
  return results
}

function placeholder(step: GrpcStep): Record<string, string> {
  const out: Record<string, string> = {}
  for (const f of step.method.protos.fields(step.method.response)?.values() ?? [])
    if (f.type === 'TYPE_STRING' && !f.repeated) out[f.name] = `[${step.name}.${f.name}]`
  return out
}
