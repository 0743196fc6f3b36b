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

-- floor(a × b / c) and the remainder, for integers below 2^53 with c at most 2^52, exact
-- although the product is not: a = qa × c + ra, and ra × b / c is built bit by bit of b, its
-- remainder kept below c. A quotient above `cap` returns `cap` (and remainder 0).
local function muldiv(a, b, c, cap)
    local qa = div(a, c)
    local ra = a - qa * c
    if qa > 0 and qa > div(cap, b) then
        return cap, 0
    end
    local q = qa * b
    local bits, n = {}, b
    while n > 0 do
        local half = math.floor(n / 2)
        bits[#bits + 1] = n - 2 * half
        n = half
    end
    local hq, hr = 0, 0
    for i = #bits, 1, -1 do
        hq, hr = 2 * hq, 2 * hr
        if hr >= c then
            hq, hr = hq + 1, hr - c
        end
        if bits[i] == 1 then
            hr = hr + ra
            if hr >= c then
                hq, hr = hq + 1, hr - c
            end
        end
    end
    if q + hq > cap then
        return cap, 0
    end
    return q + hq, hr
end

-- A key's value is its state, then `@` and the parameters it was written under (the
-- algorithm's number and its three parameters, `1:interval:tolerance:burst` for GCRA). An
-- algorithm deciding a key names its own parameters here first, with how to convert a state
-- written under others (its `carry_over`); a key read under other parameters is converted, and
-- the converted state is written back at the end even if nothing else is, so that the new
-- quota refills it from the first time it was read. A value without parameters (written before
-- they were stored) is taken as the reader's.
local owners = {}
local converted = {}
local written = {}

-- The parameters of an algorithm and the converter of its states: `convert(key, state,
-- params)` returns the state under the owner's parameters (false for the fresh state) and when
-- it expires (as `set` takes it), or nil if `params` are not the owner's algorithm's.
local function own(key, params, convert)
    owners[key] = {params = params, convert = convert}
end

-- A key's state: what an all-or-nothing script has decided to write to it and not yet written,
-- or what Redis holds (false for nothing), converted to the parameters of the algorithm that
-- owns the key. A value this version cannot read is returned as it is, for the algorithm to
-- refuse.
local pending = {}
local function get(key)
    local value = pending[key]
    if value ~= nil then
        return value
    end
    local held = converted[key]
    if held then
        return held.state
    end
    value = redis.call('GET', key)
    if not value then
        return false
    end
    -- A plain search: a pattern would cost a decision more than its arithmetic.
    local at = string.find(value, '@', 1, true)
    if not at then
        return value
    end
    local state, params = string.sub(value, 1, at - 1), string.sub(value, at + 1)
    local owner = owners[key]
    if not owner or params == owner.params then
        return state
    end
    local carried, expires = owner.convert(key, state, params)
    if carried == nil then
        return value
    end
    converted[key] = {state = carried, expires = expires}
    return carried
end

-- Writes a key's state under its owner's parameters, to expire at `expires`, microseconds since
-- the epoch on the scripts' clock: the moment the state is fresh again, rounded up to Redis's
-- millisecond. The expiry is absolute, not a time to live from when `SET` runs, so the key lives
-- exactly as long as its state weighs however long the script has run; one already fresh lives a
-- millisecond. An injected time sets no expiry.
local function set(key, state, expires)
    written[key], converted[key] = true, nil
    local value = state .. '@' .. owners[key].params
    if injected then
        redis.call('SET', key, value)
    else
        local at = math.max(div(expires + 999, 1000), div(now_us, 1000) + 1)
        redis.call('SET', key, value, 'PXAT', string.format('%.0f', at))
    end
end

-- Writes the states converted and not otherwise written.
local function flush()
    for key, held in pairs(converted) do
        if held.state and not written[key] then
            set(key, held.state, held.expires)
        elseif not written[key] then
            redis.call('DEL', key)
        end
    end
end

-- The three parameters a state names, if they are algorithm `id`'s.
local function parse_params(id, params)
    local a, b, c = string.match(params, '^' .. id .. ':(%d+):(%d+):(%d+)$')
    if not a then
        return nil
    end
    return tonumber(a), tonumber(b), tonumber(c)
end

local function not_a_state(key, algorithm)
    return redis.error_reply('tollgate: the value of ' .. key .. ' is not a ' .. algorithm ..
        ' state')
end

-- A window counter's `carry_over`, as the `convert` of `own`: what the state written under
-- `written` (algorithm `id`'s parameters) has left now, at most `limit`, is what is left of the
-- window that holds now under the new parameters; the rest of the limit counts as used in it.
-- `make` builds the counter for the old parameters, which says what is left; `decide` is the
-- new counter's own.
local function window_converter(id, make, limit, decide)
    return function(key, state, written)
        local from_period, from_limit = parse_params(id, written)
        if not from_period or from_period < 1 or from_limit > 4503599627370496 / from_period then
            return nil
        end
        local before = make(from_period, from_limit)
        local owner = owners[key]
        pending[key] = state
        local allowed, left = before(key, 0)
        if allowed == nil then
            pending[key], owners[key] = nil, owner
            return nil
        end
        pending[key] = false
        local _, _, _, _, value, expires = decide()(key, limit - math.min(left, limit))
        pending[key], owners[key] = nil, owner
        if not value then
            -- Nothing to charge: the fresh state.
            return false, 0
        end
        return value, expires
    end
end
