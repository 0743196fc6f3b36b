-- tollgate's scripts: one algorithm's transition on each of KEYS, in order, at one time. A
-- script is this prelude, the algorithm's `decide` (lua/<algorithm>.lua), and lua/run.lua.
--
-- KEYS      the keys, whose values are their states; an absent key is fresh
-- ARGV[1]   1 to peek (decide without writing), 0 to decide
-- ARGV[2]   the time in microseconds since the Unix epoch, for the equivalence tests, or ''
--           for the server's TIME. A key written at an injected time gets no expiry, which only
--           a real time can set.
-- ARGV[3..5] the algorithm's parameters
-- ARGV[6..] the costs, one per key, each at most the algorithm's capacity
--
-- Reply: for each key in turn, {allowed (0 or 1), remaining, retry_after, reset_after,
-- capacity}, the times in the algorithm's unit. The keys are decided one after another, as
-- requests in that order; a key twice is decided twice.
--
-- Lua's numbers are doubles, exact for integers below 2^53: every value is kept below that.
local peek = ARGV[1] == '1'
local injected = ARGV[2] ~= ''
local now_us
if injected then
    now_us = tonumber(ARGV[2])
else
    local time = redis.call('TIME')
    now_us = tonumber(time[1]) * 1000000 + tonumber(time[2])
end
-- Beyond 2^52 microseconds (the year 2112) a time and a tolerance no longer add up exactly.
if not now_us or now_us < 0 or now_us >= 4503599627370496 then
    return redis.error_reply('tollgate: the time ' .. tostring(ARGV[2]) ..
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

-- The integer a string holds, if it is one from 0 up to `max`; nil otherwise.
local function integer(text, max)
    if not text or not string.match(text, '^%d+$') or #text > 16 then
        return nil
    end
    local n = tonumber(text)
    if n > max then
        return nil
    end
    return n
end

-- A key's value: what an all-or-nothing script has decided to write to it and not yet written,
-- or what Redis holds (false for nothing).
local pending = {}
local function get(key)
    local value = pending[key]
    if value ~= nil then
        return value
    end
    return redis.call('GET', key)
end

local function not_a_state(key, algorithm)
    return redis.error_reply('tollgate: the value of ' .. key .. ' is not a ' .. algorithm ..
        ' state')
end
