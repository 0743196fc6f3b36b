-- GCRA on one key: the transition of tollgate's `Gcra::decide`, in whole microseconds since the
-- Unix epoch, so that every number stays below 2^53 and is exact in Lua's doubles.
--
-- KEYS[1]  the key, whose value is its theoretical arrival time (TAT); absent is fresh
-- ARGV[1]  the emission interval, microseconds
-- ARGV[2]  the tolerance (burst × interval), microseconds
-- ARGV[3]  the burst
-- ARGV[4]  the cost, at most the burst
-- ARGV[5]  1 to peek (decide without writing), 0 to decide
-- ARGV[6]  optional: the time, for the equivalence tests; otherwise the server's TIME. A key
--          written at an injected time gets no expiry, which only a real time can set.
--
-- Reply: {allowed (0 or 1), remaining, retry_after, reset_after, burst}, times in microseconds.
-- A peek replies the request's allowed and retry_after beside the state's remaining and
-- reset_after, as `Decision::peeked` does.
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local peek = ARGV[5] == '1'
local now
if ARGV[6] then
    now = tonumber(ARGV[6])
else
    local time = redis.call('TIME')
    now = tonumber(time[1]) * 1000000 + tonumber(time[2])
end
-- Beyond 2^52 microseconds (the year 2112) a time and a tolerance no longer add up exactly.
if now >= 4503599627370496 then
    return redis.error_reply('tollgate: the time ' .. string.format('%.0f', now) .. ' microseconds is past the exact range')
end
if cost > burst then
    return redis.error_reply('tollgate: a cost of ' .. ARGV[4] .. ' exceeds the burst of ' .. ARGV[3])
end
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if not tat or tat < 0 or tat >= 9007199254740992 or tat ~= math.floor(tat) then
    return redis.error_reply('tollgate: the value of ' .. KEYS[1] .. ' is not a GCRA state')
end

-- floor(a / b) for integers below 2^53: the quotient of two doubles can round up to the next
-- integer, so it is corrected with exact products.
local function div(a, b)
    local q = math.floor(a / b)
    if q * b > a then
        q = q - 1
    elseif (q + 1) * b <= a then
        q = q + 1
    end
    return q
end

local base = math.max(tat, now)
local reset_after = base - now
local room = now + tolerance - base
local available = 0
if room > 0 then
    available = div(room, interval)
end

-- The transition: admitted iff max(TAT, now) + cost × interval <= now + tolerance, that is
-- TAT <= latest, since `now` meets the bound itself (cost <= burst).
local allowed, retry_after, new_tat = 1, 0, tat
if cost > 0 then
    local increment = cost * interval
    local latest = now + (tolerance - increment)
    if tat <= latest then
        new_tat = base + increment
    else
        allowed, retry_after = 0, tat - latest
    end
end

if peek then
    return {allowed, available, retry_after, reset_after, burst}
end
if new_tat ~= tat then
    local value = string.format('%.0f', new_tat)
    if ARGV[6] then
        redis.call('SET', KEYS[1], value)
    else
        -- Expire when the state is fresh again: at the TAT, in whole milliseconds rounded up.
        local ms = div(new_tat - now + 999, 1000)
        redis.call('SET', KEYS[1], value, 'PX', ms)
    end
    return {1, available - cost, 0, new_tat - now, burst}
end
return {allowed, available, retry_after, reset_after, burst}
