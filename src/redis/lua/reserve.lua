
-- A reservation of GCRA for one key (KEYS[1]): `Gcra::reserve` in whole microseconds since the
-- Unix epoch, the model `RedisGcra::reserve`. The request is admitted now into the key's
-- schedule, to proceed after a wait of at most `max_wait`.
--
-- ARGV[3]  the emission interval, microseconds
-- ARGV[4]  the tolerance (burst × interval), microseconds
-- ARGV[5]  the burst
-- ARGV[6]  the cost, at most the burst
-- ARGV[7]  the longest wait, microseconds; capped at 2^52 less the tolerance, which keeps the
--          stored TAT (now + tolerance + wait) below 2^53
--
-- Reply: {1, wait, TAT before, TAT after} for a reservation, {0, retry_after, TAT, TAT} for a
-- refusal (the wait beyond `max_wait`).
local interval = tonumber(ARGV[3])
local tolerance = tonumber(ARGV[4])
local burst = tonumber(ARGV[5])
local key = KEYS[1]
local cost = integer(ARGV[6], burst)
local max_wait = integer(ARGV[7], 9007199254740991)
if not (cost and max_wait) then
    return redis.error_reply('tollgate: a reservation of ' .. tostring(ARGV[6]) ..
        ' waiting ' .. tostring(ARGV[7]) .. ' is not one the burst of ' .. ARGV[5] .. ' allows')
end
max_wait = math.min(max_wait, 4503599627370496 - tolerance)
local tat = integer(redis.call('GET', key) or '0', 9007199254740991)
if not tat then
    return not_a_state(key, 'GCRA')
end
local now = now_us
if cost == 0 then
    return {1, 0, tat, tat}
end
-- As in `decide`: the latest TAT with room for `cost` now.
local latest = now + (tolerance - cost * interval)
local wait = 0
local new_tat
if tat <= latest then
    new_tat = math.max(tat, now) + cost * interval
else
    wait = tat - latest
    if wait > max_wait then
        return {0, wait - max_wait, tat, tat}
    end
    new_tat = now + tolerance + wait
end
if injected then
    redis.call('SET', key, string.format('%.0f', new_tat))
else
    redis.call('SET', key, string.format('%.0f', new_tat), 'PX', div(new_tat - now + 999, 1000))
end
return {1, wait, tat, new_tat}
