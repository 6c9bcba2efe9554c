-- Experiment (c): Dyck recall against the number of training steps.
--
-- Question: does training longer help every mixer at lengths beyond the training length, or do
-- some mixers fit length 32 better and better while their recall at 64 … 256 falls?
--
-- Setup: as dyck-lengths (3 kinds, depth ≤ 6, seed-mini, Adam lr 1e-3 betas (0.9, 0.95),
-- batch 32, seed 41, trained at 32), trained three times as long, with an evaluation at 48, 64,
-- 128 and 256 every 10% of the steps. The report's recall_vs_step.svg and accuracy_vs_step.svg
-- give the curves.
--
--   build/memscript experiments/dyck-steps/dyck-steps.lua
--   build/memscript --set quick=true experiments/dyck-steps/dyck-steps.lua
local quick = ms.param("quick", false)
local steps = quick and 40 or ms.param("steps", 6000)

local mixers = { "lstm", "qlstm", "lru", "linear_attention", "gpt", "deltanet", "mamba" }

ms.sweep{
  name = "dyck-steps",
  grid = { mixer = mixers },
  seeds = { 41 },
  run = function(p)
    local task = ms.task.dyck{ pairs = 3, max_depth = 6, negative_share = 0.5 }
    local model = ms.model.decoder{ mixer = p.mixer, preset = "seed-mini", task = task, seed = p.seed }
    return ms.train{
      model = model, task = task, steps = steps, batch = 32, length = 32,
      optimizer = ms.optim.adam{ lr = 1e-3, betas = { 0.9, 0.95 } },
      eval = { lengths = quick and { 48, 64 } or { 48, 64, 128, 256 }, every = steps // 10,
               batches = quick and 2 or 4 },
      seed = p.seed, out = p.out,
    }
  end,
}

ms.report{ runs = "dyck-steps", title = "Dyck (3 kinds, depth ≤ 6): evaluation against training steps" }
