-- The fencing counter's value as a number: 0 when it is missing or not a
-- number (another type reads as an error: 0 too). A waiter compares a
-- grant's token with it (see take_grant's callers).
local function counter_now(counter)
    local v = redis.pcall('get', counter)
    return tonumber(type(v) == 'string' and v or '0') or 0
end
