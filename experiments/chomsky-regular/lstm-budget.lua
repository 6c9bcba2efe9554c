-- Is the LSTM's shortfall on cycle navigation and even pairs (Table 2 here: 36–38% and 88–94%
-- on some seeds, the paper 100) the budget? The same model, task and optimizer as
-- chomsky-regular.lua (Adam at a constant lr 1e-3, clip 1, batch 128, lengths 1–40), trained
-- 5 times longer, 15,000 steps, with four test lengths evaluated every 1,500 steps. The lr is
-- constant, so the first 3,000 steps are Table 2's run itself (its evaluation at step 3,000
-- equals Table 2's rows for those lengths, bit for bit) and each evaluation shows what a budget
-- of that many steps gives.
--
--   build/memscript experiments/chomsky-regular/lstm-budget.lua
--   build/memscript --set tasks=cycle_navigation --set seeds=41 experiments/chomsky-regular/lstm-budget.lua
--   build/memscript --set quick=true experiments/chomsky-regular/lstm-budget.lua
local quick = ms.param("quick", false)
local steps = quick and 20 or ms.param("steps", 15000)
local task_names = quick and { "cycle_navigation" } or
    ms.param("tasks", { "cycle_navigation", "even_pairs" })
local seeds = quick and { 41 } or ms.param("seeds", { 41, 42, 43 })
-- The decoder block's MLP after the LSTM (ratio 4, Table 2's model) or none (0: the paper's
-- LSTM reads out its state linearly, with no MLP between): is the block the difference?
local mlp_ratios = ms.param("mlp_ratios", { 4 })

local tasks = {
  cycle_navigation = function() return ms.task.cycle_navigation{ score = "last" } end,
  even_pairs = function() return ms.task.even_pairs{ score = "last" } end,
}
for _, name in ipairs(task_names) do
  assert(tasks[name], "--set tasks=: unknown task " .. name .. " (cycle_navigation, even_pairs)")
end

ms.sweep{
  name = "chomsky-lstm-budget",
  grid = { task = task_names, mlp_ratio = mlp_ratios },
  seeds = seeds,
  run = function(p)
    local task = tasks[p.task]()
    return ms.train{
      model = ms.model.decoder{ layers = { { mixer = "lstm" } }, d_model = 256,
                               mlp_ratio = p.mlp_ratio, task = task, seed = p.seed },
      task = task, steps = steps, batch = quick and 16 or 128, length = { min = 1, max = 40 },
      optimizer = ms.optim.adam{ lr = 1e-3 },
      clip = 1.0,
      -- Every 1,500 steps a few test lengths (the whole range 41–500 at the end would be
      -- Table 2's 460 lengths; four spread over it show the trend at a tenth of the cost).
      eval = { lengths = quick and { 41 } or { 41, 100, 250, 500 }, every = quick and 0 or 1500,
               batches = 1, batch = 32 },
      seed = p.seed, out = p.out,
    }
  end,
}

ms.report{ runs = "chomsky-lstm-budget", line = "task",
           title = "The LSTM on cycle navigation and even pairs, 15,000 steps" }
