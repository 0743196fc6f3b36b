
-- Each key in turn: `decide` says the request's outcome and what to store; a peek reports the
-- request's outcome and wait beside the state as it stands (what a cost of 0 reports), as
-- `Decision::peeked` does, and writes nothing.
local decide, capacity = decider(tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]),
    ARGV[3] .. ':' .. ARGV[4] .. ':' .. ARGV[5])
local reply = {}
for i, key in ipairs(KEYS) do
    local cost = integer(ARGV[5 + i], capacity)
    if not cost then
        return redis.error_reply('tollgate: a cost of ' .. tostring(ARGV[5 + i]) ..
            ' for ' .. key .. ' exceeds the capacity of ' .. string.format('%.0f', capacity))
    end
    local allowed, remaining, retry_after, reset_after, value, expires = decide(key, cost)
    if allowed == nil then
        -- `decide` refused the stored value: its error reply.
        return remaining
    end
    if peek then
        local _
        _, remaining, _, reset_after = decide(key, 0)
    elseif value then
        -- Expire when the state is fresh again.
        set(key, value, expires)
    end
    local n = #reply
    reply[n + 1], reply[n + 2], reply[n + 3] = allowed, remaining, retry_after
    reply[n + 4], reply[n + 5] = reset_after, capacity
end
-- A peek writes no decision, but a conversion (the key's first reading under a new quota) is
-- written whatever reads it.
flush()
return reply
