-- A tiny sweep for end-to-end tests: two (or three) mixers x two seeds, a few steps each.
--   --set mixers=3         adds a third mixer
--   --set fail_mixer=NAME  makes that mixer's runs fail
--   --set fail_flag=FILE   ... but only while FILE exists (to fail first, then be resubmitted)
--   --set report=false     no ms.report at the end
--   --set steps=N          trains N steps (4)
--   --set d_model=N        the model's width (8), read inside the run function
--   --set marker_at=N      at step N of a run, write <out root>/marker and from then on spend
--   --set slow=S           S seconds per step, so that a test can signal the process mid-run
local parity = ms.task.parity{ ones = { min = 1, max = 3 } }
local mixers = { "lstm", "qlstm" }
if ms.param("mixers", 2) == 3 then mixers[3] = "mingru" end
local fail_mixer = ms.param("fail_mixer", "none")
local fail_flag = ms.param("fail_flag", "")
local steps = ms.param("steps", 4)
local report = ms.param("report", true) -- read before training, as every parameter
local marker_at, slow = ms.param("marker_at", 0), ms.param("slow", 0.0)
local on_step = require("slow_marker")(marker_at, slow)

local function should_fail(mixer)
  if mixer ~= fail_mixer then return false end
  if fail_flag == "" then return true end
  local flag = io.open(fail_flag, "r")
  if flag then flag:close() end
  return flag ~= nil
end

ms.sweep{
  name = "tiny",
  grid = { mixer = mixers },
  seeds = { 1, 2 },
  run = function(p)
    if should_fail(p.mixer) then error("asked to fail: " .. p.mixer) end
    local d_model = ms.param("d_model", 8) -- a run function may read a parameter itself
    local model = ms.model.decoder{ mixer = p.mixer, layers = 1, d_model = d_model, heads = 1,
                                    task = parity, seed = p.seed }
    return ms.train{ model = model, task = parity, steps = steps, batch = 4, length = 8,
                     seed = p.seed, optimizer = ms.optim.adamw{ lr = 1e-3 }, log_every = 1,
                     eval = { lengths = { 8, 12 }, batches = 1, batch = 4, every = 2 },
                     on_step = on_step, out = p.out }
  end,
}
if report then ms.report{ runs = "tiny" } end
