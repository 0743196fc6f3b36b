
-- The fixed-window counter: the transition of tollgate's `FixedWindow::decide`, in whole
-- milliseconds since the Unix epoch. A key's state is `window:count`, the index of the window
-- it was last written in and its count.
--
-- The parameters: the window, milliseconds (P), and the limit per window: the capacity.
-- `fixed_window(...)` returns the `decide` of those, the capacity, the microseconds in the unit
-- of its times, and `claim` (as `gcra`'s).
local function fixed_window(period, capacity, _, text)
    local limit = capacity
    local now = div(now_us, 1000)
    -- The last window a time the scripts take can fall in: a stored index past it is foreign.
    local last_window = div(div(4503599627370495, 1000), period)

    local params = '3:' .. (text or string.format('%.0f:%.0f:0', period, capacity))
    local decide
    local convert = window_converter(3, fixed_window, limit, function() return decide end)
    local function claim(key)
        own(key, params, convert)
    end

    decide = function(key, cost)
        claim(key)
        local stored, count = 0, 0
        local value = get(key)
        if value then
            local w, c = string.match(value, '^(%d+):(%d+)$')
            stored, count = integer(w, last_window), integer(c, limit)
            if not (stored and count) then
                return nil, not_a_state(key, 'fixed-window')
            end
        end

        -- The window of the decision; a time before the stored window counts in it, `delay` later.
        local index, elapsed, delay = div(now, period), 0, 0
        if index > stored then
            elapsed, count = now - index * period, 0
        elseif index == stored then
            elapsed = now - index * period
        else
            index, delay = stored, stored * period - now
        end
        local until_next = delay + period - elapsed

        if cost == 0 or count + cost <= limit then
            local after = count + cost
            local reset = 0
            if after > 0 then
                reset = until_next
            end
            if cost == 0 then
                return 1, limit - after, 0, reset
            end
            return 1, limit - after, 0, reset, string.format('%.0f:%.0f', index, after),
                (now + reset) * 1000
        end
        local reset = 0
        if count > 0 then
            reset = until_next
        end
        return 0, limit - count, until_next, reset
    end
    return decide, capacity, 1000, claim
end
local decider = fixed_window
