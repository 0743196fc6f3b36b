-- GCRA on each of KEYS: the transition of tollgate's `Gcra::decide`, in whole microseconds since
-- the Unix epoch, so that every number stays below 2^53 and is exact in Lua's doubles.
--
-- KEYS     the keys, whose values are their theoretical arrival times (TAT); absent is fresh
-- ARGV[1]  the emission interval, microseconds
-- ARGV[2]  the tolerance (burst × interval), microseconds
-- ARGV[3]  the burst
-- ARGV[4]  1 to peek (decide without writing), 0 to decide
-- ARGV[5]  the time, for the equivalence tests, or '' for the server's TIME. A key written at an
--          injected time gets no expiry, which only a real time can set.
-- ARGV[6..] the costs, one per key, each at most the burst
--
-- Reply: for each key in turn, {allowed (0 or 1), remaining, retry_after, reset_after, burst},
-- times in microseconds. A peek replies the request's allowed and retry_after beside the
-- state's remaining and reset_after, as `Decision::peeked` does. The keys are decided one after
-- another at one time, as requests in that order; a key twice is decided twice.
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local peek = ARGV[4] == '1'
local injected = ARGV[5] ~= ''
local now
if injected then
    now = tonumber(ARGV[5])
else
    local time = redis.call('TIME')
    now = tonumber(time[1]) * 1000000 + tonumber(time[2])
end
-- Beyond 2^52 microseconds (the year 2112) a time and a tolerance no longer add up exactly.
if now >= 4503599627370496 then
    return redis.error_reply('tollgate: the time ' .. string.format('%.0f', now) ..
        ' microseconds is past the exact range')
end

-- floor(a / b) for integers below 2^53: the quotient of two doubles could round up to the next
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

local reply = {}
for i, key in ipairs(KEYS) do
    local cost = tonumber(ARGV[5 + i])
    if not cost or cost > burst then
        return redis.error_reply('tollgate: a cost of ' .. tostring(ARGV[5 + i]) ..
            ' for ' .. key .. ' exceeds the burst of ' .. ARGV[3])
    end
    local tat = tonumber(redis.call('GET', key) or '0')
    if not tat or tat < 0 or tat >= 9007199254740992 or tat ~= math.floor(tat) then
        return redis.error_reply('tollgate: the value of ' .. key .. ' is not a GCRA state')
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

    local n = #reply
    if peek or new_tat == tat then
        reply[n + 1], reply[n + 2], reply[n + 3] = allowed, available, retry_after
        reply[n + 4], reply[n + 5] = reset_after, burst
    else
        local value = string.format('%.0f', new_tat)
        if injected then
            redis.call('SET', key, value)
        else
            -- Expire when the state is fresh again: at the TAT, in whole milliseconds rounded up.
            redis.call('SET', key, value, 'PX', div(new_tat - now + 999, 1000))
        end
        reply[n + 1], reply[n + 2], reply[n + 3] = 1, available - cost, 0
        reply[n + 4], reply[n + 5] = new_tat - now, burst
    end
end
return reply
