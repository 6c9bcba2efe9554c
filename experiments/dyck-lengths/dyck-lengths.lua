-- Experiment (b): Dyck words with 3 bracket kinds and depth at most 6.
--
-- Questions: trained at length 32, which mixers still tell a balanced prefix from an unbalanced
-- one at 48, 64, 128 and 256? And does training longer help beyond the training length, or do
-- some mixers fit length 32 better and better while their recall at 48 … 256 falls (the report's
-- recall_vs_step.svg)? Recall is the number that matters: positives are rare, so a model that
-- always answers "unbalanced" scores a high token accuracy but a recall of 0.5 (macro recall:
-- the share of each class found, averaged over the two classes).
--
-- Setup (identical for every mixer, as in the study this follows, swiss-ai/modern_rnns): the
-- seed-mini preset (the study's per-mixer models, docs/study.md), Adam lr 1e-3 betas
-- (0.9, 0.95), batch 32, 40,000 steps at length 32, evaluation every 1,000 steps on 10 batches
-- of 32, seeds 41, 42, 43; half the sequences are balanced random walks, half have their suffix
-- shuffled after a balanced point. "lru-d4" is the LRU at the shared sizes (d_model 4, an MLP
-- of 8) beside the study's d_model 128.
--
--   build/memscript experiments/dyck-lengths/dyck-lengths.lua
--   build/memscript --set quick=true experiments/dyck-lengths/dyck-lengths.lua
local quick = ms.param("quick", false)
local steps = quick and 30 or ms.param("steps", 40000)

local mixers = { "lstm", "qlstm", "lru", "lru-d4", "linear_attention", "gpt", "deltanet", "mamba" }
local variants = { ["lru-d4"] = { mixer = "lru", d_model = 4, mlp_ratio = 2 } }

ms.sweep{
  name = "dyck-lengths",
  grid = { mixer = mixers },
  seeds = quick and { 41 } or { 41, 42, 43 },
  run = function(p)
    local task = ms.task.dyck{ pairs = 3, max_depth = 6, negative_share = 0.5 }
    local options = { mixer = p.mixer, preset = "seed-mini", task = task, seed = p.seed }
    for key, value in pairs(variants[p.mixer] or {}) do options[key] = value end
    local model = ms.model.decoder(options)
    return ms.train{
      model = model, task = task, steps = steps, batch = 32, length = 32,
      optimizer = ms.optim.adam{ lr = 1e-3, betas = { 0.9, 0.95 } },
      eval = { lengths = quick and { 32, 48, 64 } or { 32, 48, 64, 128, 256 },
               every = quick and 10 or 1000, batches = quick and 2 or 10 },
      seed = p.seed, out = p.out,
    }
  end,
}

ms.report{ runs = "dyck-lengths", title = "Dyck (3 kinds, depth ≤ 6), trained at 32" }
