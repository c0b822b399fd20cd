import t from 'tap'
import { join } from 'node:path'
import { initMessage } from '../../gateway/tools/simulate'
import { startDialogflow } from '../../gateway/tools/vendors/dialogflow'
import { playNumbered } from '../helpers/audio'
import { platformLeg, startGateway, until } from '../helpers/gateway'
import { utterance } from '../helpers/tls'

// A contact's Dialogflow conversation (made once by the shipped mappings/dialogflow-agent-assist.yaml's shared
// setup steps, read back by its other legs and its chat) is its tenant's: two tenants of one route naming the same
// busNo and contactId get a conversation each, and neither tenant's leg or chat reaches the other's. The same rule
// as every key of a call (docs/concepts/security.md). Through `serve` as it ships (2 workers), against the
// Dialogflow emulator built from the official protos (gateway/tools/vendors/dialogflow.ts).

const MAPPING = join(__dirname, '..', '..', 'mappings', 'dialogflow-agent-assist.yaml')
const CREDENTIALS = {
  ACME_AUDIO: 'acme-audio-credential-0123',
  ACME_TEXT: 'acme-text-credential-0123',
  GLOBEX_AUDIO: 'globex-audio-credential-4567',
  GLOBEX_TEXT: 'globex-text-credential-4567'
}
const CONTACT = 934201
const BUS = 4594

t.test("two tenants naming the same contact: a conversation each, neither's audio or chat in the other's", async t => {
  const df = await startDialogflow({ transcribeFrames: true, resultEveryMs: 1000 })
  t.teardown(() => df.close())
  const gw = await startGateway(
    t,
    {
      tenants: {
        acme: { credentials: { audio: ['${ACME_AUDIO}'], text: ['${ACME_TEXT}'] } },
        globex: { credentials: { audio: ['${GLOBEX_AUDIO}'], text: ['${GLOBEX_TEXT}'] } }
      },
      routes: {
        df: {
          mapping: MAPPING,
          tenants: ['acme', 'globex'],
          params: { project: 'demo-project', conversationProfile: 'profile-1' },
          upstreams: [{ name: 'a', audio: df.url, text: df.url }]
        }
      }
    },
    CREDENTIALS
  )
  // acme's agent leg first: its conversation exists before globex names the same contact.
  const acme = platformLeg(
    t,
    gw.url('/audio/df'),
    initMessage({ token: CREDENTIALS.ACME_AUDIO, contactId: CONTACT, busNo: BUS, perspective: 'RX' })
  )
  t.equal((await acme.answer).command, 'CONNECTED', "acme's leg connects")
  t.ok(await until(() => df.conversations.length === 1, 15_000), "acme's conversation is made")
  const globex = platformLeg(
    t,
    gw.url('/audio/df'),
    initMessage({ token: CREDENTIALS.GLOBEX_AUDIO, contactId: CONTACT, busNo: BUS, perspective: 'RX' })
  )
  t.equal((await globex.answer).command, 'CONNECTED', "globex's leg for the same contact connects")
  await playNumbered([acme, globex], 0, 60)
  const chat = async (authorization: string, messageBody: string): Promise<Record<string, any>> => {
    const res = await fetch(gw.url('/text/df'), {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization },
      body: JSON.stringify(utterance({ contactId: CONTACT, busNo: BUS, messageBody }))
    })
    const body = (await res.json()) as Record<string, any>
    t.equal(res.status, 200, JSON.stringify(body))
    return body
  }
  const acmeChat = await chat(CREDENTIALS.ACME_TEXT, 'acme: my order is late')
  const globexChat = await chat(CREDENTIALS.GLOBEX_TEXT, 'globex: reset my password')

  t.equal(df.conversations.length, 2, 'a conversation per tenant, not one for the contact')
  const [first, second] = df.conversations
  t.equal(acmeChat.conversation, first?.name, "acme's chat went into acme's conversation (made first)")
  t.equal(globexChat.conversation, second?.name, "globex's chat went into its own")
  t.not(globexChat.conversation, acmeChat.conversation, "globex's answer does not name acme's conversation")
  const chats = (c: typeof first) => (c?.messages ?? []).filter(m => m.via === 'chat').map(m => m.text)
  t.same(chats(first), ['acme: my order is late'], "acme's conversation holds acme's chat only")
  t.same(chats(second), ['globex: reset my password'], "globex's holds globex's only")
  for (const c of [first, second])
    t.ok(
      c?.messages.some(m => m.via === 'audio' && m.role === 'HUMAN_AGENT'),
      `${c?.name}: its own tenant's agent audio`
    )
  t.same(
    df.calls.filter(x => x.status !== 'OK'),
    [],
    'the emulator refused none of the calls'
  )
  // Each tenant's conversation ends with its own last leg: globex's leg ending leaves acme's in progress.
  globex.ws.close(1000)
  t.ok(await until(() => second?.state === 'COMPLETED', 15_000), "globex's last leg ended: its conversation completed")
  t.equal(first?.state, 'IN_PROGRESS', "acme's goes on")
  acme.ws.close(1000)
  t.ok(await until(() => first?.state === 'COMPLETED', 15_000), "acme's too, at its own last leg")
})
