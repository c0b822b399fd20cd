import { type ParseArgsConfig, parseArgs } from 'node:util'

/** The command line's words: usages, help, usage errors and option parsing shared by every command. */

const ENVIRONMENT =
  'Environment: GATEWAY_CONFIG, GATEWAY_WORKERS, PORT, ADMIN_PORT, REDIS_URL, LOG_LEVEL (and the ${VAR}s the config names);\n' +
  '  OTEL_* (tracing: OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER …);\n' +
  '  GATEWAY_ADMIN_TOKEN (calls: the admin token when --token is not given).'
const EXIT_CODES = 'Exit status: 0 ok, 1 runtime failure, 2 usage or config error.'

/** Each command's usage, printed by `<command> --help` (stdout, exit 0) and after a usage error (stderr, exit 2). */
export const USAGES = {
  serve: `usage: assist-gateway serve [--config FILE] [--workers N] [--watch-config]
  Run the gateway. The config (default $GATEWAY_CONFIG, else ops/gateway.yaml) is first validated as
  \`check\` does: exit 2 on any problem, 1 when serving fails, 0 after SIGTERM or SIGINT.
  --workers N: worker processes sharing the public port (default $GATEWAY_WORKERS, else the CPUs the
  container may use: its cgroup CPU quota, then the cores); 1 serves in this one process. Exit 2 when
  the memory limit (cgroup) cannot hold that many.
  --watch-config: reload, as SIGHUP does, when the config file or a mapping file it names changes
  (Kubernetes' ConfigMap update, a symlink swap, included); the same as reload.watch: true.`,
  check: `usage: assist-gateway check [--config FILE]
  Validate the config, every mapping it names (compiled and dry-run on the interface's example messages)
  and the TLS certificate, key and passphrase; print each problem as file:line:col: /pointer: message.
  Exit 0 when clean, 2 on any problem. Tenants come in two forms: an entry of tenants: (its credentials,
  token clients and limits; routes.<r>.tenants says who may use a route, absent: every tenant), and a
  route's own auth (a tenant of its own, named after the route). With tenants configured, a clean check
  prints who each route admits. A credential two tenants claim is refused (TENANT_CREDENTIAL_SHARED).`,
  'simulate audio': `usage: assist-gateway simulate audio --url URL [--token T] [--file CLIP] [--perspective TX|RX|MIX]
                                [--legs N] [--seconds S] [--insecure] [--stereo] [--contact N]
  Act as the platform: open N audio hooks (ws:// or wss://), stream the clip (mu-law or WAV) at real-time
  pace, print every message that comes back. Exit 1 when a leg was refused, never connected or was cut.
  --stereo: N contacts, each with its TX and RX legs together (2N hooks; for a route with join), the RX
  leg streaming the clip from its middle. --contact N: the first contactId (the others count up from it);
  default: a fresh one each run, so two runs are two calls, never one re-attaching to the other.`,
  'simulate text': `usage: assist-gateway simulate text --url URL --text "…" [--token T] [--auth-header]
                               [--participant patron|agent|system] [--contact-id N] [--bus-no N] [--tenant ID]
                               [--insecure]
  POST one utterance to the text hook (http:// or https://); print the status and the answer.
  Exit 1 unless the answer is a 2xx.`,
  calls: `usage: assist-gateway calls --admin URL --contact N | --tenant NAME [--token T] [--json]
  Where contact N's legs are: every live or parked leg the gateway's store knows of (one instance, its
  workers, or the fleet on Redis), from GET /admin/calls on the admin listener at URL, as a table (--json:
  the answer as it came). --tenant NAME: that tenant's legs only (alone: every contact of that tenant among
  the first 200 contacts listed; with --contact: that contact's legs of that tenant). The token: --token,
  else $GATEWAY_ADMIN_TOKEN (needed when admin.token is set). Exit 1 when the admin API cannot be reached or refuses.`,
  vendor: `usage: assist-gateway vendor --kind KIND --port N [--host H] [--result-every-frames N] [--api-key KEY]
                               [--transcribe-frames] [--max-stream-seconds S] [--location REGION]
  KIND: passthrough, json-events (demo vendors); deepgram, assemblyai, twilio-media, audiohook, amazon-transcribe,
  speechmatics, openai (strict emulators of real APIs; amazon-transcribe: --api-key <access key id>:<secret>);
  google-stt-v2 (gRPC, grpc://host:port: Speech-to-Text v2 StreamingRecognize; --max-stream-seconds: audio per
  stream before ABORTED, default 300; --location: the region its recognizers are in, default global);
  dialogflow (gRPC: Dialogflow ES Agent Assist conversations, participants, AnalyzeContent and
  StreamingAnalyzeContent; --max-stream-seconds: audio per extended stream before it times out, default 180)
  --transcribe-frames (deepgram, speechmatics, amazon-transcribe, assemblyai, audiohook, google-stt-v2, dialogflow):
  each result names the frames it heard ("frames A-B", from each 20 ms frame's marker: 4 zero bytes, then its
  number, 32-bit big-endian; per channel on a stereo session), with the vendor's own time fields
  Run a bundled vendor emulator in the foreground until SIGTERM or SIGINT (--port 0 picks a free port).`
} as const
export type Command = keyof typeof USAGES

