-- Reproduction: Delétang et al., "Neural Networks and the Chomsky Hierarchy" (ICLR 2023),
-- Table 2, the regular tasks: parity check, even pairs, cycle navigation and modular arithmetic
-- (mod 5, no brackets). The paper: the LSTM scores 100 on all four; the Transformer 52.0 (parity),
-- ≥ 90 (even pairs), 61.9 (cycle navigation), 24.2 (arithmetic), the best over its positional
-- encodings.
--
-- Protocol (the paper's): train on lengths drawn uniformly from 1..40, test every length 41..500
-- and average; the answer is read at the last position only (score = "last"); accuracy, best of
-- seeds as the paper reports (it also maxes over 3 learning rates; here one, lr 1e-3). The
-- arithmetic sequence counts its '=' cell, so its lengths are one longer (2..41, 42..501). Models:
-- the LSTM (1 layer, d_model 256 as the paper's hidden size) and memscript's causal GPT (5 layers,
-- d_model 64, 8 heads, the paper's encoder sizes) with each of its position kinds (the paper's
-- five less relative encodings, which memscript lacks, plus learned positions). Paper budget:
-- 1,000,000 steps at batch 128; here `steps` (README.md says what that changes).
--
--   build/memscript experiments/chomsky-regular/chomsky-regular.lua
--   build/memscript --set quick=true experiments/chomsky-regular/chomsky-regular.lua
--   build/memscript --set models=gpt-relative --set tasks=cycle_navigation ...  (a part of it)
local quick = ms.param("quick", false)
local steps = quick and 20 or ms.param("steps", 3000)
local batch = quick and 16 or ms.param("batch", 128)

local tasks = {
  parity = function() return ms.task.parity{ p_one = 0.5, score = "last" } end,
  even_pairs = function() return ms.task.even_pairs{ score = "last" } end,
  cycle_navigation = function() return ms.task.cycle_navigation{ score = "last" } end,
  arithmetic = function() return ms.task.arithmetic{ modulus = 5, score = "last" } end,
}
local models = {
  ["lstm"] = { layers = { { mixer = "lstm" } }, d_model = 256 },
  ["gpt-none"] = { mixer = "gpt", positions = "none" },
  ["gpt-sinusoidal"] = { mixer = "gpt", positions = "sinusoidal" },
  ["gpt-learned"] = { mixer = "gpt", positions = "learned" },
  ["gpt-rope"] = { mixer = "gpt", positions = "rope" },
  ["gpt-alibi"] = { mixer = "gpt", positions = "alibi" },
  ["gpt-relative"] = { mixer = "gpt", positions = "relative" },
}
local all_models = { "lstm", "gpt-none", "gpt-sinusoidal", "gpt-learned", "gpt-rope",
                     "gpt-alibi", "gpt-relative" }
local all_tasks = { "parity", "even_pairs", "cycle_navigation", "arithmetic" }

-- --set models=… / tasks=… run a part of the table; each name must be one of the above.
local model_names = ms.param("models", all_models, all_models)
local task_names = ms.param("tasks", all_tasks, all_tasks)

local function build(name, task, seed)
  local m = models[name]
  if m.layers then
    return ms.model.decoder{ layers = m.layers, d_model = m.d_model, task = task, seed = seed }
  end
  local layer = { mixer = m.mixer, positions = m.positions }
  return ms.model.decoder{ layers = { layer, layer, layer, layer, layer }, d_model = 64,
                           heads = 8, task = task, seed = seed }
end

ms.sweep{
  name = "chomsky-regular",
  grid = { task = task_names, model = model_names },
  order = { "task", "model" },
  seeds = quick and { 41 } or { 41, 42, 43 },
  run = function(p)
    local task = tasks[p.task]()
    local shift = p.task == "arithmetic" and 1 or 0
    local test = quick and { min = 41 + shift, max = 43 + shift } or
                 { min = 41 + shift, max = 500 + shift }
    return ms.train{
      model = build(p.model, task, p.seed), task = task, steps = steps, batch = batch,
      length = { min = 1 + shift, max = 40 + shift },
      optimizer = ms.optim.adam{ lr = 1e-3 },
      clip = 1.0,
      eval = { lengths = { test }, every = 0, batches = 1, batch = quick and 8 or 32 },
      seed = p.seed, out = p.out,
    }
  end,
}

local report = ms.report{ runs = "chomsky-regular", line = "model",
  title = "Chomsky hierarchy, regular tasks: accuracy at lengths 41–500 (train 1–40)" }

-- The paper's Table 2 (accuracy in %, the best over seeds and learning rates; the Transformer's
-- also the best over its positional encodings) against memscript's: the best of seeds, then the
-- mean and its 95% interval, over the test range.
local paper = {
  lstm = { parity = "100", even_pairs = "100", cycle_navigation = "100", arithmetic = "100" },
  transformer = { parity = "52.0", even_pairs = "≥ 90", cycle_navigation = "61.9",
                  arithmetic = "24.2" },
}
local found = {}
for _, range in ipairs(report.ranges) do
  found[range.labels.task .. "/" .. range.line] = range.accuracy
end

-- The table holds every model and task with a run in the folder, whether this invocation ran it
-- or an earlier one did: a part run with --set models=… adds its rows to the same table.
local function with_runs(names, part)
  local out = {}
  for _, name in ipairs(names) do
    for key in pairs(found) do
      if part(key) == name then
        out[#out + 1] = name
        break
      end
    end
  end
  return out
end
local table_models = with_runs(all_models, function(key) return key:match("/(.*)$") end)
local table_tasks = with_runs(all_tasks, function(key) return key:match("^(.-)/") end)

local function percent(stats)
  if not stats then return "–" end
  if not stats.low then return string.format("%.1f (n = 1)", 100 * stats.mean) end
  return string.format("**%.1f** · %.1f [%.1f, %.1f]", 100 * stats.max, 100 * stats.mean,
                       100 * math.max(0, stats.low), 100 * math.min(1, stats.high))
end

-- The best gpt of each task, by its best seed: the paper's maximum over encodings.
local function best_gpt(task)
  local best, name = nil, nil
  for _, model in ipairs(table_models) do
    local stats = found[task .. "/" .. model]
    if model ~= "lstm" and stats and (not best or stats.max > best.max) then
      best, name = stats, model
    end
  end
  return best, name
end

if #report.ranges > 0 and not ms.dry_run then
  local header = { "| model |" }
  local rule = { "| --- |" }
  for _, task in ipairs(table_tasks) do
    header[#header + 1] = " " .. task .. ": paper | memscript |"
    rule[#rule + 1] = " --- | --- |"
  end
  local rows = { table.concat(header), table.concat(rule) }
  for _, model in ipairs(table_models) do
    local cells = { "| " .. model .. " |" }
    for _, task in ipairs(table_tasks) do
      local reference = model == "lstm" and paper.lstm[task] or ""
      cells[#cells + 1] = " " .. reference .. " | " .. percent(found[task .. "/" .. model]) .. " |"
    end
    rows[#rows + 1] = table.concat(cells)
  end
  local cells = { "| transformer: best position kind |" }
  for _, task in ipairs(table_tasks) do
    local stats, name = best_gpt(task)
    cells[#cells + 1] = " " .. paper.transformer[task] .. " | " .. percent(stats) ..
                        (name and " (" .. name .. ")" or "") .. " |"
  end
  rows[#rows + 1] = table.concat(cells)
  local file = assert(io.open(ms.out .. "/chomsky-regular/report/table2.md", "w"))
  file:write("Accuracy in % over test lengths 41–500 (arithmetic: 42–501, its '=' cell ",
             "counted): the paper's best; memscript's best of seeds in bold, then the mean and ",
             "its 95% Student-t interval.\n\n", table.concat(rows, "\n"), "\n")
  file:close()
end
