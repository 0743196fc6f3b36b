
-- GCRA: the transition of tollgate's `Gcra::decide`, in whole microseconds since the Unix epoch.
-- A key's state is its theoretical arrival time (TAT); its value adds the parameters it was
-- written under (see the prelude).
--
-- The parameters: the emission interval and the tolerance (burst × interval), microseconds, and
-- the burst: the capacity; and, if the caller has them, the three as they came in ARGV
-- (`interval:tolerance:burst`), which spares formatting them. `gcra(...)` returns the `decide` of those, the capacity, the
-- microseconds in the unit of its times (1), and `claim`, which makes the parameters a key's
-- owner (see the prelude) for a script that reads the key itself.
local function gcra(interval, tolerance, capacity, text)
    local now = now_us
    local params = '1:' .. (text or string.format('%.0f:%.0f:%.0f', interval, tolerance, capacity))

    -- `Gcra::carry_over`: the room below the tolerance rescaled to this interval and rounded
    -- down, at most this tolerance; a backlog beyond the tolerance rescaled and rounded up; the
    -- TAT capped at 2^53 - 1.
    local function convert(_, state, written)
        local from_interval, from_tolerance = parse_params(1, written)
        local tat = integer(state, 9007199254740991)
        if not (from_interval and tat) or from_interval < 1 then
            return nil
        end
        local debt = math.max(tat, now) - now
        local ahead
        if debt <= from_tolerance then
            local room = muldiv(from_tolerance - debt, interval, from_interval, tolerance)
            ahead = tolerance - room
        else
            local cap = 9007199254740991 - now - tolerance
            local backlog, rest = muldiv(debt - from_tolerance, interval, from_interval, cap)
            if rest > 0 and backlog < cap then
                backlog = backlog + 1
            end
            ahead = tolerance + backlog
        end
        local carried = now + ahead
        return string.format('%.0f', carried), carried
    end
    local function claim(key)
        own(key, params, convert)
    end

    -- allowed, remaining, retry_after, reset_after, the value to store (nil for none) and when it
    -- expires, in microseconds (as `set` takes it); or nil and an error reply.
    local function decide(key, cost)
        claim(key)
        local tat = integer(get(key) or '0', 9007199254740991)
        if not tat then
            return nil, not_a_state(key, 'GCRA')
        end

        local base = math.max(tat, now)
        local reset_after = base - now
        local room = now + tolerance - base
        local available = 0
        if room > 0 then
            available = div(room, interval)
        end
        if cost == 0 then
            return 1, available, 0, reset_after
        end

        -- Admitted iff max(TAT, now) + cost × interval <= now + tolerance, that is TAT <= latest,
        -- since `now` meets the bound itself (cost <= burst).
        local increment = cost * interval
        local latest = now + (tolerance - increment)
        if tat > latest then
            return 0, available, tat - latest, reset_after
        end
        local new_tat = base + increment
        -- The key is fresh again at the new TAT: when it expires.
        return 1, available - cost, 0, new_tat - now, string.format('%.0f', new_tat), new_tat
    end
    return decide, capacity, 1, claim
end
local decider = gcra
