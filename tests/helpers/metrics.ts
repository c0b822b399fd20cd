// Reading Prometheus text (a /metrics answer, or Metrics' exposition) in tests, said once.

/** The value of each sample line of `name` in Prometheus text, by its label text (`''` for none). */
export function samples(text: string, name: string): Map<string, number> {
  const out = new Map<string, number>()
  for (const line of text.split('\n')) {
    const m = /^(\S+?)(\{[^}]*\})? (\S+)$/.exec(line)
    if (m !== null && m[1] === name) out.set(m[2] ?? '', Number(m[3]))
  }
  return out
}

/** The value of `series` (its name and labels, exactly as exposed) at the /metrics URL `url` now; 0 when it is not there. */
export async function seriesAt(url: string, series: string, init: RequestInit = {}): Promise<number> {
  const text = await (await fetch(url, init)).text()
  const line = text.split('\n').find(l => l.startsWith(`${series} `))
  return line === undefined ? 0 : Number(line.slice(series.length + 1))
}
