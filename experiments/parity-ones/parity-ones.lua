-- Experiment (a): parity of a sequence with exactly 12 ones.
--
-- Question: trained at length 16 or 32, which of the study's seven mixers still compute parity
-- at 1.5× the training length (24, 48), and further (the study's 64, 128, 256)?
--
-- Setup (identical for every mixer, as in the study this follows, swiss-ai/modern_rnns): the
-- seed-mini preset (the study's per-mixer models, docs/study.md), Adam lr 1e-3 betas
-- (0.9, 0.95), batch 32, 40,000 steps, evaluation every 1,000 steps on 10 batches of 32, seeds
-- 41, 42, 43. Each sequence holds exactly 12 ones, so at length 16 most bits are ones and at 48
-- most are zeros: the lengths differ in their statistics, not only in their length.
-- The study's LRU is d_model 128 (about 100k parameters here, against 1–5k for the others);
-- "lru-d4" is the same LRU at the shared sizes (d_model 4, an MLP of 8), the row at matched size.
--
--   build/memscript experiments/parity-ones/parity-ones.lua               (the full run)
--   build/memscript --set quick=true experiments/parity-ones/parity-ones.lua   (a smoke run)
local quick = ms.param("quick", false)
local steps = quick and 30 or ms.param("steps", 40000)

local mixers = { "lstm", "qlstm", "lru", "lru-d4", "linear_attention", "gpt", "deltanet", "mamba" }
local variants = { ["lru-d4"] = { mixer = "lru", d_model = 4, mlp_ratio = 2 } }

local eval_lengths = { [16] = { 16, 24, 32, 64 }, [32] = { 32, 48, 64, 128, 256 } }

ms.sweep{
  name = "parity-ones",
  grid = { mixer = mixers, train_length = { 16, 32 } },
  order = { "train_length", "mixer" },
  seeds = quick and { 41 } or { 41, 42, 43 },
  run = function(p)
    local task = ms.task.parity{ ones = 12 }
    local options = { mixer = p.mixer, preset = "seed-mini", task = task, seed = p.seed }
    for key, value in pairs(variants[p.mixer] or {}) do options[key] = value end
    local model = ms.model.decoder(options)
    return ms.train{
      model = model, task = task, steps = steps, batch = 32, length = p.train_length,
      optimizer = ms.optim.adam{ lr = 1e-3, betas = { 0.9, 0.95 } },
      eval = { lengths = eval_lengths[p.train_length], every = quick and 10 or 1000,
               batches = quick and 2 or 10 },
      seed = p.seed, out = p.out,
    }
  end,
}

ms.report{ runs = "parity-ones", title = "Parity with exactly 12 ones, trained at 16 and 32" }
