
-- The cancel of a GCRA reservation on each of KEYS, in order, the model `RedisGcra::cancel`: if
-- a key's state is still the one the reservation left (its TAT, under the parameters it was
-- reserved with), the TAT it replaced is put back (an absent key for the fresh state 0);
-- otherwise nothing changes. A key whose quota has changed since holds a state converted with
-- the reservation in it: nothing is given back there.
--
-- ARGV[3 + 5(i - 1)]       key i's TAT before the reservation
-- ARGV[4 + 5(i - 1)]       its TAT after it
-- ARGV[5 + 5(i - 1)] .. +2 the emission interval, tolerance and burst it was reserved with
--
-- Reply: for each key, 1 if given back, 0 if not.
local reply = {}
for i, key in ipairs(KEYS) do
    local at = 3 + 5 * (i - 1)
    local before = integer(ARGV[at], 9007199254740991)
    local after = integer(ARGV[at + 1], 9007199254740991)
    local interval = integer(ARGV[at + 2], 4503599627370496)
    local tolerance = integer(ARGV[at + 3], 4503599627370496)
    local burst = integer(ARGV[at + 4], 4503599627370496)
    if not (before and after and interval and tolerance and burst) then
        return redis.error_reply('tollgate: ' .. tostring(ARGV[at]) .. ' and ' ..
            tostring(ARGV[at + 1]) .. ' are not the TATs of a reservation')
    end
    local _, _, _, claim = gcra(interval, tolerance, burst,
        ARGV[at + 2] .. ':' .. ARGV[at + 3] .. ':' .. ARGV[at + 4])
    claim(key)
    local value = redis.call('GET', key)
    if value ~= string.format('%.0f@', after) .. owners[key].params then
        reply[i] = 0
    else
        if before == 0 then
            redis.call('DEL', key)
        else
            set(key, string.format('%.0f', before), before)
        end
        reply[i] = 1
    end
end
return reply
