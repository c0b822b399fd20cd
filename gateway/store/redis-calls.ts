import { aged } from './local-calls'
import type { CallRecord } from './port'
import { REFRESH_BATCH, type StoreOp } from './redis-options'

/**
 * Publish call records (KEYS: each record's contact hash; ARGV[1]: TTL ms, then each record's leg id and
 * JSON): each field holds `{"until":…,"at":…,"r":<record>}` by Redis's own clock, so instances whose
 * clocks disagree still agree on what has expired; the hash lives while anyone refreshes it.
 */
const PUBLISH = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local ttl = tonumber(ARGV[1])
local index = KEYS[#KEYS]
for i = 1, #KEYS - 1 do
  local k = KEYS[i]
  redis.call('HSET', k, ARGV[2 * i], '{"until":' .. (now + ttl) .. ',"at":' .. now .. ',"r":' .. ARGV[2 * i + 1] .. '}')
  if redis.call('PTTL', k) < ttl then redis.call('PEXPIRE', k, ttl) end
  redis.call('ZADD', index, now + ttl, ARGV[#ARGV - #KEYS + 1 + i])
end
return 1`

/** The contacts with records that may be live (KEYS[1]: the index; ARGV[1]: how many at most), expired ones pruned. */
const LIST = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]))`

/** A contact's unexpired records, with Redis's clock: {now, field, value, field, value…}; expired fields go. */
const FIND = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local all = redis.call('HGETALL', KEYS[1])
local out = {now}
for i = 1, #all, 2 do
  local untilMs = tonumber(string.match(all[i + 1], '^{"until":(%d+)'))
  if untilMs == nil or untilMs <= now then redis.call('HDEL', KEYS[1], all[i])
  else out[#out + 1] = all[i + 1] end
end
return out`

/** What of the Redis client the call records use (store/redis.ts owns the client: the only ioredis importer). */
export interface EvalClient {
  eval: (script: string, numKeys: number, ...args: (string | number)[]) => Promise<unknown>
  hdel: (key: string, ...fields: string[]) => Promise<unknown>
}

/**
 * The call records of `GET /admin/calls` in Redis: one hash per contact (`calls:<contactId>`), one field
 * per leg. Fire-and-forget writes, counted on failure like every store command.
 */
export class RedisCalls {
  constructor(
    private readonly redis: EvalClient,
    private readonly k: (s: string) => string,
    private readonly failed: (op: StoreOp, err: unknown) => void
  ) {}

  publish(records: readonly CallRecord[], ttlMs: number): void {
    const ttl = String(Math.max(1, Math.round(ttlMs)))
    for (let i = 0; i < records.length; i += REFRESH_BATCH) {
      const batch = records.slice(i, i + REFRESH_BATCH)
      // The contacts' hashes, then the index of contacts (`calls`, scored by expiry) the status page lists from.
      const keys = [...batch.map(r => this.k(`calls:${r.contactId}`)), this.k('calls')]
      const args = [...batch.flatMap(r => [r.legId, JSON.stringify(r)]), ...batch.map(r => r.contactId)]
      this.redis.eval(PUBLISH, keys.length, ...keys, ttl, ...args).catch(err => this.failed('publish_calls', err))
    }
  }

  remove(contactId: string, legId: string): void {
    this.redis.hdel(this.k(`calls:${contactId}`), legId).catch(err => this.failed('remove_call', err))
  }

  /** The records of the first `contacts` contacts of the index that still have any. */
  async list(contacts: number): Promise<{ calls: CallRecord[]; more: boolean }> {
    let ids: string[]
    try {
      ids = (await this.redis.eval(LIST, 1, this.k('calls'), contacts)) as string[]
    } catch (err) {
      this.failed('find_calls', err)
      throw new Error('Redis did not answer: the fleet’s calls cannot be listed')
    }
    const found = await Promise.all(ids.slice(0, contacts).map(async id => await this.find(id)))
    return { calls: found.flat(), more: ids.length > contacts }
  }

  async find(contactId: string): Promise<CallRecord[]> {
    let reply: unknown
    try {
      reply = await this.redis.eval(FIND, 1, this.k(`calls:${contactId}`))
    } catch (err) {
      this.failed('find_calls', err)
      throw new Error('Redis did not answer: the fleet’s calls cannot be listed')
    }
    const [now, ...values] = reply as [number, ...string[]]
    const out: CallRecord[] = []
    for (const v of values) {
      try {
        const { at, r } = JSON.parse(v) as { at: number; r: CallRecord }
        out.push(aged({ ...r, at }, now))
      } catch {
        /* a foreign value under our key: left out */
      }
    }
    return out
  }
}
