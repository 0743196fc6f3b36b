
-- A reservation of GCRA in every one of KEYS, all or nothing: `Gcra::reserve` in whole
-- microseconds since the Unix epoch on each key, the model `RedisGcra::reserve`. The request is
-- admitted now into each key's schedule, to proceed after a wait of at most `max_wait` in each.
-- In a Redis Cluster the keys must share a slot.
--
-- ARGV[3]               the longest wait, microseconds
-- ARGV[4 + 4(i - 1)]    key i's emission interval, microseconds
-- ARGV[5 + 4(i - 1)]    its tolerance (burst × interval), microseconds; the wait it allows is
--                       capped at 2^52 less the tolerance, which keeps the stored TAT (now +
--                       tolerance + wait) below 2^53
-- ARGV[6 + 4(i - 1)]    its burst
-- ARGV[7 + 4(i - 1)]    the cost there, at most the burst
--
-- 1. Each key alone: if any would need a longer wait, the request is refused, nothing is
--    written, and the refusal names the key with the longest excess.
-- 2. Each key in order, on what the ones before it would write (a key listed twice takes two
--    turns): if one refuses, nothing is written and the refusal names it; else every key's new
--    TAT is written, with its expiry.
--
-- Reply: {0, 0, then for each key {wait, TAT before, TAT after}} for a reservation;
-- {i, retry_after} for a refusal by key i (from 1), the wait beyond `max_wait`.
local max_wait = integer(ARGV[3], 9007199254740991)
if not max_wait then
    return redis.error_reply('tollgate: a wait of ' .. tostring(ARGV[3]) .. ' microseconds')
end
local now = now_us
local layers = {}
for i, key in ipairs(KEYS) do
    local at = 4 + 4 * (i - 1)
    local interval, tolerance = tonumber(ARGV[at]), tonumber(ARGV[at + 1])
    local burst = tonumber(ARGV[at + 2])
    local cost = integer(ARGV[at + 3], burst)
    if not (interval and tolerance and cost) then
        return redis.error_reply('tollgate: a reservation of ' .. tostring(ARGV[at + 3]) ..
            ' for ' .. key .. ' is not one the burst of ' .. tostring(ARGV[at + 2]) .. ' allows')
    end
    local _, _, _, claim = gcra(interval, tolerance, burst,
        ARGV[at] .. ':' .. ARGV[at + 1] .. ':' .. ARGV[at + 2])
    claim(key)
    layers[i] = {key = key, interval = interval, tolerance = tolerance, cost = cost,
        max_wait = math.min(max_wait, 4503599627370496 - tolerance)}
end

-- The key's reservation: the wait and the TATs before and after; or nil and the excess.
local function reserve(layer)
    local tat = integer(get(layer.key) or '0', 9007199254740991)
    if not tat then
        return nil, not_a_state(layer.key, 'GCRA')
    end
    if layer.cost == 0 then
        return 0, tat, tat
    end
    -- As in `decide`: the latest TAT with room for `cost` now.
    local latest = now + (layer.tolerance - layer.cost * layer.interval)
    if tat <= latest then
        return 0, tat, math.max(tat, now) + layer.cost * layer.interval
    end
    local wait = tat - latest
    if wait > layer.max_wait then
        return false, wait - layer.max_wait
    end
    return wait, tat, now + layer.tolerance + wait
end

local refused, longest = 0, -1
for i, layer in ipairs(layers) do
    local wait, excess = reserve(layer)
    if wait == nil then
        return excess
    end
    if wait == false and excess > longest then
        refused, longest = i, excess
    end
end
if refused ~= 0 then
    flush()
    return {refused, longest}
end

local reply = {0, 0}
for i, layer in ipairs(layers) do
    local wait, before, after = reserve(layer)
    if wait == nil then
        return before
    end
    if wait == false then
        pending = {}
        flush()
        return {i, before}
    end
    pending[layer.key] = string.format('%.0f', after)
    local n = #reply
    reply[n + 1], reply[n + 2], reply[n + 3] = wait, before, after
end
for i, layer in ipairs(layers) do
    local after = reply[2 + 3 * i]
    if reply[1 + 3 * i] ~= after then
        set(layer.key, pending[layer.key], after)
    end
end
flush()
return reply
