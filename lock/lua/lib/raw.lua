-- A permit id's raw bytes (its member in the permits zset) from its hex
-- digits.
local function raw(hex)
    return (hex:gsub('..', function(h) return string.char(tonumber(h, 16)) end))
end
