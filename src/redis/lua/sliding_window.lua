
-- The sliding-window counter: the transition of tollgate's `SlidingWindow::decide`, in whole
-- milliseconds since the Unix epoch. A key's state is `window:previous:current`, the index of
-- the window it was last written in and the two counts.
--
-- The parameters: the window, milliseconds (P), and the limit per window: the capacity.
-- `sliding_window(...)` returns the `decide` of those, the capacity, the microseconds in the unit
-- of its times, and `claim` (as `gcra`'s).
--
-- limit × P is at most 2^52 (the limiter refuses larger quotas), so every product below is
-- exact.
local function sliding_window(period, capacity, _, text)
    local limit = capacity
    local now = div(now_us, 1000)
    -- The last window a time the scripts take can fall in: a stored index past it is foreign.
    local last_window = div(div(4503599627370495, 1000), period)

    local params = '2:' .. (text or string.format('%.0f:%.0f:0', period, capacity))
    local decide
    local convert = window_converter(2, sliding_window, limit, function() return decide end)
    local function claim(key)
        own(key, params, convert)
    end

    decide = function(key, cost)
        claim(key)
        local stored, prev, cur = 0, 0, 0
        local value = get(key)
        if value then
            local w, p, c = string.match(value, '^(%d+):(%d+):(%d+)$')
            stored, prev, cur = integer(w, last_window), integer(p, limit),
                integer(c, limit)
            if not (stored and prev and cur) then
                return nil, not_a_state(key, 'sliding-window')
            end
        end

        -- Where `now` falls: `elapsed` into the window `index`, `ahead` windows after the stored
        -- one. A time before the stored window is judged at that window's start, `delay` later.
        local index, ahead, elapsed, delay = div(now, period), 0, 0, 0
        if index >= stored then
            ahead, elapsed = index - stored, now - index * period
        else
            index, delay = stored, stored * period - now
        end
        if ahead == 1 then
            prev, cur = cur, 0
        elseif ahead > 1 then
            prev, cur = 0, 0
        end

        -- What still fits: limit - cur - ceil(prev × (P - e) / P).
        local function remaining(cur)
            local weighted = div(prev * (period - elapsed) + period - 1, period)
            return math.max(limit - cur - weighted, 0)
        end
        -- Until nothing weighs any more.
        local function reset_after(cur)
            local until_next = delay + period - elapsed
            if cur > 0 then
                return until_next + period
            elseif prev > 0 then
                return until_next
            end
            return 0
        end

        if cost == 0 then
            return 1, remaining(cur), 0, reset_after(cur)
        end
        -- Admitted iff prev × (P - e) + (cur + cost) × P <= limit × P.
        if cur + cost <= limit and prev * (period - elapsed) <= (limit - cur - cost) * period then
            local after = cur + cost
            local reset = reset_after(after)
            return 1, remaining(after), 0, reset,
                string.format('%.0f:%.0f:%.0f', index, prev, after), (now + reset) * 1000
        end

        -- The first moment the request fits: later in this window, where
        -- prev × (P - e) <= (limit - cur - cost) × P ...
        local retry_after
        if prev > 0 and cur + cost <= limit then
            local room = div((limit - cur - cost) * period, prev)
            if room < period then
                retry_after = delay + (period - room - elapsed)
            end
        end
        -- ... or in the next, where cur becomes the previous count:
        -- cur × (P - e) <= (limit - cost) × P.
        if not retry_after then
            local room = period
            if cur > 0 then
                room = math.min(div((limit - cost) * period, cur), period)
            end
            retry_after = delay + (period - elapsed) + (period - room)
        end
        return 0, remaining(cur), retry_after, reset_after(cur)
    end
    return decide, capacity, 1000, claim
end
local decider = sliding_window
