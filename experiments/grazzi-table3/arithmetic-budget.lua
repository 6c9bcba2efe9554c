-- Is Table 3's arithmetic column (every model at chance after 6,000 steps of 64 here; the paper
-- trains 100,000 of 256 and has DeltaNet [−1, 1] at 0.971, DeltaNet [0, 1] at 0.314) only the
-- budget? The same models, task and optimizer as grazzi-table3.lua (AdamW lr 1e-3, weight
-- decay 0.1, 10% warmup, cosine to 1e-5, clip 1, batch 64, lengths 3–40, answer only), trained
-- `steps` (default 24,000: 4 times the table's run) with test lengths evaluated along the way.
-- The schedule spans the longer run, so an evaluation at step 6,000 is not the table's run (its
-- learning rate is still high there); the last one is the 4× budget's answer.
--
--   build/memscript experiments/grazzi-table3/arithmetic-budget.lua
--   build/memscript --set models=deltanet-neg --set seeds=41 experiments/grazzi-table3/arithmetic-budget.lua
--   build/memscript --set quick=true experiments/grazzi-table3/arithmetic-budget.lua
local quick = ms.param("quick", false)
local steps = quick and 20 or ms.param("steps", 24000)
local seeds = quick and { 41 } or ms.param("seeds", { 41 })
local model_names = ms.param("models", { "deltanet-neg", "deltanet" })

local layers = {
  ["deltanet"] = { mixer = "deltanet" },
  ["deltanet-neg"] = { mixer = "deltanet", negative_eigenvalues = true },
  ["mamba-neg"] = { mixer = "mamba", negative_eigenvalues = true },
  ["transformer"] = { mixer = "gpt" },
}
for _, name in ipairs(model_names) do
  assert(layers[name], "--set models=: unknown model " .. name ..
         " (deltanet, deltanet-neg, mamba-neg, transformer)")
end

ms.sweep{
  name = "grazzi-arithmetic-budget",
  grid = { model = model_names },
  seeds = seeds,
  run = function(p)
    local task = ms.task.arithmetic{ modulus = 5, operators = "+-*", score = "last" }
    local layer = layers[p.model]
    local model = ms.model.decoder{ layers = { layer, layer }, d_model = 128, heads = 4,
                                    task = task, seed = p.seed }
    return ms.train{
      model = model, task = task, steps = steps, batch = quick and 16 or 64,
      length = { min = 3, max = 40 },
      optimizer = ms.optim.adamw{ lr = 1e-3, weight_decay = 0.1, warmup = steps // 10,
                                  decay = "cosine", min_lr = 1e-5 },
      clip = 1.0,
      -- Every steps/8: lengths inside the training range (10, 40) and beyond it.
      eval = { lengths = quick and { 10, 40 } or { 10, 40, 64, 128, 256 },
               every = quick and 0 or steps // 8, batches = quick and 1 or 2, batch = 64 },
      seed = p.seed, out = p.out,
    }
  end,
}

ms.report{ runs = "grazzi-arithmetic-budget", line = "model",
           title = "Arithmetic (mod 5, answer only) at 4 times Table 3's budget" }
