import t, { type Test } from 'tap'
import { join } from 'node:path'
import { initMessage } from '../../gateway/tools/simulate'
import { type DialogflowEmulator, startDialogflow } from '../../gateway/tools/vendors/dialogflow'
import { playNumbered } from '../helpers/audio'
import { AUDIO_TOKEN, platformLeg, type PlatformLegClient, startGateway, TEXT_TOKEN, until } from '../helpers/gateway'
import { utterance } from '../helpers/tls'

// Issue 34 item 3 from outside, through `serve` as it ships (2 workers) and the shipped
// mappings/dialogflow-agent-assist.yaml, against the Dialogflow emulator built from the official protos
// (gateway/tools/vendors/dialogflow.ts; its checks follow participant.proto's StreamingAnalyzeContentRequest,
// AnalyzeContentRequest and CreateParticipantRequest, conversation.proto's CreateConversationRequest, and Agent
// Assist's "Extended streaming": MULAW or LINEAR_16, results and suggestions after each final, 3 minutes).

const MAPPING = join(__dirname, '..', '..', 'mappings', 'dialogflow-agent-assist.yaml')
const PARAMS = { project: 'demo-project', conversationProfile: 'profile-1' }

async function emulator(t: Test): Promise<DialogflowEmulator> {
  const e = await startDialogflow({ transcribeFrames: true, resultEveryMs: 1000 })
  t.teardown(() => e.close())
  return e
}

const types = (leg: PlatformLegClient): string[] => [...new Set(leg.messages.map(m => String(m.messageType)))]

t.test(
  "a call's two legs and its chat are one conversation: transcripts and suggestions reach the platform, the conversation is completed at the end",
  async t => {
    const df = await emulator(t)
    const gw = await startGateway(t, {
      routes: {
        df: {
          mapping: MAPPING,
          auth: { audio: ['${AUDIO_TOKEN}'], text: ['${TEXT_TOKEN}'] },
          params: PARAMS,
          upstreams: [{ name: 'a', audio: df.url, text: df.url }]
        }
      }
    })
    const init = (perspective: string) =>
      initMessage({ token: AUDIO_TOKEN, contactId: 934101, busNo: 4594, perspective })
    // Both legs open together: the conversation is made once, each leg gets its own participant.
    const tx = platformLeg(t, gw.url('/audio/df'), init('TX'))
    const rx = platformLeg(t, gw.url('/audio/df'), init('RX'))
    t.equal((await tx.answer).command, 'CONNECTED')
    t.equal((await rx.answer).command, 'CONNECTED')
    await playNumbered([tx, rx], 0, 150)
    t.ok(
      await until(() => tx.messages.some(m => m.messageType === 'ARTICLE_SUGGESTION'), 15_000),
      'suggestions reach the platform while the call goes on (extended streaming)'
    )
    const chat = await fetch(gw.url('/text/df'), {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: TEXT_TOKEN },
      body: JSON.stringify(utterance({ contactId: 934101, busNo: 4594, messageBody: 'I was charged twice.' }))
    })
    const answer = (await chat.json()) as Record<string, any>
    t.equal(chat.status, 200, JSON.stringify(answer))
    t.equal(df.conversations.length, 1, 'one conversation for the two legs and the chat')
    const c = df.conversations[0]!
    t.equal(answer.conversation, c.name, 'the chat went into the call’s conversation')
    t.same(answer.faqAnswers[0]?.answer, 'Answer to: I was charged twice.', 'its suggestions come back')
    t.same(
      Object.values(c.participants).sort(),
      ['END_USER', 'HUMAN_AGENT'],
      'one participant per role: the patron’s chat is the END_USER of the customer’s audio'
    )
    t.ok(
      c.messages.some(m => m.via === 'chat' && m.text === 'I was charged twice.'),
      'the chat message is in it'
    )
    t.ok(
      c.messages.some(m => m.via === 'audio' && m.role === 'END_USER'),
      'the customer’s audio is in it'
    )
    t.ok(
      c.messages.some(m => m.via === 'audio' && m.role === 'HUMAN_AGENT'),
      'the agent’s audio is in it'
    )
    for (const [leg, label] of [
      [tx, 'TX'],
      [rx, 'RX']
    ] as const)
      t.ok(
        leg.messages.some(m => m.messageType === 'TRANSCRIPT' && (m.parameters as any).isFinal === true),
        `${label}: final transcripts`
      )
    t.same(
      types(tx)
        .filter(x => x.endsWith('SUGGESTION'))
        .sort(),
      ['ARTICLE_SUGGESTION', 'FAQ_SUGGESTION', 'SMART_REPLY_SUGGESTION'],
      'the customer’s words bring articles, FAQ answers and smart replies, each a message type of its own'
    )
    const roles = df.streams.map(s => s.role).sort()
    t.same(roles, ['END_USER', 'HUMAN_AGENT'], 'a stream per leg, as its participant')
    t.ok(
      df.streams.every(s => s.extended && s.refusal === null),
      'extended streaming; nothing refused'
    )
    t.same(
      df.calls.filter(x => x.status !== 'OK'),
      [],
      'the emulator refused none of the gateway’s unary calls'
    )
    t.equal(c.state, 'IN_PROGRESS', 'in progress while a leg is up')
    tx.ws.close(1000)
    t.ok(await until(() => df.streams[0]?.ended !== null && df.streams.some(s => s.ended === 'OK')), 'TX stream over')
    t.equal(c.state, 'IN_PROGRESS', 'one leg ended: the conversation goes on')
    rx.ws.close(1000)
    t.ok(await until(() => c.state === 'COMPLETED', 15_000), 'the last leg ended: the conversation is completed')
    t.same(
      df.calls.filter(x => x.method === 'Conversations/CompleteConversation').map(x => x.status),
      ['OK'],
      'completed once'
    )
  }
)
