
-- A lease of GCRA budget for one key (KEYS[1]): give back what the last lease left unused,
-- then take up to `want`, as GCRA decisions of those costs. The model is `RedisGcra::lease`.
--
-- ARGV[3]  the emission interval, microseconds
-- ARGV[4]  the tolerance (burst × interval), microseconds
-- ARGV[5]  the burst
-- ARGV[6]  want: the most to take, 0 to only give back
-- ARGV[7]  need: what the request waiting on this lease needs (at most want); when less is
--          granted, the reply says how long until the rest would be
-- ARGV[8]  give back: what the caller's last lease left unused (at most what it granted)
-- ARGV[9]  that lease's schedule (the TAT it left): the give-back applies only if the key's TAT
--          is still exactly that, that is, no lease or decision has been granted since, so that
--          undoing part of it leaves the state that a smaller lease would have left
--
-- Reply: {granted, returned, retry_after, schedule}: the schedule (the TAT after this call) is
-- what a later give-back names.
local interval = tonumber(ARGV[3])
local tolerance = tonumber(ARGV[4])
local burst = tonumber(ARGV[5])
local now = now_us
local key = KEYS[1]
local want = integer(ARGV[6], burst)
local need = integer(ARGV[7], burst)
local give_back = integer(ARGV[8], burst)
local schedule = integer(ARGV[9], 9007199254740991)
if not (want and need and give_back and schedule) or need > want then
    return redis.error_reply('tollgate: a lease of ' .. tostring(ARGV[6]) .. ' (needing ' ..
        tostring(ARGV[7]) .. ', giving back ' .. tostring(ARGV[8]) .. ' of ' ..
        tostring(ARGV[9]) .. ') is not one the burst of ' .. ARGV[5] .. ' allows')
end

local _, _, _, claim = gcra(interval, tolerance, burst, ARGV[3] .. ':' .. ARGV[4] .. ':' .. ARGV[5])
claim(key)
local tat = integer(get(key) or '0', 9007199254740991)
if not tat then
    return not_a_state(key, 'GCRA')
end

local returned = 0
if give_back > 0 and tat == schedule and tat >= give_back * interval then
    tat = tat - give_back * interval
    returned = give_back
end

-- Take what is available, up to `want`: a GCRA decision of that cost.
local base = math.max(tat, now)
local room = now + tolerance - base
local available = 0
if room > 0 then
    available = div(room, interval)
end
local granted = math.min(want, available)
if granted > 0 then
    tat = base + granted * interval
end
if granted > 0 or returned > 0 then
    -- Expire when the state is fresh again (at once, for one that already is).
    set(key, string.format('%.0f', tat), tat)
end
flush()

-- Short of `need`: how long until the rest would be granted.
local retry_after = 0
if granted < need then
    local latest = now + (tolerance - (need - granted) * interval)
    retry_after = math.max(tat - latest, 0)
end
return {granted, returned, retry_after, tat}
