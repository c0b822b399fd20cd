import t from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { SessionDeps } from '../../../../gateway/audio/session/session-contract'
import { sessionOver } from '../../../../gateway/audio/session/teardown'
import { loadMapping } from '../../../../gateway/mapping/compile'
import { MemoryStore } from '../../../../gateway/store/memory'
import { Metrics } from '../../../../gateway/telemetry/metrics'
import { FakeClock } from '../../../helpers/fake-clock'
import { LEG_INPUT, Lines, route, SETTINGS } from '../harness'

// audio/session/teardown.ts: a mapping's teardown when a leg's session ends for good. A step whose request is
// null is nothing to send and is skipped (docs/reference/mapping.md, "Unary gRPC calls"); a step that fails is
// logged (teardown_failed). No call is made here: neither step gets as far as a socket.

const SHIPPED = join(__dirname, '..', '..', '..', '..', 'mappings', 'dialogflow-agent-assist.yaml')
const COMPLETE = `      request: '$exists(steps.conversation.name) ? { "name": steps.conversation.name } : null'\n`

t.test(
  "the shipped CompleteConversation with the contact's conversation gone (its null request) is skipped, not teardown_failed",
  async t => {
    // The shipped mapping and, after its step, one whose request fails: the teardown has run through both once
    // that one is logged, and it shows a failing step is still logged.
    const shipped = readFileSync(SHIPPED, 'utf8')
    t.equal(shipped.split(COMPLETE).length, 2, 'the shipped teardown request, written once')
    const file = join(t.testdir({}), 'dialogflow-agent-assist.yaml')
    writeFileSync(
      file,
      shipped.replace(
        COMPLETE,
        `${COMPLETE}    - name: broken\n      method: google.cloud.dialogflow.v2.Conversations/CompleteConversation\n` +
          `      request: '$error("this request cannot be built")'\n`
      )
    )
    const audio = loadMapping(file).audio!
    t.same(
      audio.teardown?.map(s => s.name),
      ['complete', 'broken']
    )
    const clock = new FakeClock()
    const r = route(clock, ['a'], audio, () => 'grpc://127.0.0.1:9')
    const logs = new Lines()
    // The contact's shared results are gone (grpc.shareSeconds passed during the call, or the store lost them):
    // its last leg ends with no conversation to complete.
    const deps = {
      route: r,
      settings: SETTINGS,
      metrics: new Metrics(),
      store: new MemoryStore('test'),
      clock,
      host: null,
      log: logs.log
    } as unknown as SessionDeps
    sessionOver(deps, 'r:1:2:TX', 'session-1', LEG_INPUT, null, r.pool.replicas[0]!)
    const failed = () => logs.lines.filter(l => l.event === 'teardown_failed')
    for (let i = 0; i < 200 && failed().length === 0; i++) await new Promise(r => setImmediate(r))
    t.same(
      failed().map(l => l.step),
      ['broken'],
      'only the step that failed is logged: the null request was skipped'
    )
    t.match(failed()[0], { failure: { kind: 'mapping', pointer: '/audio/teardown/1/request' } })
  }
)
