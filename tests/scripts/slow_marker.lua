-- on_step for the tests that signal or kill a run midway: marker_at > 0: at that step, write
-- <out root>/marker and from then on spend `slow` seconds per step, so that the test can act
-- while the run is surely inside its training loop.
return function(marker_at, slow)
  return function(r)
    if marker_at == 0 or r.step < marker_at then return end
    if r.step == marker_at then
      local f = assert(io.open(ms.out .. "/marker", "w"))
      f:write(tostring(r.step))
      f:close()
    end
    local t = os.clock()
    while os.clock() - t < slow do end
  end
end
