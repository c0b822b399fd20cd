import { readFileSync } from 'node:fs'
import { LineCounter, parseDocument } from 'yaml'
import { ConfigError } from '../errors'
import { pointerSegments } from '../validate/compile'

// A config or mapping file as read from disk, with where each value is written in it: every problem
// `check` prints names the file's line and column (`file:line:col: /pointer: message`), the form
// editors and CI annotate.

/** A line and column in a file, both from 1. */
export interface Position {
  line: number
  col: number
}

export interface Source {
  value: unknown
  /** The node at a JSON pointer, or its nearest ancestor present in the file (a missing key: its parent). */
  where: (pointer: string) => Position | null
  /**
   * The character at `offset` of the string value at `pointer`, as written in the file: quotes, escapes,
   * block-scalar indentation and folded line breaks taken into account. Null when the pointer does not
   * name a string scalar (then use `where`).
   */
  at: (pointer: string, offset: number) => Position | null
}

type Node = { range?: [number, number, number]; type?: string; value?: unknown }

/** Parse a YAML (or JSON) file with the positions of its values; syntax errors name the line and column. */
export function readSource(path: string): Source {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    throw new ConfigError([
      { file: path, pointer: '/', message: `cannot read file (${(err as NodeJS.ErrnoException).code ?? 'error'})` }
    ])
  }
  const lines = new LineCounter()
  const doc = parseDocument(text, { prettyErrors: false, uniqueKeys: true, lineCounter: lines })
  if (doc.errors.length > 0) {
    // The first errors: after a syntax error the parser reports nearly every later token too.
    throw new ConfigError(
      doc.errors.slice(0, 3).map(e => ({
        file: path,
        pointer: '/',
        message: `YAML ${e.code}: ${e.message.split('\n')[0]}`,
        ...lines.linePos(e.pos[0])
      }))
    )
  }
  const where = (pointer: string): Position | null => {
    const path = pointerSegments(pointer === '/' ? '' : pointer)
    for (let n = path.length; n > 0; n--) {
      // Where its key is written, when it has one (an item of a list: where the item is).
      const parent = n > 1 ? doc.getIn(path.slice(0, n - 1), true) : doc.contents
      const items = (parent as { items?: { key?: { value?: unknown; range?: [number, number, number] } }[] } | null)
        ?.items
      const pair = items?.find(i => i.key !== undefined && String(i.key?.value) === path[n - 1])
      if (pair?.key?.range !== undefined) return lines.linePos(pair.key.range[0])
      const node = doc.getIn(path.slice(0, n), true) as Node | undefined
      if (node?.range !== undefined) return lines.linePos(node.range[0])
    }
    return (doc.contents as Node | null)?.range !== undefined ? lines.linePos((doc.contents as Node).range![0]) : null
  }
  const at = (pointer: string, offset: number): Position | null => {
    const node = doc.getIn(pointerSegments(pointer), true) as Node | undefined
    if (node?.range === undefined || typeof node.value !== 'string') return null
    return lines.linePos(sourceOffset(text, node as Required<Node> & { value: string }, offset))
  }
  return { value: doc.toJS({ maxAliasCount: 100 }), where, at }
}

/**
 * Where the character at `offset` of a scalar's value is in the file's text. The value is the written
 * text with characters removed (quotes, escape backslashes, indentation) or whitespace folded, so each
 * value character is found in order in the written text: whitespace matches any whitespace (a folded
 * line break), anything else itself.
 */
function sourceOffset(
  text: string,
  node: { range: [number, number, number]; type?: string; value: string },
  offset: number
): number {
  const [start, end] = node.range
  let j = start
  if (node.type === 'BLOCK_LITERAL' || node.type === 'BLOCK_FOLDED') j = text.indexOf('\n', start) + 1
  else if (node.type === 'QUOTE_DOUBLE' || node.type === 'QUOTE_SINGLE') j = start + 1
  const find = (c: string, from: number): number => {
    const space = /\s/.test(c)
    for (let k = from; k < end; k++) {
      if (space && text[k] === '\\' && node.type === 'QUOTE_DOUBLE') return k + 1
      if (space ? /\s/.test(text[k]) : text[k] === c) return k
    }
    return -1
  }
  const value = node.value
  const upTo = Math.min(offset, value.length)
  for (let i = 0; i < upTo; i++) {
    const k = find(value[i], j)
    if (k < 0) return j
    j = k + 1
  }
  if (offset >= value.length) return Math.min(j, end)
  const k = find(value[offset], j)
  return k < 0 ? j : k
}
