import type { HttpRequest, HttpResponse } from 'uWebSockets.js'
import { CODES, logLevelOf, type ErrorCode } from '../errors'
import type { Logger } from '../telemetry/log'
import type { LogLimiter } from '../telemetry/log-limit'
import { sendProblem } from './http'

/** What logging a refusal needs: the logger and the flood limiter (telemetry/log-limit.ts). */
export interface RefusalLog {
  log: Logger
  logLimit: LogLimiter
}

/** The client's address as uWS shows it (copied out of the response). */
export function addressOf(res: HttpResponse): string {
  return Buffer.from(res.getRemoteAddressAsText()).toString('utf8')
}

/**
 * One line for a refusal anyone can cause (an unknown path, a refused upgrade, an admin request without
 * its token): at the code's level, with the client's address, rate-limited per code.
 */
export function logRefusal(r: RefusalLog, event: string, code: ErrorCode, fields: Record<string, unknown>): void {
  if (!r.logLimit.allow(code)) return
  r.log[logLevelOf(code)]({ event, code, ...fields }, CODES[code].text)
}

/** A listener's catch-all: 404 NOT_FOUND, and a `not_found` line (address, method, path), rate-limited. */
export function notFound(r: RefusalLog, listener: string): (res: HttpResponse, req: HttpRequest) => void {
  return (res, req) => {
    notFoundLine(r, listener, res, req)
    sendProblem(res, 'NOT_FOUND')
  }
}

/** The `not_found` line alone (the public listener answers its 404 itself). */
export function notFoundLine(r: RefusalLog, listener: string, res: HttpResponse, req: HttpRequest): void {
  if (!r.logLimit.allow('NOT_FOUND')) return
  const query = req.getQuery()
  r.log.info(
    {
      event: 'not_found',
      code: 'NOT_FOUND',
      listener,
      address: addressOf(res),
      method: req.getMethod().toUpperCase(),
      // The path only: a query string may carry a credential.
      path: req.getUrl().slice(0, 200),
      query: query !== undefined && query !== '' ? true : undefined
    },
    CODES.NOT_FOUND.text
  )
}