export const USAGE = `usage: assist-gateway <command> [options]    (assist-gateway <command> --help for its options)
  serve       run the gateway
  check       validate a config, its mappings and its TLS material
  simulate    act as the platform: simulate audio | simulate text
  vendor      run a bundled vendor emulator
  calls       where a contact's legs are (instance, worker, replica, frames, gaps)
  --version   print the version
${EXIT_CODES}
${ENVIRONMENT}`

/** `--help`/`-h`, accepted by every command. */
const HELP = { help: { type: 'boolean', short: 'h', default: false } } as const

type Options = NonNullable<ParseArgsConfig['options']>
type Values<O extends Options> = ReturnType<typeof parseArgs<{ args: string[]; options: O & typeof HELP }>>['values']

/**
 * A command's options (node's parseArgs, strict, with --help/-h) parsed from its arguments: their values,
 * and `usage` to make its usage errors. Null after --help: the command's usage was printed (exit 0).
 */
export function parseCommand<const O extends Options>(
  command: Command,
  args: string[],
  options: O
): { values: Values<O>; usage: (message: string) => UsageError } | null {
  const { values } = parseArgs({ args, options: { ...options, ...HELP } })
  if ((values as { help?: boolean }).help === true) {
    help(command)
    return null
  }
  return { values: values as Values<O>, usage: message => new UsageError(message, command) }
}

export function help(command: Command | 'simulate' | null): number {
  if (command === null) console.log(USAGE)
  else if (command === 'simulate') console.log(`${USAGES['simulate audio']}\n${USAGES['simulate text']}`)
  else console.log(`${USAGES[command]}\n${EXIT_CODES}`)
  return 0
}

/** A wrong command line: exit 2 with the message and the command's usage on stderr. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly command: Command | 'simulate' | null = null
  ) {
    super(message)
  }
}

/** A whole number of at least `min` (and at most `max`), written as plain digits: "2.5", "1e3" and "abc" are refused. */
export function integer(
  s: string,
  name: string,
  min: number,
  usage: (message: string) => UsageError,
  max = Number.MAX_SAFE_INTEGER
): number {
  const n = /^\d+$/.test(s) ? Number(s) : Number.NaN
  if (!(n >= min && n <= max))
    throw usage(
      `${name} must be a whole number ${max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `${min}-${max}`}, not "${s}"`
    )
  return n
}

export function positive(s: string, name: string, usage: (message: string) => UsageError): number {
  const n = Number(s)
  if (s.trim() === '' || !Number.isFinite(n) || n <= 0) throw usage(`${name} must be a positive number, not "${s}"`)
  return n
}

export function requireUrl(s: string | undefined, protocols: string[], usage: (message: string) => UsageError): string {
  if (s === undefined) throw usage('--url is required')
  let url: URL
  try {
    url = new URL(s)
  } catch {
    throw usage(`--url ${s} is not a URL`)
  }
  if (!protocols.includes(url.protocol)) throw usage(`--url must be ${protocols.map(p => `${p}//`).join(' or ')}`)
  return s
}

let stdoutGuarded = false

/**
 * A reader that goes away (`… | head`) must not crash the CLI with an EPIPE stack trace: the output has
 * nowhere to go, so the process ends at once and quietly, with status 1 (the run did not complete).
 */
export function endQuietlyWhenStdoutCloses(): void {
  if (stdoutGuarded) return
  stdoutGuarded = true
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') console.error(`assist-gateway: stdout: ${err.message}`)
    process.exit(1)
  })
}

/** The command whose options parseArgs refused, for the usage shown under the error. */
export function parseArgsCommand(command: string | undefined, rest: string[]): Command | 'simulate' | null {
  if (command === 'simulate') return rest[0] === 'audio' || rest[0] === 'text' ? `simulate ${rest[0]}` : 'simulate'
  return command !== undefined && command in USAGES ? (command as Command) : null
}
