import { status as Status } from '@grpc/grpc-js'
import type { Refusal } from './google-stt-checks'

// What Dialogflow ES (google.cloud.dialogflow.v2) refuses in the calls an Agent Assist integration makes,
// each check with the section of the published material it follows:
//  [participant.proto]  google/cloud/dialogflow/v2/participant.proto (googleapis, as google-proto-files ships
//                       it): StreamingAnalyzeContentRequest (the order of its messages, `enable_extended_streaming`
//                       and its restrictions, `input_audio`), AnalyzeContentRequest, CreateParticipantRequest,
//                       Participant.Role, TextInput;
//  [conversation.proto] CreateConversationRequest (parent, conversation, conversation_id and its pattern),
//                       CompleteConversationRequest, Conversation.LifecycleState;
//  [audio_config.proto] InputAudioConfig (audio_encoding, sample_rate_hertz, language_code: Required);
//  [extended]           Agent Assist "Extended streaming" (cloud.google.com/agent-assist/docs/extended-streaming):
//                       LINEAR_16 or MULAW only; the stream times out at 3 minutes and is restarted with its
//                       configuration.
// Resource names: projects/<Project ID>/locations/<Location ID>/conversations/<Conversation ID>[/participants/<ID>].

const refuse = (code: Status, details: string): Refusal => ({ code, details })

const PARENT = /^projects\/([^/]+)\/locations\/([^/]+)$/
const PROFILE = /^projects\/[^/]+\/locations\/([^/]+)\/conversationProfiles\/[^/]+$/
/** [conversation.proto CreateConversationRequest.conversation_id]: `[a-zA-Z][a-zA-Z0-9_-]*`, 3 to 64 characters. */
const CONVERSATION_ID = /^[a-zA-Z][a-zA-Z0-9_-]{2,63}$/
/** [extended]: the encodings extended streaming takes. */
export const EXTENDED_ENCODINGS = ['AUDIO_ENCODING_LINEAR_16', 'AUDIO_ENCODING_MULAW']

/** [conversation.proto CreateConversationRequest]: parent and conversation (with its profile) are Required. */
export function createConversationProblem(req: Record<string, any>, location: string): Refusal | null {
  const parent = PARENT.exec(String(req.parent ?? ''))
  if (parent === null)
    return refuse(Status.INVALID_ARGUMENT, 'parent must be projects/<Project ID>/locations/<Location ID>.')
  if (parent[2] !== location)
    return refuse(Status.INVALID_ARGUMENT, `Expected location ${location}, but found ${parent[2]} in parent.`)
  const profile = PROFILE.exec(String(req.conversation?.conversationProfile ?? ''))
  if (profile === null)
    return refuse(
      Status.INVALID_ARGUMENT,
      'conversation.conversation_profile is required: projects/<Project ID>/locations/<Location ID>/conversationProfiles/<ID>.'
    )
  if (profile[1] !== location)
    return refuse(Status.INVALID_ARGUMENT, 'The conversation profile must be in the location of the conversation.')
  if (req.conversationId !== undefined && !CONVERSATION_ID.test(req.conversationId))
    return refuse(Status.INVALID_ARGUMENT, 'conversation_id must match [a-zA-Z][a-zA-Z0-9_-]* and be 3-64 characters.')
  return null
}

/** [participant.proto CreateParticipantRequest, Participant.Role]: a role other than ROLE_UNSPECIFIED. */
export function createParticipantProblem(req: Record<string, any>): Refusal | null {
  const role = req.participant?.role
  if (role === undefined || role === 'ROLE_UNSPECIFIED')
    return refuse(Status.INVALID_ARGUMENT, 'participant.role is required (HUMAN_AGENT, AUTOMATED_AGENT or END_USER).')
  return null
}

/** [participant.proto AnalyzeContentRequest, TextInput]: a text input with its text and language_code. */
export function analyzeContentProblem(req: Record<string, any>): Refusal | null {
  const t = req.textInput
  if (t === undefined)
    return refuse(
      Status.INVALID_ARGUMENT,
      'The emulator analyzes text_input only (one of the input oneof is required).'
    )
  if (typeof t.text !== 'string' || t.text === '')
    return refuse(Status.INVALID_ARGUMENT, 'text_input.text is required.')
  if (typeof t.languageCode !== 'string' || t.languageCode === '')
    return refuse(Status.INVALID_ARGUMENT, 'text_input.language_code is required.')
  return null
}

/**
 * The first StreamingAnalyzeContent request [participant.proto StreamingAnalyzeContentRequest]: it "must contain
 * participant, config" and "must not contain input"; [audio_config.proto InputAudioConfig] audio_encoding,
 * sample_rate_hertz and language_code are Required; with enable_extended_streaming, [extended] and the field's
 * comment: LINEAR_16 or MULAW only ("InvalidArgument Error will be returned").
 */
export function firstStreamingProblem(req: Record<string, any>): Refusal | null {
  if (typeof req.participant !== 'string' || req.participant === '')
    return refuse(Status.INVALID_ARGUMENT, 'The first request must contain participant.')
  if (req.inputAudio !== undefined || req.inputText !== undefined || req.inputDtmf !== undefined)
    return refuse(Status.INVALID_ARGUMENT, 'The first request must not contain input (audio before config).')
  if (req.textConfig !== undefined) return null
  const c = req.audioConfig as Record<string, any> | undefined
  if (c === undefined) return refuse(Status.INVALID_ARGUMENT, 'The first request must contain a config (audio_config).')
  if (c.audioEncoding === undefined || c.audioEncoding === 'AUDIO_ENCODING_UNSPECIFIED')
    return refuse(Status.INVALID_ARGUMENT, 'audio_config.audio_encoding is required.')
  if (req.enableExtendedStreaming === true && !EXTENDED_ENCODINGS.includes(c.audioEncoding))
    return refuse(
      Status.INVALID_ARGUMENT,
      `Extended streaming does not support ${c.audioEncoding}: LINEAR_16 or MULAW.`
    )
  if (typeof c.sampleRateHertz !== 'number' || c.sampleRateHertz <= 0)
    return refuse(Status.INVALID_ARGUMENT, 'audio_config.sample_rate_hertz is required.')
  if (typeof c.languageCode !== 'string' || c.languageCode === '')
    return refuse(Status.INVALID_ARGUMENT, 'audio_config.language_code is required.')
  return null
}

/** A later request [participant.proto StreamingAnalyzeContentRequest]: after audio_config, input_audio only. */
export function laterStreamingProblem(req: Record<string, any>): Refusal | null {
  if (req.audioConfig !== undefined || req.textConfig !== undefined)
    return refuse(Status.INVALID_ARGUMENT, 'Only the first request may contain a config.')
  if (req.inputAudio === undefined)
    return refuse(Status.INVALID_ARGUMENT, 'Every request after an audio_config must contain input_audio.')
  return null
}
