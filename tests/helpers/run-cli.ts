// Runs the CLI from source (under tap's TypeScript loader) so tests need no build step.
import { main } from '../../gateway/cli'
main(process.argv.slice(2)).then(
  code => {
    if (code >= 0) process.exitCode = code
  },
  err => {
    console.error(err)
    process.exitCode = 1
  }
)
