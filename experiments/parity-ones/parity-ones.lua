-- Experiment (a): parity of a sequence with exactly 12 ones.
--
-- Question: trained at length 16 or 32, which of the seven mixers still compute parity at 1.5×
-- the training length (24, 48)? And how do their training losses differ — LRU against qLSTM in
-- particular, whose eigenvalues are complex against real and positive?
--
-- Setup (identical for every mixer, as in the study this follows): the seed-mini preset, Adam
-- lr 1e-3 betas (0.9, 0.95), batch 32, seed 41. Each sequence holds exactly 12 ones, so at
-- length 16 most bits are ones and at 48 most are zeros: the lengths differ in their statistics,
-- not only in their length.
--
--   build/memscript experiments/parity-ones/parity-ones.lua               (the full run)
--   build/memscript --set quick=true experiments/parity-ones/parity-ones.lua   (a smoke run)
local quick = ms.param("quick", false)
local steps = quick and 30 or ms.param("steps", 2000)

local mixers = { "lstm", "qlstm", "lru", "linear_attention", "gpt", "deltanet", "mamba" }

ms.sweep{
  name = "parity-ones",
  grid = { mixer = mixers, train_length = { 16, 32 } },
  order = { "train_length", "mixer" },
  seeds = { 41 },
  run = function(p)
    local task = ms.task.parity{ ones = 12 }
    local model = ms.model.decoder{ mixer = p.mixer, preset = "seed-mini", task = task, seed = p.seed }
    return ms.train{
      model = model, task = task, steps = steps, batch = 32, length = p.train_length,
      optimizer = ms.optim.adam{ lr = 1e-3, betas = { 0.9, 0.95 } },
      eval = { lengths = { p.train_length, p.train_length * 3 // 2 }, every = steps // 10,
               batches = quick and 2 or 8 },
      seed = p.seed, out = p.out,
    }
  end,
}

ms.report{ runs = "parity-ones", title = "Parity with exactly 12 ones, trained at 16 and 32" }
