-- Reproduction: Arora et al., "Zoology: Measuring and Improving Recall in Efficient Language
-- Models" (2023), Figure 2: MQAR accuracy against model width at (sequence length, key-value
-- pairs) = (64, 4), (128, 8), (256, 16) (and (512, 64) with `--set large=true`). The paper:
-- attention solves every size at every width (≥ 0.97); the gated and recurrent mixers fall as
-- the pairs grow and rise with the width (their state).
--
-- Protocol (the paper's): Zoology's MQAR layout (`layout = "zoology"`: pairs first, each key
-- queried once at a power-law gap, scored at the key), vocabulary 8192 (keys 4095, values 4096);
-- 2 layers, no MLP; attention with learned absolute positions and one head; AdamW, weight decay
-- 0.1, cosine decay; a learning-rate sweep logspace(−4, −2, 4) reported as its maximum. The paper
-- trains 64 epochs over 100,000 fixed examples; memscript draws fresh examples every step and
-- trains `steps` of `batch` (README.md says what that changes).
--
--   build/memscript experiments/zoology-mqar/zoology-mqar.lua
--   build/memscript --set quick=true experiments/zoology-mqar/zoology-mqar.lua
local quick = ms.param("quick", false)
local steps = quick and 10 or ms.param("steps", 4000)
local batch = quick and 8 or ms.param("batch", 64)
local large = ms.param("large", false)
-- Zoology's vocabulary: half of it values, the other half keys and the token that fills the gaps.
-- Smaller ones (`--set vocab=128`) show how the budget a mixer needs grows with it (README).
local vocab = ms.param("vocab", 8192, function(v)
  return v >= 16 and v % 2 == 0, "an even integer >= 16"
end)

local sizes = { ["64x4"] = { 64, 4 }, ["128x8"] = { 128, 8 }, ["256x16"] = { 256, 16 },
                ["512x64"] = { 512, 64 } }
-- Subsets (--set models=attention, say) run part of the figure on a short lease.
local all_sizes = { "64x4", "128x8", "256x16", "512x64" }  -- the figure's order
local size_names = quick and { "64x4" } or
  ms.param("sizes", { "64x4", "128x8", "256x16" }, all_sizes)
-- `large` adds (512, 64) unless `--set sizes=` names it already (a size runs once).
local function contains(list, wanted)
  for _, item in ipairs(list) do if item == wanted then return true end end
  return false
end
if large and not quick and not contains(size_names, "512x64") then
  size_names[#size_names + 1] = "512x64"
end
local widths = quick and { 64 } or ms.param("widths", { 64, 128 })
local lrs = quick and { 1e-3 } or ms.param("lrs", { 1e-4, 4.6e-4, 2.2e-3, 1e-2 })
local all_models = { "attention", "linear_attention", "deltanet", "gated_deltanet", "mamba" }
local model_names = quick and { "attention", "deltanet" } or
  ms.param("models", all_models, all_models)
-- The recurrent mixers get a short causal convolution before them (Zoology's newer configs,
-- Based, flash-linear-attention): Figure 2's gated convolutions and Mamba all mix neighbouring
-- tokens before recalling, and without it linear attention has no way to attach a value to the
-- key before it (README: it stays on the plateau). `--set short_conv=0` runs them bare.
local short_conv = ms.param("short_conv", 4)
local conv = short_conv > 0 and short_conv or nil
local layer_of = {
  attention = { mixer = "gpt", positions = "learned" },
  linear_attention = { mixer = "linear_attention", short_conv = conv },
  deltanet = { mixer = "deltanet", short_conv = conv },
  gated_deltanet = { mixer = "gated_deltanet", short_conv = conv },
  mamba = { mixer = "mamba" },
}

ms.sweep{
  name = "zoology-mqar",
  grid = { size = size_names, width = widths, model = model_names, lr = lrs },
  order = { "size", "width", "model", "lr" },
  seeds = quick and { 41 } or { 41, 42, 43 },
  run = function(p)
    local length, pairs = sizes[p.size][1], sizes[p.size][2]
    local task = ms.task.mqar{ layout = "zoology", keys = vocab // 2 - 1, values = vocab // 2,
                                  pairs = pairs }
    local layer = layer_of[p.model]
    local model = ms.model.decoder{ layers = { layer, layer }, d_model = p.width, heads = 1,
                                    mlp_ratio = 0, task = task, seed = p.seed }
    return ms.train{
      model = model, task = task, steps = steps, batch = batch, length = length,
      optimizer = ms.optim.adamw{ lr = p.lr, weight_decay = 0.1, warmup = steps // 20,
                                  decay = "cosine" },
      -- A one-length range, so that the report sums it up per run (report.ranges).
      eval = { lengths = { { min = length, max = length } }, every = 0,
               batches = quick and 1 or 4, batch = 64 },
      seed = p.seed, out = p.out,
    }
  end,
}

local report = ms.report{ runs = "zoology-mqar", line = "model",
                          title = "Zoology Figure 2: MQAR accuracy by width (max over lr)" }

-- Figure 2's numbers: per (size, width, model) the best learning rate's mean over seeds.
-- Every (model, width, size) with runs in the folder goes into the table, also those of an
-- earlier part of the grid (--set models=..., then others into the same --out).
local best, seen = {}, { size = {}, width = {}, model = {} }
for _, range in ipairs(report.ranges) do
  local l = range.labels
  seen.size[l.size], seen.width[tonumber(l.width)], seen.model[l.model] = true, true, true
  local key = l.size .. "/" .. l.width .. "/" .. l.model
  if not best[key] or range.accuracy.mean > best[key].mean then
    best[key] = { mean = range.accuracy.mean, low = range.accuracy.low,
                  high = range.accuracy.high, lr = l.lr, n = range.accuracy.n }
  end
end

local function in_order(order, found)
  local list = {}
  for _, value in ipairs(order) do if found[value] then list[#list + 1] = value end end
  return list
end
local shown_widths = {}
for width in pairs(seen.width) do shown_widths[#shown_widths + 1] = width end
table.sort(shown_widths)
local shown_sizes = in_order(all_sizes, seen.size)
local shown_models = in_order(all_models, seen.model)

if next(best) and not ms.dry_run then
  local header = "| model | width |"
  local rule = "| --- | --- |"
  for _, size in ipairs(shown_sizes) do
    header = header .. " " .. size .. " |"
    rule = rule .. " --- |"
  end
  local rows = { header, rule }
  for _, model in ipairs(shown_models) do
    for _, width in ipairs(shown_widths) do
      local row = "| " .. model .. " | " .. width .. " |"
      for _, size in ipairs(shown_sizes) do
        local b = best[size .. "/" .. width .. "/" .. model]
        if not b then
          row = row .. " – |"
        elseif b.low then
          row = row .. string.format(" %.3f [%.3f, %.3f] (lr %s) |", b.mean, math.max(0, b.low),
                                     math.min(1, b.high), b.lr)
        else
          row = row .. string.format(" %.3f (n = 1, lr %s) |", b.mean, b.lr)
        end
      end
      rows[#rows + 1] = row
    end
  end
  local file = assert(io.open(ms.out .. "/zoology-mqar/report/figure2.md", "w"))
  file:write("Query accuracy at the training size: for each model, width and size the learning ",
             "rate with the best mean over seeds, its mean and 95% Student-t interval.\n\n",
             table.concat(rows, "\n"), "\n")
  file:close()
end
