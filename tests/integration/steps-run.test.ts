import t from 'tap'
import { join } from 'node:path'
import { systemClock } from '../../gateway/clock'
import { loadMapping } from '../../gateway/mapping/compile'
import { runSteps } from '../../gateway/mapping/steps-run'
import { MemoryStore } from '../../gateway/store/memory'
import { startDialogflow } from '../../gateway/tools/vendors/dialogflow'

// The step runner (gateway/mapping/steps-run.ts) on the shipped Dialogflow mapping's audio.setup, against the
// Dialogflow emulator as a real gRPC server (its checks follow conversation.proto's CreateConversationRequest and
// participant.proto's CreateParticipantRequest). One process: no serve is needed, the store is a MemoryStore.

const mapping = loadMapping(join(__dirname, '..', '..', 'mappings', 'dialogflow-agent-assist.yaml'))
const setup = mapping.audio!.setup!

function inputFor(contactId: string, params: Record<string, unknown>, url: string) {
  return {
    init: {},
    leg: { id: `leg-${contactId}`, route: 'df', perspective: 'TX', contactId, busNo: '4594', requestId: null },
    route: { name: 'df', params, checksToken: false },
    upstream: { name: 'a', audio: url, credential: null, hasCredential: false }
  }
}

t.test('a shared claim whose maker is gone is taken over: the step is made once, by the leg that took it', async t => {
  const df = await startDialogflow({})
  t.teardown(() => df.close())
  const store = new MemoryStore('i1')
  const contact = 'dialogflow-agent-assist:4594:1'
  // A claim left by a leg that died mid-call: `pending:<id>:<until>`, its until long past.
  await store.swapShared(contact, 'conversation', null, 'pending:gone:1', 60_000)
  const target = { url: df.url, credential: null, headers: {} }
  const scope = { store, clock: systemClock, contact, shareMs: 60_000 }
  const input = inputFor('1', { project: 'p', conversationProfile: 'c' }, df.url)
  const out = await runSteps(setup, input, target, scope)
  t.ok(out.ok, JSON.stringify(out))
  t.equal(df.conversations.length, 1, 'the conversation was made, by the leg that took the claim over')
  const held = await store.swapShared(contact, 'conversation', null, null, 60_000)
  t.match(held, /^done:/, 'the result replaced the dead claim in the store')
  const again = await runSteps(setup, input, target, scope)
  t.ok(again.ok)
  t.equal(df.conversations.length, 1, 'a later leg reads it back: no second conversation')
  t.same(
    df.calls.map(c => c.method),
    ['Conversations/CreateConversation', 'Participants/CreateParticipant'],
    'each shared step called once'
  )
})

t.test('a refused call is a status failure naming its step and the gRPC code; its claim is given up', async t => {
  const df = await startDialogflow({})
  t.teardown(() => df.close())
  const store = new MemoryStore('i1')
  const contact = 'dialogflow-agent-assist:4594:2'
  const target = { url: df.url, credential: null, headers: {} }
  const scope = { store, clock: systemClock, contact, shareMs: 60_000 }
  // A profile name in another project's form: the emulator refuses it as the API does (INVALID_ARGUMENT).
  const input = inputFor('2', { project: 'p', conversationProfile: 'not/a/profile' }, df.url)
  const out = await runSteps(setup, input, target, scope)
  t.match(out, { ok: false, failure: { kind: 'status', step: 'conversation', code: 3 } })
  t.equal(await store.swapShared(contact, 'conversation', null, null, 60_000), null, 'no claim left behind')
})
