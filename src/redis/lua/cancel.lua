
-- The cancel of a GCRA reservation of one key (KEYS[1]), the model `RedisGcra::cancel`: if the
-- key's TAT is still the one the reservation left, the TAT it replaced is put back (an absent
-- key for the fresh state 0); otherwise nothing changes.
--
-- ARGV[3]  the TAT before the reservation
-- ARGV[4]  the TAT after it
--
-- Reply: 1 if given back, 0 if not.
local key = KEYS[1]
local before = integer(ARGV[3], 9007199254740991)
local after = integer(ARGV[4], 9007199254740991)
if not (before and after) then
    return redis.error_reply('tollgate: ' .. tostring(ARGV[3]) .. ' and ' .. tostring(ARGV[4]) ..
        ' are not the TATs of a reservation')
end
local tat = integer(redis.call('GET', key) or '0', 9007199254740991)
if not tat then
    return not_a_state(key, 'GCRA')
end
if tat ~= after then
    return 0
end
if before == 0 then
    redis.call('DEL', key)
elseif injected then
    redis.call('SET', key, string.format('%.0f', before))
else
    redis.call('SET', key, string.format('%.0f', before), 'PX',
        math.max(1, div(before - now_us + 999, 1000)))
end
return 1
