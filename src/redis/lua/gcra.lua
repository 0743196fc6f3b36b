
-- GCRA: the transition of tollgate's `Gcra::decide`, in whole microseconds since the Unix epoch.
-- A key's value is its theoretical arrival time (TAT).
--
-- The parameters: the emission interval and the tolerance (burst × interval), microseconds, and
-- the burst: the capacity. `gcra(...)` returns the `decide` of those, the capacity, and the microseconds in the unit of
-- its times (1).
local function gcra(interval, tolerance, capacity)
    local now = now_us

    -- allowed, remaining, retry_after, reset_after, the value to store (nil for none) and its time
    -- to live in milliseconds; or nil and an error reply.
    local function decide(key, cost)
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
        -- The key is fresh again at the new TAT: its time to live, in whole milliseconds rounded up.
        return 1, available - cost, 0, new_tat - now, string.format('%.0f', new_tat),
            div(new_tat - now + 999, 1000)
    end
    return decide, capacity, 1
end
local decider = gcra
