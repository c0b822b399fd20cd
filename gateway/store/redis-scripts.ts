// The Lua scripts of the Redis store (store/redis.ts): each runs atomically on the key it names.

/** Renew the lease only if we still hold it; take it if free. Returns 1 when held. */
export const LEAD = `
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if not v then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
return 0`

/** Set a revocation for ARGV[1] ms unless it is already held longer (a revocation only extends). */
export const REVOKE = `
local left = redis.call('PTTL', KEYS[1])
if left < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], '1', 'PX', ARGV[1]) end
return 1`

/**
 * Claim a session's owner record (ARGV: the owner's JSON, its instance, TTL ms, an instance it may
 * replace or ''): set it when free, held by the same instance (a refresh) or by the one being replaced;
 * return the record in force.
 */
export const CLAIM_OWNER = `
local v = redis.call('GET', KEYS[1])
if v then
  local held = cjson.decode(v).instance
  if held ~= ARGV[2] and held ~= ARGV[4] then return v end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return ARGV[1]`

/** Renew the TTL (ARGV[2] ms) of each owner record of KEYS that instance ARGV[1] still holds. */
export const REFRESH_OWNERS = `
for _, k in ipairs(KEYS) do
  local v = redis.call('GET', k)
  if v and cjson.decode(v).instance == ARGV[1] then redis.call('PEXPIRE', k, ARGV[2]) end
end
return 1`

/** Drop a session's owner record if the instance ARGV[1] still holds it. */
export const RELEASE_OWNER = `
local v = redis.call('GET', KEYS[1])
if v and cjson.decode(v).instance == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`

/** Drop an affinity record only if leg ARGV[1] owns it (a re-attached leg may have replaced it). */
export const DELETE_AFFINITY = `
local v = redis.call('GET', KEYS[1])
if v and cjson.decode(v).legId == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`

/** Give the prober lease up if instance ARGV[1] holds it. */
export const RELEASE_LEAD = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`

/**
 * A quota's lease (KEYS[1]: a sorted set of lease ids scored by expiry, Redis's own clock): drop expired
 * leases, then add ARGV[2] for ARGV[3] ms if fewer than ARGV[1] are live (0: no limit). Returns 1 when taken.
 */
export const TAKE_LEASE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local limit = tonumber(ARGV[1])
if limit > 0 and redis.call('ZCARD', KEYS[1]) >= limit then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`

/** Renew the leases ARGV[2..] of KEYS[1] for ARGV[1] ms, those still there only. */
export const REFRESH_LEASES = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[1]), ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1`

/**
 * One of a contact's shared values (a field of its hash), compare-and-set (ARGV: the field, expected value or
 * '' for none, new value or '' for gone, TTL ms of the hash): returns the value in force afterwards ('' for none).
 */
export const SWAP_SHARED = `
local v = redis.call('HGET', KEYS[1], ARGV[1]) or ''
if v ~= ARGV[2] then return v end
if ARGV[3] == '' then redis.call('HDEL', KEYS[1], ARGV[1]) else redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) end
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
return ARGV[3]`

/** A member (ARGV[1]) joins ('1') or leaves a group, which lives ARGV[3] ms past its last change; returns its size. */
export const COUNT_MEMBERS = `
if ARGV[2] == '1' then redis.call('SADD', KEYS[1], ARGV[1]) else redis.call('SREM', KEYS[1], ARGV[1]) end
local n = redis.call('SCARD', KEYS[1])
if n > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return n`
