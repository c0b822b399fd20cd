import t, { type Test } from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { initMessage } from '../../gateway/tools/simulate'
import { type DialogflowEmulator, startDialogflow } from '../../gateway/tools/vendors/dialogflow'
import { framesFinals, finalsProblems, playNumbered } from '../helpers/audio'
import { AUDIO_TOKEN, platformLeg, type PlatformLegClient, startGateway, TEXT_TOKEN, until } from '../helpers/gateway'
import { utterance } from '../helpers/tls'
import { runCli } from '../helpers/cli'
import { checkRotatedStreams, mappingCopy } from '../helpers/grpc'

// Issue 34 item 3 from outside, through `serve` as it ships (2 workers) and the shipped
// mappings/dialogflow-agent-assist.yaml, against the Dialogflow emulator built from the official protos
// (gateway/tools/vendors/dialogflow.ts; its checks follow participant.proto's StreamingAnalyzeContentRequest,
// AnalyzeContentRequest and CreateParticipantRequest, conversation.proto's CreateConversationRequest, and Agent
// Assist's "Extended streaming": MULAW or LINEAR_16, results and suggestions after each final, 3 minutes).

const MAPPING = join(__dirname, '..', '..', 'mappings', 'dialogflow-agent-assist.yaml')
const PARAMS = { project: 'demo-project', conversationProfile: 'profile-1' }

async function emulator(t: Test, maxStreamAudioMs?: number): Promise<DialogflowEmulator> {
  const e = await startDialogflow({ transcribeFrames: true, resultEveryMs: 1000, maxStreamAudioMs })
  t.teardown(() => e.close())
  return e
}

function route(mapping = MAPPING, upstream = '') {
  return {
    routes: {
      df: {
        mapping,
        auth: { audio: ['${AUDIO_TOKEN}'], text: ['${TEXT_TOKEN}'] },
        params: PARAMS,
        upstreams: [{ name: 'a', audio: upstream, text: upstream }]
      }
    }
  }
}

const types = (leg: PlatformLegClient): string[] => [...new Set(leg.messages.map(m => String(m.messageType)))]

