import {
  USAGE,
  USAGES,
  UsageError,
  endQuietlyWhenStdoutCloses,
  help,
  parseArgsCommand,
  type Command
} from './cli-usage'
import { ConfigError } from './errors'
import { version } from './paths'

// The command line. Each command loads its modules when it runs (cli-serve.ts: serve and check;
// cli-tools.ts: simulate and vendor; cli-calls.ts: calls), so --help, --version and usage errors answer at once.

export async function main(argv: string[]): Promise<number> {
  endQuietlyWhenStdoutCloses()
  const [command, ...rest] = argv
  try {
    switch (command) {
      case 'serve':
        return await (await import('./cli-serve')).cmdServe(rest)
      case 'check':
        return await (await import('./cli-serve')).cmdCheck(rest)
      case 'simulate':
        return await (await import('./cli-tools')).cmdSimulate(rest)
      case 'vendor':
        return await (await import('./cli-tools')).cmdVendor(rest)
      case 'calls':
        return await (await import('./cli-calls')).cmdCalls(rest)
      case '--version':
        console.log(version())
        return 0
      case '-h':
      case '--help':
      case 'help':
        if (rest[0] !== undefined && (rest[0] in USAGES || rest[0] === 'simulate'))
          return help(rest[0] as Command | 'simulate')
        return help(null)
      case undefined:
        throw new UsageError('a command is required')
      default:
        throw new UsageError(`unknown command ${command}`)
    }
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message)
      return 2
    }
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      const cmd = err instanceof UsageError ? err.command : parseArgsCommand(command, rest)
      const usage =
        cmd === null
          ? USAGE
          : cmd === 'simulate'
            ? `${USAGES['simulate audio']}\n${USAGES['simulate text']}`
            : USAGES[cmd]
      console.error(`assist-gateway: ${(err as Error).message}\n${usage}`)
      return 2
    }
    console.error(`assist-gateway: ${(err as Error).message}`)
    return 1
  }
}
