-- Lua 5.4.4 bug "C-stack overflow with deep nesting of coroutine.close"
-- (https://www.lua.org/bugs.html#5.4.4-9, fixed in 5.4.5): closing a coroutine runs the
-- __close of its pending to-be-closed variables, and when that __close closes another
-- coroutine, and so on, 5.4.4 recursed in C with no limit and the process died of SIGSEGV
-- (Debian 12's 5.4.4-3+deb12u1 crashes from about 11000 links with an 8 MiB stack).
-- A fixed Lua stops at its C-stack limit with an error that coroutine.close returns.
local links = 100000

local closer = {
  __close = function(self)
    if self.previous then
      local ok, err = coroutine.close(self.previous)
      if not ok then error(err, 0) end
    end
  end,
}

local function link(previous)
  local pending <close> = setmetatable({ previous = previous }, closer)
  coroutine.yield()
end

-- Each coroutine waits in yield with a pending variable whose __close closes the one before.
local last = false
for _ = 1, links do
  local co = coroutine.create(link)
  assert(coroutine.resume(co, last))
  last = co
end

local ok, err = coroutine.close(last)
assert(not ok and tostring(err):find("C stack overflow", 1, true), tostring(err))
print("coroutine.close nesting: " .. err)
