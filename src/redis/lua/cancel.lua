
-- The cancel of a GCRA reservation on each of KEYS, in order, the model `RedisGcra::cancel`: if
-- a key's TAT is still the one the reservation left, the TAT it replaced is put back (an absent
-- key for the fresh state 0); otherwise nothing changes.
--
-- ARGV[3 + 2(i - 1)]  key i's TAT before the reservation
-- ARGV[4 + 2(i - 1)]  its TAT after it
--
-- Reply: for each key, 1 if given back, 0 if not.
local reply = {}
for i, key in ipairs(KEYS) do
    local before = integer(ARGV[1 + 2 * i], 9007199254740991)
    local after = integer(ARGV[2 + 2 * i], 9007199254740991)
    if not (before and after) then
        return redis.error_reply('tollgate: ' .. tostring(ARGV[1 + 2 * i]) .. ' and ' ..
            tostring(ARGV[2 + 2 * i]) .. ' are not the TATs of a reservation')
    end
    local tat = integer(redis.call('GET', key) or '0', 9007199254740991)
    if not tat then
        return not_a_state(key, 'GCRA')
    end
    if tat ~= after then
        reply[i] = 0
    else
        if before == 0 then
            redis.call('DEL', key)
        elseif injected then
            redis.call('SET', key, string.format('%.0f', before))
        else
            redis.call('SET', key, string.format('%.0f', before), 'PX',
                math.max(1, div(before - now_us + 999, 1000)))
        end
        reply[i] = 1
    end
end
return reply
