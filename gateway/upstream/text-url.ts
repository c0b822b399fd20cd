/**
 * Where a text replica's requests go, in one place: the text hook's calls (http-call.ts) and an `http`
 * health probe aimed at the text URL (mapping/health.ts) build their URLs here, so a probe lands under
 * the same path prefix as the requests it vouches for.
 *
 * The replica's `text` URL is a base, as an OpenAI SDK's `baseURL` is (openai-node src/client.ts
 * `buildURL`: the resource path is appended to the base, one slash between): a mapping path is appended
 * to the base's path, never resolved against it (RFC 3986 resolution would drop a prefix such as `/v1`).
 */
export interface TextBase {
  /** scheme://host[:port] */
  readonly origin: string
  /** The base's path without trailing slashes ("" for none): `/v1`, `/proxy/openai/v1`. */
  readonly basePath: string
  /** The base's query ("" or `?…`), added to a path that has none of its own. */
  readonly search: string
}

/** The parts of a replica's text URL. Throws a TypeError for a string that is not a URL (config validation prevents it). */
export function textBase(url: string): TextBase {
  const u = new URL(url)
  return { origin: u.origin, basePath: u.pathname.replace(/\/+$/, ''), search: u.search }
}

/**
 * The request target (path and query) of `path` on `base`: the base's path, then `path` (a mapping
 * path, starting with "/"), then the base's query unless `path` has one. null or "": the base itself.
 */
export function textTarget(base: TextBase, path: string | null): string {
  if (path === null || path === '') return base.basePath === '' ? `/${base.search}` : base.basePath + base.search
  return base.basePath + path + (path.includes('?') ? '' : base.search)
}

/** The whole URL of `path` on the text URL `url`, as a text request to that replica would use it. */
export function textUrl(url: string, path: string | null): string {
  const base = textBase(url)
  return base.origin + textTarget(base, path)
}
