-- Experiment (b): Dyck words with 3 bracket kinds and depth at most 6.
--
-- Question: trained at length 32, which mixers still tell a balanced prefix from an unbalanced
-- one at 48, 64, 128 and 256? Recall is the number that matters: positives are rare, so a model
-- that always answers "unbalanced" scores a high token accuracy but a recall of 0.5 (macro
-- recall: the share of each class found, averaged over the two classes).
--
-- Setup (identical for every mixer, as in the study this follows): the seed-mini preset, Adam
-- lr 1e-3 betas (0.9, 0.95), batch 32, seed 41; half the sequences are balanced random walks,
-- half have their suffix shuffled after a balanced point.
--
--   build/memscript experiments/dyck-lengths/dyck-lengths.lua
--   build/memscript --set quick=true experiments/dyck-lengths/dyck-lengths.lua
local quick = ms.param("quick", false)
local steps = quick and 30 or ms.param("steps", 2000)

local mixers = { "lstm", "qlstm", "lru", "linear_attention", "gpt", "deltanet", "mamba" }

ms.sweep{
  name = "dyck-lengths",
  grid = { mixer = mixers },
  seeds = { 41 },
  run = function(p)
    local task = ms.task.dyck{ pairs = 3, max_depth = 6, negative_share = 0.5 }
    local model = ms.model.decoder{ mixer = p.mixer, preset = "seed-mini", task = task, seed = p.seed }
    return ms.train{
      model = model, task = task, steps = steps, batch = 32, length = 32,
      optimizer = ms.optim.adam{ lr = 1e-3, betas = { 0.9, 0.95 } },
      eval = { lengths = quick and { 32, 48, 64 } or { 32, 48, 64, 128, 256 },
               batches = quick and 2 or 8 },
      seed = p.seed, out = p.out,
    }
  end,
}

ms.report{ runs = "dyck-lengths", title = "Dyck (3 kinds, depth ≤ 6), trained at 32" }
