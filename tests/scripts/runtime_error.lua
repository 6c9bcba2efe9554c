-- Fails on line 4, inside a function called from line 6.
local function fail()
  local t = nil
  return t.field
end
fail()
