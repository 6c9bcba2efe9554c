-- Experiment (d): multi-query associative recall (MQAR) with up to 64 key-value pairs.
--
-- Question: which mixers learn to recall the value bound to a key when a sequence binds up to
-- 64 pairs (the study this follows never went beyond 3 keys), and how does accuracy fall with
-- the number of pairs for the mixers whose state has a fixed size?
--
-- Setup: 64 keys, 64 values, sequences of length 192 (64 pairs and 64 queries fit; fewer pairs
-- leave pads in front, so the distance from the pairs to the queries is the same for every
-- count). Training draws the number of pairs per sequence between 4 and 64, so every batch
-- mixes easy and hard sequences; afterwards each model is evaluated at 4, 8, 16, 32 and 64
-- pairs. The small preset (d_model 64, 4 heads, 2 layers; Mamba d_state 8), Adam lr 1e-3 betas
-- (0.9, 0.95), batch 32, seed 41, for every mixer. Only query positions are scored: chance is
-- 1/64.
--
-- One hybrid joins the seven: a qLSTM layer under a softmax-attention layer without positions.
-- Recall is a lookup: the value's position must carry the key before it (the qLSTM's gates see
-- whether a token is a key or a value, so it can hold the last key for one step), and the
-- query must find that position by content (attention).
--
--   build/memscript experiments/mqar-pairs/mqar-pairs.lua
--   build/memscript --set quick=true experiments/mqar-pairs/mqar-pairs.lua
local quick = ms.param("quick", false)
local steps = quick and 20 or ms.param("steps", 2000)
local keys, length = 64, 192
local pair_counts = quick and { 4, 64 } or { 4, 8, 16, 32, 64 }

local mixers = { "lstm", "qlstm", "lru", "linear_attention", "gpt", "deltanet", "mamba",
                 "qlstm+gpt" }
local layers = { ["qlstm+gpt"] = { { mixer = "qlstm" }, { mixer = "gpt", positions = "none" } } }

local function mqar(pairs) return ms.task.mqar{ keys = keys, values = keys, pairs = pairs } end

-- Accuracy of a trained model at each number of pairs, into <run>/accuracy_by_pairs.csv.
local function evaluate_by_pairs(model, run_folder)
  local rows = { "pairs,accuracy,sequence_accuracy" }
  for _, count in ipairs(pair_counts) do
    local scores = ms.evaluate(model, mqar(count), { lengths = { length }, batches = quick and 1 or 4 })
    rows[#rows + 1] = string.format("%d,%.6f,%.6f", count, scores[length].accuracy,
                                    scores[length].sequence_accuracy)
  end
  local file = assert(io.open(run_folder .. "/accuracy_by_pairs.csv", "w"))
  file:write(table.concat(rows, "\n"), "\n")
  file:close()
end

local sweep = ms.sweep{
  name = "mqar-pairs",
  grid = { mixer = mixers },
  seeds = quick and { 41 } or { 41, 42, 43 },
  run = function(p)
    local task = mqar{ min = 4, max = 64 }
    local model = ms.model.decoder{ mixer = not layers[p.mixer] and p.mixer or nil,
                                    layers = layers[p.mixer], preset = "small", task = task,
                                    seed = p.seed }
    local run = ms.train{
      model = model, task = task, steps = steps, batch = 32, length = length,
      optimizer = ms.optim.adam{ lr = 1e-3, betas = { 0.9, 0.95 } },
      eval = { lengths = { length }, every = steps // 10, batches = quick and 1 or 4 },
      seed = p.seed, out = p.out,
    }
    if not run.skipped and not ms.dry_run then evaluate_by_pairs(model, run.out) end
    return run
  end,
}

ms.report{ runs = "mqar-pairs", title = "MQAR, 4 to 64 pairs per sequence, length 192" }

-- Accuracy against pairs, one line per mixer: a plot and a table next to the report.
local function read_by_pairs(path)
  local file = io.open(path)
  if not file then return nil end
  local x, y = {}, {}
  for line in file:lines() do
    local count, accuracy = line:match("^(%d+),([%d.e+-]+)")
    if count then x[#x + 1], y[#y + 1] = tonumber(count), tonumber(accuracy) end
  end
  file:close()
  return x, y
end

-- Over the seeds of each mixer: the mean at each number of pairs, its 95% interval (Student t,
-- as ms.report gives; clipped to [0, 1] and drawn as a band) and the best seed.
local function seed_summary(values)
  local s = ms.seed_stats{ values = values, range = { 0, 1 } }
  if not s.low then return string.format("%.3f (n = 1)", s.mean), s.mean, s.mean, s.mean end
  return string.format("%.3f [%.3f, %.3f] (%.3f)", s.mean, s.low, s.high, s.max), s.mean, s.low,
         s.high
end

local by_mixer, order = {}, {}
for _, run in ipairs(sweep.runs) do
  local x, y = read_by_pairs(ms.out .. "/" .. run.out .. "/accuracy_by_pairs.csv")
  if x then -- written right after training; missing while a run (or another shard) is unfinished
    local mixer = run.params.mixer
    if not by_mixer[mixer] then by_mixer[mixer], order[#order + 1] = { x = x, seeds = {} }, mixer end
    table.insert(by_mixer[mixer].seeds, y)
  end
end

local lines, table_rows = {}, {}
for _, mixer in ipairs(order) do
  local entry, means, lows, highs, cells = by_mixer[mixer], {}, {}, {}, {}
  for i = 1, #entry.x do
    local values = {}
    for _, y in ipairs(entry.seeds) do values[#values + 1] = y[i] end
    cells[i], means[i], lows[i], highs[i] = seed_summary(values)
  end
  lines[#lines + 1] = { label = mixer, x = entry.x, y = means, low = lows, high = highs }
  table_rows[#table_rows + 1] = "| " .. mixer .. " | " .. #entry.seeds .. " | " ..
                                table.concat(cells, " | ") .. " |"
end
if #lines > 0 and not ms.dry_run then
  ms.plot{ file = "mqar-pairs/report/accuracy_vs_pairs.svg", lines = lines, log_x = true,
           y_range = { 0, 1 }, x_label = "key-value pairs in the sequence",
           y_label = "accuracy, mean over seeds",
           title = "MQAR: query accuracy against pairs (length " .. length .. ")" }
  local header = "| mixer | seeds | " .. table.concat(pair_counts, " pairs | ") .. " pairs |"
  local rule = "| --- | --- |" .. string.rep(" --- |", #pair_counts)
  local file = assert(io.open(ms.out .. "/mqar-pairs/report/accuracy_vs_pairs.md", "w"))
  file:write("Query accuracy by number of pairs (chance 1/64): the mean over seeds, its 95% ",
             "interval (Student t, clipped to [0, 1]) and the best of seeds in brackets.\n\n",
             header, "\n", rule, "\n", table.concat(table_rows, "\n"), "\n")
  file:close()
end
