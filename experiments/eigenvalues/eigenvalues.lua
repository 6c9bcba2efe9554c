-- Experiment (e), beyond the study: negative eigenvalues, and a hybrid against its parts.
--
-- Questions: (1) DeltaNet and Mamba keep a state whose transition has eigenvalues in (0, 1);
-- `negative_eigenvalues = true` widens them to (−1, 1), which lets a linear recurrence flip a
-- sign per input — what parity needs. Does it make them learn parity at length 32 and keep it
-- at 64, 256 and 1024? (2) A two-layer hybrid swaps one DeltaNet layer for softmax attention
-- (GPT): does it keep what its recurrent part can do, in either order of the layers?
--
-- Setup: running parity of random bits (p_one = 0.5), the small preset (d_model 64, 4 heads,
-- 2 layers), Adam lr 1e-3 betas (0.9, 0.95), batch 32, seed 41, trained at length 32.
--
--   build/memscript experiments/eigenvalues/eigenvalues.lua
--   build/memscript --set quick=true experiments/eigenvalues/eigenvalues.lua
local quick = ms.param("quick", false)
local steps = quick and 30 or ms.param("steps", 2000)

-- Each model by the name its lines carry in the report: the layers, bottom first.
local negative_deltanet = { mixer = "deltanet", negative_eigenvalues = true }
local models = {
  ["deltanet"] = { { mixer = "deltanet" }, { mixer = "deltanet" } },
  ["deltanet-neg"] = { negative_deltanet, negative_deltanet },
  ["mamba"] = { { mixer = "mamba" }, { mixer = "mamba" } },
  ["mamba-neg"] = { { mixer = "mamba", negative_eigenvalues = true },
                    { mixer = "mamba", negative_eigenvalues = true } },
  ["gpt"] = { { mixer = "gpt" }, { mixer = "gpt" } },
  ["deltanet-neg+gpt"] = { negative_deltanet, { mixer = "gpt" } },
  ["gpt+deltanet-neg"] = { { mixer = "gpt" }, negative_deltanet },
}
local names = { "deltanet", "deltanet-neg", "mamba", "mamba-neg", "gpt", "deltanet-neg+gpt",
                "gpt+deltanet-neg" }

ms.sweep{
  name = "eigenvalues",
  grid = { model = names },
  seeds = quick and { 41 } or { 41, 42, 43 },
  run = function(p)
    local task = ms.task.parity{ p_one = 0.5 }
    local model = ms.model.decoder{ layers = models[p.model], preset = "small", task = task,
                                    seed = p.seed }
    return ms.train{
      model = model, task = task, steps = steps, batch = 32, length = 32,
      optimizer = ms.optim.adam{ lr = 1e-3, betas = { 0.9, 0.95 } },
      eval = { lengths = quick and { 32, 64 } or { 32, 64, 256, 1024 }, every = steps // 4,
               batches = quick and 1 or 4 },
      seed = p.seed, out = p.out,
    }
  end,
}

ms.report{ runs = "eigenvalues", line = "model",
           title = "Parity: eigenvalues in (−1, 1) against (0, 1), and a hybrid against its parts" }
