-- Why Mamba [−1, 1] stays at chance on answer-only parity here while the paper reports 1.000:
-- the same model and optimizer as grazzi-table3.lua, three ways, seeds 41, 42, 43:
--   all-3-40    every position scored, lengths 3..40, 1,500 steps
--   last-3-10   the answer only, lengths 3..10, 1,500 steps
--   last-3-40   the answer only, lengths 3..40, 12,000 steps (4× Table 3's run here)
--
--   build/memscript experiments/grazzi-table3/mamba-neg-budget.lua
local quick = ms.param("quick", false)
local variants = {
  ["all-3-40"] = { score = "all", min = 3, max = 40, steps = 1500 },
  ["last-3-10"] = { score = "last", min = 3, max = 10, steps = 1500 },
  ["last-3-40"] = { score = "last", min = 3, max = 40, steps = 12000 },
}

ms.sweep{
  name = "grazzi-mamba-neg",
  grid = { variant = { "all-3-40", "last-3-10", "last-3-40" } },
  seeds = quick and { 41 } or { 41, 42, 43 },
  run = function(p)
    local v = variants[p.variant]
    local steps = quick and 20 or v.steps
    local task = ms.task.parity{ p_one = 0.5, score = v.score }
    local layer = { mixer = "mamba", negative_eigenvalues = true }
    local model = ms.model.decoder{ layers = { layer, layer }, d_model = 128, heads = 4,
                                    task = task, seed = p.seed }
    return ms.train{
      model = model, task = task, steps = steps, batch = quick and 16 or 64,
      length = { min = v.min, max = v.max },
      optimizer = ms.optim.adamw{ lr = 1e-3, weight_decay = 0.1, warmup = steps // 10,
                                  decay = "cosine", min_lr = 1e-5 },
      clip = 1.0,
      eval = { lengths = quick and { 10, 40 } or { 10, 40, 64, 128, 256 },
               every = quick and 0 or steps // 6, batches = 1, batch = 64 },
      seed = p.seed, out = p.out,
    }
  end,
}

ms.report{ runs = "grazzi-mamba-neg", line = "variant",
           title = "Mamba [−1, 1] on parity: every position against the answer only" }
