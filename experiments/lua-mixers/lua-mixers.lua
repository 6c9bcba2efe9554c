-- Mixers written in the script against the built-ins: running parity, trained short.
--
-- Question: trained on running parity at length 16, which of the literature's mixers written in
-- Lua (the stdlib's memscript.mixers.*) still track parity at 32, 64 and 128, next to the
-- built-in LSTM, Mamba, DeltaNet and GLA; and does the eigenvalue range matter — (0, 1) against
-- (−1, 1), `negative_eigenvalues` (Grazzi et al., "Unlocking State-Tracking in Linear RNNs
-- Through Negative Eigenvalues", ICLR 2025) — for DeltaNet, Mamba-2 and DeltaProduct?
--
-- Setup (identical for every model; never tuned per mixer): ms.task.parity{ p_one = 0.5 }, every
-- position scored; 2 layers, d_model 32, 2 heads, each mixer's own defaults otherwise; Adam
-- lr 3e-3, betas (0.9, 0.95), clip 1, batch 32, 6,000 steps at length 16; evaluation at 16, 32,
-- 64 and 128 every 500 steps on 8 batches of 32; seeds 41, 42, 43.
-- The twins start from their built-in's weights: deltanet_lua and gla_lua draw their parameters
-- under other names and in another order than deltanet and gla, so the script builds the
-- built-in at the same seed and copies its weights in (twin_of below). From there deltanet_lua
-- is deltanet computed another way, and must train to the same numbers.
--
--   build/memscript experiments/lua-mixers/lua-mixers.lua                  (the full run)
--   build/memscript --set quick=true experiments/lua-mixers/lua-mixers.lua (a smoke run)
for _, file in ipairs{ "deltanet", "gla", "hgrn2", "mlstm", "slstm", "mamba2", "deltaproduct" } do
  require("memscript.mixers." .. file)
end

local quick = ms.param("quick", false)
local steps = quick and 20 or ms.param("steps", 6000)

-- Each model by the name its lines carry in the report (`-neg`: negative_eigenvalues = true).
local models = {
  ["lstm"] = { mixer = "lstm" },
  ["mamba"] = { mixer = "mamba" },
  ["deltanet"] = { mixer = "deltanet" },
  ["deltanet-neg"] = { mixer = "deltanet", negative_eigenvalues = true },
  ["gla"] = { mixer = "gla" },
  ["deltanet_lua"] = { mixer = "deltanet_lua" },
  ["gla_lua"] = { mixer = "gla_lua" },
  ["hgrn2_lua"] = { mixer = "hgrn2_lua" },
  ["mlstm_lua"] = { mixer = "mlstm_lua" },
  ["slstm_lua"] = { mixer = "slstm_lua" },
  ["mamba2_lua"] = { mixer = "mamba2_lua" },
  ["mamba2_lua-neg"] = { mixer = "mamba2_lua", negative_eigenvalues = true },
  ["deltaproduct_lua"] = { mixer = "deltaproduct_lua", householder = 2 },
  ["deltaproduct_lua-neg"] = { mixer = "deltaproduct_lua", householder = 2,
                               negative_eigenvalues = true },
}
local names = quick and { "lstm", "deltanet", "deltanet_lua", "mamba2_lua-neg" }
              or { "lstm", "mamba", "deltanet", "deltanet-neg", "gla", "deltanet_lua", "gla_lua",
                   "hgrn2_lua", "mlstm_lua", "slstm_lua", "mamba2_lua", "mamba2_lua-neg",
                   "deltaproduct_lua", "deltaproduct_lua-neg" }
local twin_of = { deltanet_lua = "deltanet", gla_lua = "gla" }

local function build(name, task, seed)
  local function decoder(layer)
    return ms.model.decoder{ layers = { layer, layer }, d_model = 32, heads = 2, task = task,
                             seed = seed }
  end
  local model = decoder(models[name])
  local twin = twin_of[name]
  if twin then
    -- The built-in's blocks.0.mixer.query.weight is the twin's blocks.0.mixer.query_weight.
    local mine = model:named_parameters()
    for key, value in pairs(decoder(models[twin]):named_parameters()) do
      local own = key:gsub("(mixer%.[%w_]+)%.(%w+)$", "%1_%2")
      assert(mine[own], name .. ": no parameter " .. own .. " for " .. twin .. "'s " .. key)
      mine[own]:copy(value)
    end
  end
  return model
end

local sweep = ms.sweep{
  name = "lua-mixers",
  grid = { model = names },
  seeds = quick and { 41 } or { 41, 42, 43 },
  run = function(p)
    local task = ms.task.parity{ p_one = 0.5 }
    return ms.train{
      model = build(p.model, task, p.seed), task = task, steps = steps, batch = 32, length = 16,
      optimizer = ms.optim.adam{ lr = 3e-3, betas = { 0.9, 0.95 } },
      clip = 1.0,
      eval = { lengths = quick and { 16, 32 } or { 16, 32, 64, 128 },
               every = quick and 10 or 500, batches = quick and 1 or 8 },
      seed = p.seed, out = p.out,
    }
  end,
}

ms.report{ runs = "lua-mixers", line = "model",
           title = "Running parity, trained at 16: mixers written in Lua against the built-ins" }

-- How far each run stays exact: at the last evaluation of the longest length, the first position
-- (1-based) whose accuracy over the evaluation sequences falls below 0.99, per seed, from the
-- run folder's eval_positions.csv; "none" when every position holds.
local function first_error(path)
  local file = io.open(path)
  if not file then return nil end
  local rows, last_step, longest = {}, -1, -1
  for line in file:lines() do
    local step, length, position, accuracy = line:match("^(%d+),(%d+),(%d+),([%d.e+-]+)")
    if step then
      step, length = tonumber(step), tonumber(length)
      rows[#rows + 1] = { step, length, tonumber(position), tonumber(accuracy) }
      last_step, longest = math.max(last_step, step), math.max(longest, length)
    end
  end
  file:close()
  local first
  for _, r in ipairs(rows) do
    if r[1] == last_step and r[2] == longest and r[4] < 0.99 and (not first or r[3] < first) then
      first = r[3]
    end
  end
  return first and tostring(first) or "none", longest
end

local cells, seeds, longest = {}, {}, nil
for _, run in ipairs(sweep.runs) do
  local first, length = first_error(ms.out .. "/" .. run.out .. "/eval_positions.csv")
  if first and run.state ~= "failed" then
    local model, seed = run.params.model, run.params.seed
    cells[model] = cells[model] or {}
    cells[model][seed], seeds[seed], longest = first, true, length
  end
end
local seed_list = {}
for seed in pairs(seeds) do seed_list[#seed_list + 1] = seed end
table.sort(seed_list)
-- (A shard's own pass may find no report folder yet: the last pass, over every run, writes it.)
local report_md = io.open(ms.out .. "/lua-mixers/report/report.md")
if report_md then report_md:close() end
if longest and report_md and not ms.dry_run then
  local rows = { "| model | seed " .. table.concat(seed_list, " | seed ") .. " |",
                 "| --- |" .. string.rep(" --- |", #seed_list) }
  for _, model in ipairs(names) do
    local row = {}
    for i, seed in ipairs(seed_list) do row[i] = cells[model] and cells[model][seed] or "–" end
    rows[#rows + 1] = "| " .. model .. " | " .. table.concat(row, " | ") .. " |"
  end
  local file = assert(io.open(ms.out .. "/lua-mixers/report/first_error.md", "w"))
  file:write("First position (1-based) where token accuracy falls below 0.99 at length ", longest,
             ", last evaluation, per seed (none: every position holds).\n\n",
             table.concat(rows, "\n"), "\n")
  file:close()
end
