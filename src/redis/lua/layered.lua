
-- All or nothing over several limits: one key per layer (KEYS[i]), each with an algorithm of its
-- own, as tollgate's `Layers::decide_all` decides locally. In a Redis Cluster the keys must share
-- a slot (give them one hash tag).
--
-- ARGV[3 + 5(i - 1)]         layer i's algorithm: 1 GCRA, 2 sliding window, 3 fixed window
-- ARGV[4 + 5(i - 1)] .. +2   its parameters, as its own script takes them
-- ARGV[7 + 5(i - 1)]         the request's cost there, at most its capacity
--
-- 1. Each layer alone, on the state as it stands: if any would refuse, the request is refused,
--    nothing is written, and the refusal names the one with the longest wait (in microseconds,
--    whatever each algorithm's unit).
-- 2. Each layer in order, on what the ones before it would write (a key listed twice must admit
--    the request twice): if one refuses, nothing is written and the refusal names it; else
--    every layer's new state is written, with its expiry.
--
-- Reply: {refused, then for each layer {allowed, remaining, retry_after, reset_after,
-- capacity}}, `refused` 0 when admitted, else the refusing layer's index from 1. Admitted, each
-- layer reports its decision; refused, each its outcome alone and the state as it stands. The
-- times are in each algorithm's unit.
local makers = {gcra, sliding_window, fixed_window}
local layers = {}
for i, key in ipairs(KEYS) do
    local at = 3 + 5 * (i - 1)
    local make = makers[tonumber(ARGV[at])]
    if not make then
        return redis.error_reply('tollgate: no algorithm ' .. tostring(ARGV[at]) .. ' for ' .. key)
    end
    local decide, capacity, unit = make(tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]),
        tonumber(ARGV[at + 3]), ARGV[at + 1] .. ':' .. ARGV[at + 2] .. ':' .. ARGV[at + 3])
    local cost = integer(ARGV[at + 4], capacity)
    if not cost then
        return redis.error_reply('tollgate: a cost of ' .. tostring(ARGV[at + 4]) .. ' for ' ..
            key .. ' exceeds the capacity of ' .. string.format('%.0f', capacity))
    end
    layers[i] = {key = key, decide = decide, capacity = capacity, unit = unit, cost = cost}
end

local reply = {0}
local function report(i, allowed, remaining, retry_after, reset_after)
    local n = 1 + 5 * (i - 1)
    reply[n + 1], reply[n + 2], reply[n + 3] = allowed, remaining, retry_after
    reply[n + 4], reply[n + 5] = reset_after, layers[i].capacity
end
-- Each layer's outcome alone, beside its state as it stands.
local function alone(i)
    local layer = layers[i]
    local allowed, remaining, retry_after, reset_after = layer.decide(layer.key, layer.cost)
    if allowed == nil then
        return nil, remaining
    end
    local _
    _, remaining, _, reset_after = layer.decide(layer.key, 0)
    report(i, allowed, remaining, retry_after, reset_after)
    return allowed, retry_after * layer.unit
end

local longest = -1
for i = 1, #layers do
    local allowed, retry_after = alone(i)
    if allowed == nil then
        return retry_after
    end
    if allowed == 0 and retry_after > longest then
        reply[1], longest = i, retry_after
    end
end
if reply[1] ~= 0 then
    flush()
    return reply
end

local writes = {}
for i, layer in ipairs(layers) do
    local allowed, remaining, retry_after, reset_after, value, expires = layer.decide(layer.key,
        layer.cost)
    if allowed == nil then
        return remaining
    end
    if allowed == 0 then
        pending = {}
        reply[1] = i
        report(i, allowed, remaining, retry_after, reset_after)
        flush()
        return reply
    end
    report(i, allowed, remaining, retry_after, reset_after)
    if value then
        pending[layer.key] = value
        writes[#writes + 1] = {layer.key, value, expires}
    end
end
for _, write in ipairs(writes) do
    set(write[1], write[2], write[3])
end
flush()
return reply
