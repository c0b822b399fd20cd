import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'

/**
 * The fenced code blocks of the docs, and the marks that tell tests/integration/docs-examples.test.ts what
 * to do with a shell block (docs/how-to/develop-and-test.md, "The docs"):
 * - ```sh doc-test            run it in a fresh bash in the copy of the repository;
 * - ```sh doc-test serve=URL  start it and keep it running; it is up when URL answers 2xx;
 * - ```sh doc-test clone      the test stands in (a copy of the working tree);
 * - ```sh doc-test install    the test stands in (the checkout's node_modules);
 * - ```sh doc-skip            not run here (Docker, Kubernetes, a signal to a pid);
 * - ```text doc-output        right after a doc-test block: its expected output, `…` for any text.
 */

export const ROOT = join(__dirname, '..', '..')

export type Mark =
  | { kind: 'run' }
  | { kind: 'serve'; url: string }
  | { kind: 'clone' }
  | { kind: 'install' }
  | { kind: 'skip' }
  | { kind: 'output' }
  | { kind: 'none' }

export interface Block {
  /** The file, relative to the repository. */
  file: string
  /** 1-based line of the opening fence. */
  line: number
  lang: string
  mark: Mark
  /** The info string after the language (what the mark was read from). */
  info: string
  text: string
}

const SHELL = new Set(['sh', 'bash', 'shell', 'console'])

export function isShell(b: Block): boolean {
  return SHELL.has(b.lang)
}

function markOf(info: string): Mark | string {
  const words = info.split(/\s+/).filter(Boolean)
  if (words.length === 0) return { kind: 'none' }
  if (words[0] === 'doc-skip') return { kind: 'skip' }
  if (words[0] === 'doc-output') return words.length === 1 ? { kind: 'output' } : `unknown words after doc-output`
  if (words[0] !== 'doc-test') return { kind: 'none' }
  if (words.length === 1) return { kind: 'run' }
  if (words.length > 2) return `one option after doc-test, not ${words.slice(1).join(' ')}`
  const [option] = words.slice(1)
  if (option === 'clone') return { kind: 'clone' }
  if (option === 'install') return { kind: 'install' }
  const serve = /^serve=(https?:\/\/\S+)$/.exec(option)
  if (serve !== null) return { kind: 'serve', url: serve[1] }
  return `unknown doc-test option ${option}`
}

/** Every fenced block of a markdown file (fences of three or more backticks, indented or not). */
export function blocksOf(file: string, root = ROOT): Block[] {
  const lines = readFileSync(join(root, file), 'utf8').split('\n')
  const out: Block[] = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,})([^`]*)$/.exec(lines[i])
    if (open === null) continue
    const [, indent, fence, rest] = open
    const [lang = '', ...info] = rest.trim().split(/\s+/)
    const body: string[] = []
    let j = i + 1
    while (j < lines.length && !new RegExp(`^\\s*${fence}\\s*$`).test(lines[j])) {
      body.push(lines[j].startsWith(indent) ? lines[j].slice(indent.length) : lines[j].trimStart())
      j++
    }
    const mark = markOf(info.join(' '))
    if (typeof mark === 'string') throw new Error(`${file}:${i + 1}: ${mark}`)
    out.push({ file, line: i + 1, lang, mark, info: info.join(' '), text: body.join('\n') })
    i = j
  }
  return out
}

/** Markdown files under a folder of the repository, relative to it, sorted. */
export function markdownUnder(dir: string, root = ROOT): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true })
    .flatMap(e =>
      e.isDirectory()
        ? markdownUnder(join(dir, e.name), root)
        : e.name.endsWith('.md')
          ? [relative(root, join(root, dir, e.name))]
          : []
    )
    .sort()
}

/** The pages whose shell blocks are examples a reader runs: every one must be marked doc-test or doc-skip. */
export function examplePages(root = ROOT): string[] {
  return ['README.md', ...markdownUnder('docs/getting-started', root), ...markdownUnder('docs/how-to', root)]
}