t.test(
  "a call's two legs and its chat are one conversation: transcripts and suggestions reach the platform, the conversation is completed at the end",
  async t => {
    const df = await emulator(t)
    const gw = await startGateway(t, route(MAPPING, df.url))
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
    // The TX leg's stream is its END_USER participant's (the two legs' streams open in either order).
    t.ok(await until(() => df.streams.some(s => s.role === 'END_USER' && s.ended === 'OK')), 'TX stream over')
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

t.test(
  'a stream restarted before its limit (20 s of extended streaming here, a new stream after 15 s, audio sent at 5× real time): none timed out, no frame missing, no final repeated',
  async t => {
    const mapping = mappingCopy(t, MAPPING, 'rotateAfterAudioSeconds: 170', 'rotateAfterAudioSeconds: 15')
    const df = await emulator(t, 20_000)
    const gw = await startGateway(t, route(mapping, df.url))
    const leg = platformLeg(
      t,
      gw.url('/audio/df'),
      initMessage({ token: AUDIO_TOKEN, contactId: 934102, busNo: 4594, perspective: 'TX' })
    )
    t.equal((await leg.answer).command, 'CONNECTED')
    const TOTAL = 3000 // 60 s of call
    await playNumbered([leg], 0, TOTAL, undefined, 5)
    const finals = () => framesFinals(leg.messages, 'duration')
    // The last stream's cadence starts where it took over: its last whole second ends within 50 frames of the end.
    t.ok(await until(() => finals().some(f => f.to >= TOTAL - 50), 10_000), 'finals reach the last second')
    const p = finalsProblems(finals())
    t.same(p.twice, [], 'no frame in two finals: no final repeated across a restart')
    t.same(p.missing, [], `no frame missing up to the last final (${p.last})`)
    t.ok(p.last >= TOTAL - 50, `finals up to frame ${p.last}`)
    leg.ws.close(1000)
    t.ok(await until(() => df.streams.every(s => s.ended !== null), 15_000), 'every stream ended')
    t.ok(df.streams.length >= 4, `a new stream every 15 s of audio (${df.streams.length} streams)`)
    checkRotatedStreams(t, df.streams, 20_000, TOTAL * 160)
    t.ok(
      df.streams.every(s => s.extended),
      'extended streaming throughout'
    )
    t.equal(
      new Set(df.streams.map(s => s.participant)).size,
      1,
      'every stream is the same participant: the restart reuses the shared setup'
    )
    t.equal(df.conversations.length, 1, 'one conversation')
    t.ok(
      gw.logs.lines.some(l => l.event === 'rotated'),
      'the gateway logged its restarts'
    )
  }
)

t.test(
  'check holds the setup, teardown, text setup and text requests to their messages: a field a message does not have is a problem at its line and column',
  async t => {
    const dir = t.testdir({})
    const shipped = readFileSync(MAPPING, 'utf8')
    const typos: [string, string, string, string][] = [
      // [written, mistyped, the problem's pointer, the message]
      ['{ "role": leg.perspective', '{ "roles": leg.perspective', '/audio/setup/1/request', 'Participant'],
      [
        '{ "name": steps.conversation.name }',
        '{ "nam": steps.conversation.name }',
        '/audio/teardown/0/request',
        'CompleteConversationRequest'
      ],
      ['{ "role": request.participantId', '{ "roles": request.participantId', '/text/setup/1/request', 'Participant'],
      ['"textInput": {', '"textInputs": {', '/text/request/body', 'AnalyzeContentRequest']
    ]
    let bad = shipped
    for (const [from, to] of typos) {
      t.equal(bad.split(from).length, 2, `written once: ${from}`)
      bad = bad.replace(from, to)
    }
    writeFileSync(join(dir, 'bad.yaml'), bad)
    writeFileSync(
      join(dir, 'gw.yaml'),
      `routes:\n  df:\n    mapping: bad.yaml\n    params: { project: p, conversationProfile: c }\n    upstreams:\n      - { name: a, audio: "grpcs://dialogflow.googleapis.com", text: "grpcs://dialogflow.googleapis.com" }\n`
    )
    const out = await runCli(['check', '--config', join(dir, 'gw.yaml')])
    t.equal(out.code, 2, 'check fails')
    const lines = bad.split('\n')
    for (const [, to, pointer, message] of typos) {
      const field = /"(\w+)"/.exec(to)![1]!
      const line = lines.findIndex(l => l.includes(to)) + 1
      const col = (lines[line - 1] ?? '').indexOf(`"${field}"`) + 2
      t.match(
        out.stdout + out.stderr,
        `bad.yaml:${line}:${col}: ${pointer}: google.cloud.dialogflow.v2.${message} has no field "${field}"`,
        `${pointer}: the field, its message, and where its name is written`
      )
    }
    const good = join(dir, 'good.yaml')
    writeFileSync(good, shipped)
    writeFileSync(join(dir, 'gw.yaml'), readFileSync(join(dir, 'gw.yaml'), 'utf8').replace('bad.yaml', 'good.yaml'))
    const ok = await runCli(['check', '--config', join(dir, 'gw.yaml')])
    t.equal(ok.code, 0, `the shipped mapping is check-clean: ${ok.stdout}${ok.stderr}`)
  }
)

t.test(
  'a MIX leg is neither role: refused with MAPPING_FAILED before a conversation is made, the reason logged',
  async t => {
    const df = await emulator(t)
    const gw = await startGateway(t, route(MAPPING, df.url))
    const leg = platformLeg(
      t,
      gw.url('/audio/df'),
      initMessage({ token: AUDIO_TOKEN, contactId: 934103, busNo: 4594, perspective: 'MIX' })
    )
    t.match(await leg.answer, { command: 'ERROR', messageType: 'MAPPING_FAILED' })
    t.ok(
      await until(() =>
        gw.logs.lines.some(
          l => l.event === 'mapping_error' && String(l.error ?? l.msg).includes('a MIX leg is refused')
        )
      ),
      'the log says why'
    )
    t.equal(df.conversations.length, 0, 'no conversation made')
    t.same(df.calls, [], 'no call made')
  }
)
