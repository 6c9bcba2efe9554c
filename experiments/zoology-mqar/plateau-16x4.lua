-- A plain GPT's plateau on MQAR, on the CPU: memscript's MQAR at (length, pairs) =
-- (16, 4) with 64 keys and 64 values, experiments/mqar-pairs's model and optimizer (preset
-- small: d_model 64, 4 heads, 2 layers, learned positions; Adam betas (0.9, 0.95), constant
-- lr, batch 32). At lr 1e-3 it answers "some value that appeared" (accuracy about 0.27, loss
-- near ln 4) for thousands of steps. Which budget, and which learning rate, leaves it?
--
-- Each run is evaluated every 250 steps on the same 128 held-out sequences; the script writes
-- plateau-16x4/report/escape.md (per heads and lr: the first evaluation at or above 0.5 and
-- 0.9 for each seed, and the final accuracy over seeds) and escape.svg (the curves).
--
--   build/memscript --threads 1 experiments/zoology-mqar/plateau-16x4.lua          # 12 runs
--   build/memscript --threads 1 --set heads=4,1 experiments/zoology-mqar/plateau-16x4.lua
--     (adds one head; escape.md lists the heads it is given, so name both)
--   build/memscript --set quick=true experiments/zoology-mqar/plateau-16x4.lua     # ~5 s
local quick = ms.param("quick", false)
local steps = quick and 100 or ms.param("steps", 10000)
local every = quick and 50 or 250
local length, keys, pairs = 16, 64, 4
local lrs = quick and { 3e-4 } or ms.param("lrs", { 1e-4, 3e-4, 1e-3, 3e-3 })
local heads = ms.param("heads", { 4 })
local seeds = quick and { 41 } or { 41, 42, 43 }

local sweep = ms.sweep{
  name = "plateau-16x4",
  grid = { heads = heads, lr = lrs },
  order = { "heads", "lr" },
  seeds = seeds,
  run = function(p)
    local task = ms.task.mqar{ keys = keys, values = keys, pairs = pairs }
    local model = ms.model.decoder{ mixer = "gpt", preset = "small", heads = p.heads,
                                    task = task, seed = p.seed }
    return ms.train{
      model = model, task = task, steps = steps, batch = 32, length = length,
      optimizer = ms.optim.adam{ lr = p.lr, betas = { 0.9, 0.95 } },
      eval = { lengths = { length }, every = every, batches = 4, batch = 32 },
      seed = p.seed, out = p.out,
    }
  end,
}
ms.report{ runs = "plateau-16x4", line = "lr",
           title = "gpt on MQAR (16, 4), 64 keys: accuracy by learning rate" }

-- A run's held-out accuracy at each evaluation step, from its eval.csv (step, length, accuracy, ...).
local function curve(run)
  local file = io.open(ms.out .. "/" .. run.out .. "/eval.csv")
  if not file then return nil end
  local points = {}
  file:read("l")
  for line in file:lines() do
    local step, accuracy = line:match("^(%d+),%d+,([%d.]+),")
    if step then points[#points + 1] = { step = tonumber(step), accuracy = tonumber(accuracy) } end
  end
  file:close()
  return points
end

local function first_step(points, threshold)
  for _, point in ipairs(points) do
    if point.accuracy >= threshold then return tostring(point.step) end
  end
  return "never"
end

-- Runs grouped by (heads, lr) in grid order, completed runs only.
local groups, order = {}, {}
for _, run in ipairs(sweep.runs) do
  local points = ms.run_completed(run) and curve(run)
  if points and #points > 0 then
    local key = "heads " .. run.params.heads .. ", lr " .. run.params.lr
    if not groups[key] then groups[key], order[#order + 1] = {}, key end
    table.insert(groups[key], { seed = run.params.seed, points = points })
  end
end

local rows = {
  "gpt (preset small) on MQAR, length 16, 4 pairs, 64 keys: held-out query accuracy " ..
  "(128 sequences) every " .. every .. " steps; the first step at or above 0.5 and 0.9 for " ..
  "each seed, and the accuracy after step " .. steps .. " over seeds (mean [95% t, clipped " ..
  "to [0, 1]], best).",
  "",
  "| setting | seeds | first ≥ 0.5 | first ≥ 0.9 | final: mean [95%] | best |",
  "| --- | --- | --- | --- | --- | --- |",
}
local lines = {}
for _, key in ipairs(order) do
  local runs, half, most, finals = groups[key], {}, {}, {}
  for _, run in ipairs(runs) do
    half[#half + 1] = first_step(run.points, 0.5)
    most[#most + 1] = first_step(run.points, 0.9)
    finals[#finals + 1] = run.points[#run.points].accuracy
  end
  local final = ms.seed_stats{ values = finals, range = { 0, 1 } }
  local interval = final.low and string.format(" [%.3f, %.3f]", final.low, final.high) or ""
  rows[#rows + 1] = string.format("| %s | %d | %s | %s | %.3f%s | %.3f |", key, #runs,
                                  table.concat(half, ", "), table.concat(most, ", "),
                                  final.mean, interval, final.max)
  -- The curve: the mean over seeds at each evaluation step, the seeds' interval as a band.
  local x, y, low, high = {}, {}, {}, {}
  for i, point in ipairs(runs[1].points) do
    local values = {}
    for _, run in ipairs(runs) do
      if run.points[i] and run.points[i].step == point.step then
        values[#values + 1] = run.points[i].accuracy
      end
    end
    if #values == #runs then
      local stats = ms.seed_stats{ values = values, range = { 0, 1 } }
      x[#x + 1], y[#y + 1] = point.step, stats.mean
      low[#low + 1] = stats.low or stats.mean
      high[#high + 1] = stats.high or stats.mean
    end
  end
  lines[#lines + 1] = { label = key, x = x, y = y, low = low, high = high }
end

local folder = "plateau-16x4/report"
local file = assert(io.open(ms.out .. "/" .. folder .. "/escape.md", "w"))
file:write(table.concat(rows, "\n"), "\n")
file:close()
print(table.concat(rows, "\n"))
if #lines > 0 then
  ms.plot{ file = folder .. "/escape.svg", lines = lines, y_range = { 0, 1 },
           title = "gpt, MQAR (16, 4), 64 keys: held-out accuracy (mean of seeds)",
           x_label = "step", y_label = "accuracy" }
end
