-- Reproduction: Poli et al., "Mechanistic Design and Scaling of Hybrid Architectures" (ICML
-- 2024), the MAD synthetic benchmark (athms/mad-lab), with the mixers memscript has. The
-- published per-task scores (Yang et al. 2024, the DeltaNet paper's MAD table, the non-DeltaNet
-- rows taken from Poli et al.): averages over the six tasks Transformer 74.5, DeltaNet 71.8,
-- Mamba 69.3, GLA 60.0.
--
-- Protocol (mad-lab's benchmark.py, configs/tasks/*.yml, mad/configs.py; README.md has the
-- sources): each task is run at a baseline setting and at settings that each change one knob
-- (vocabulary, sequence length, training-set size, noise, tokens to copy); each setting is
-- trained at every lr in {1e-4, 5e-4, 1e-3} × weight decay in {0, 0.1} and keeps its best test
-- accuracy; a task's score is the mean over its settings. Training: AdamW, cosine decay to
-- 1e-6 over 200 epochs of a fixed training set (12,800 sequences at baseline), batch 128,
-- stopped once test accuracy reaches 0.999; the test set is 1,280 fresh sequences. Models: 4
-- layers of width 128 = 2 blocks of mixer + MLP, MAD's RMSNorm and SwiGLU. Compression is left
-- out: MAD decodes it from one embedding with an MLP, which a causal per-position decoder cannot
-- do (README.md).
--
-- Seeds: the lr × weight-decay grid on seed 41 (MAD runs one seed), then each setting's best
-- lr / weight decay again on seeds 42 and 43 (sweep mad-seeds). Unsharded, one invocation does
-- both; sharded, a seed run whose grid cell is unfinished waits for the next invocation.
--
--   build/memscript experiments/mad/mad.lua                          the whole protocol
--   build/memscript --set settings=baseline experiments/mad/mad.lua  one setting per task
--   build/memscript --set quick=true experiments/mad/mad.lua         smoke run, ~5 s
-- Other knobs: --set epochs=200, mixers=gpt,deltanet,mamba (also gla, gated_deltanet, retnet),
-- tasks=<comma list>, lrs=1e-4,5e-4,1e-3, wds=0,0.1, phase=all|grid|seeds,
-- blocks=mad|memscript|rmsnorm-gelu|layernorm-swiglu, mlp_hidden=<units> (0: the blocks' own),
-- mlp_bias=blocks|true|false (the blocks' own: GELU with biases, SwiGLU without).
local quick = ms.param("quick", false)
local phase = ms.param("phase", "all", { "all", "grid", "seeds" })
local epochs = ms.param("epochs", 200)
local batch = quick and 8 or 128
local test_batches = quick and 1 or 10 -- MAD's test set: 1,280 sequences

local mixers = quick and { "gpt", "mamba" } or
  ms.param("mixers", { "gpt", "deltanet", "mamba" },
           { "gpt", "deltanet", "mamba", "gla", "gated_deltanet", "retnet" })
local lrs = quick and { 1e-3 } or ms.param("lrs", { 1e-4, 5e-4, 1e-3 })
local wds = quick and { 0 } or ms.param("wds", { 0, 0.1 })
for i, wd in ipairs(wds) do if wd == 0 then wds[i] = 0 end end -- "0", not "0.0", in run names

-- MAD's five tasks that fit a causal decoder: the baseline setting and the knobs each changed
-- setting moves (configs/tasks/*.yml). `train` is the training-set size.
local tasks = {
  { name = "fuzzy_recall", title = "Fuzzy Recall",
    base = { vocab = 16, length = 128, train = 12800 },
    changes = { { "vocab", { 32, 64, 128 } }, { "length", { 256, 512, 1024 } },
                { "train", { 6400, 3200, 1600, 800 } } } },
  { name = "in_context_recall", title = "In-Context Recall",
    base = { vocab = 16, length = 128, train = 12800 },
    changes = { { "vocab", { 32, 64, 128 } }, { "length", { 256, 512, 1024 } },
                { "train", { 6400, 3200, 1600, 800 } } } },
  { name = "memorization", title = "Memorize",
    base = { vocab = 256, length = 32, train = 256 },
    changes = { { "vocab", { 512, 1024, 2048, 4096, 8192 } } } },
  { name = "noisy_recall", title = "Noisy Recall",
    base = { vocab = 32, length = 128, train = 12800, noise = 0.2 },
    changes = { { "vocab", { 48, 80, 144 } }, { "length", { 256, 512, 1024 } },
                { "train", { 6400, 3200, 1600, 800 } }, { "noise", { 0.4, 0.6, 0.8 } } } },
  { name = "selective_copying", title = "Selective Copy",
    base = { vocab = 16, length = 256, train = 12800, copies = 16 },
    changes = { { "vocab", { 32, 64, 128 } }, { "length", { 512, 1024 } },
                { "train", { 6400, 3200, 1600, 800 } }, { "copies", { 32, 64, 96 } } } },
}

-- A task's settings, named "<task>.base" or "<task>.<knob>-<value>", in the config files' order.
local function task_settings(task)
  local list = { { name = task.name .. ".base", knobs = task.base } }
  for _, change in ipairs(task.changes) do
    local knob, values = change[1], change[2]
    for _, value in ipairs(values) do
      local knobs = {}
      for k, v in pairs(task.base) do knobs[k] = v end
      knobs[knob] = value
      list[#list + 1] = { name = task.name .. "." .. knob .. "-" .. tostring(value), knobs = knobs }
    end
  end
  return list
end

local task_names = {}
for _, task in ipairs(tasks) do task_names[#task_names + 1] = task.name end
local wanted_tasks = {}
for _, name in ipairs(ms.param("tasks", {}, task_names)) do wanted_tasks[name] = true end
local function wanted(task) return not next(wanted_tasks) or wanted_tasks[task.name] end

-- all, baseline, or setting names (comma-separated, as listed by --dry-run): a part of the
-- protocol, e.g. the reruns one setting still lacks.
local known_settings = {}
for _, task in ipairs(tasks) do
  task.candidates = wanted(task) and task_settings(task) or {}
  for _, setting in ipairs(task.candidates) do known_settings[setting.name] = true end
end
local settings_kind = quick and "baseline" or ms.param("settings", "all", function(value)
  if value == "all" or value == "baseline" then return true end
  local expected = "all, baseline, or names of settings of the tasks run " ..
                   "(<task>.base, <task>.<knob>-<value>: --dry-run lists them)"
  if not value:find("[^,]") then return false, expected end
  for name in value:gmatch("[^,]+") do
    if not known_settings[name] then return false, expected .. " (no setting " .. name .. ")" end
  end
  return true
end)
local named_settings = {}
if settings_kind ~= "all" and settings_kind ~= "baseline" then
  for name in settings_kind:gmatch("[^,]+") do named_settings[name] = true end
  settings_kind = "named"
end

local settings, setting_names = {}, {}
for _, task in ipairs(tasks) do
  task.settings = {}
  for i, setting in ipairs(task.candidates) do
    local name = setting.name
    if settings_kind == "all" or (settings_kind == "baseline" and i == 1) or
        named_settings[name] then
      setting.knobs.task = task.name
      -- The fixed training set's seed follows the setting's place among its task's settings,
      -- whatever else --set tasks and settings select: one setting, one training set.
      setting.knobs.data_seed = 1000000 * i
      settings[name] = setting.knobs
      setting_names[#setting_names + 1] = name
      task.settings[#task.settings + 1] = name
    end
  end
end

-- The task a setting trains on (MAD's training targets: the next token everywhere for the
-- recall tasks), the one it is tested on (MAD's test targets) and the model's length. The recall
-- tasks use mad-lab's multi-query layout (its benchmark's `multi_query: True`); in in-context and
-- noisy recall the model reads all but the last of seq_len tokens, so length 128 is 127 here as
-- there (fuzzy recall pads to seq_len + 1 tokens, so its model reads 128).
local function make_tasks(s)
  if s.task == "in_context_recall" or s.task == "noisy_recall" then
    local options = { vocab = s.vocab, multi_query = true }
    if s.task == "noisy_recall" then options.noise_vocab, options.noise = 16, s.noise end
    local test = { test = true }
    for k, v in pairs(options) do test[k] = v end
    return ms.task.in_context_recall(options), ms.task.in_context_recall(test), s.length - 1
  elseif s.task == "fuzzy_recall" then
    local options = { vocab = s.vocab, key_size = 3, value_size = 3, multi_query = true }
    local test = { test = true }
    for k, v in pairs(options) do test[k] = v end
    return ms.task.fuzzy_recall(options), ms.task.fuzzy_recall(test), s.length
  elseif s.task == "selective_copying" then
    local task = ms.task.selective_copying{ vocab = s.vocab, copies = s.copies }
    return task, task, s.length
  end
  local task = ms.task.memorization{ vocab = s.vocab }
  return task, task, s.length
end

-- MAD trains on a fixed set of `examples` sequences for many epochs. memscript draws fresh
-- batches, so this task draws each training sequence from such a set: sequence j of the set is
-- the base task's sequence of seed data_seed + j, the same in every run of the setting (MAD's
-- data are fixed too; the run's seed changes the initial weights and the order).
local function training_set(base, examples, data_seed, trained_length)
  return ms.task.define{
    name = "mad_training_set", vocab = base:vocab_size(), classes = base:num_classes(),
    sample = function(rng, length)
      -- ms.task.define checks the function at length 4, shorter than some tasks allow: zeros.
      if length ~= trained_length then
        local zeros = {}
        for t = 1, length do zeros[t] = 0 end
        return zeros, zeros
      end
      local b = base:sample{ batch = 1, length = length, seed = data_seed + rng:int(examples) }
      return b.inputs:tolist()[1], b.targets:tolist()[1], b.mask:tolist()[1]
    end,
  }
end

-- MAD's layer configurations (configs/layers/): attention with 16 heads and rotary positions
-- (mh-attention), Mamba with d_state 4 (mamba.yml); the linear-attention family with 8 heads of
-- 16, keys as wide as values (mh-gated-linear-attention); DeltaNet with a short convolution
-- (the DeltaNet paper's MAD table: "(Multi-head) Hyena, DeltaNet and Mamba make use of
-- convolutions, whereas GLA does not").
local layer_of = {
  gpt = { mixer = "gpt", positions = "rope" },
  mamba = { mixer = "mamba", d_state = 4, d_conv = 4, expand = 2 },
  deltanet = { mixer = "deltanet", short_conv = 4 },
  gated_deltanet = { mixer = "gated_deltanet", short_conv = 4 },
  gla = { mixer = "gla", key_dim = 16 },
  retnet = { mixer = "retnet" },
}
-- The blocks around the mixers: MAD's (language_model.py, layers/mlp.py): RMSNorm (eps 1e-5)
-- and a SwiGLU MLP without biases, int(2 · 4 · 128 / 3) rounded up to a multiple of 16 = 352
-- wide; or memscript's default LayerNorm and GELU MLP of 4 × 128, which the first runs used.
-- The two crossings tell which half of the block moves a result: MAD's norm in memscript's
-- MLP (rmsnorm-gelu) and memscript's norm around MAD's MLP (layernorm-swiglu).
local blocks = ms.param("blocks", "mad",
                        { "mad", "memscript", "rmsnorm-gelu", "layernorm-swiglu" })
local block_options = {
  mad = { norm = "rms", norm_eps = 1e-5, mlp = "swiglu", mlp_hidden = 352 },
  memscript = { mlp_ratio = 4 },
  ["rmsnorm-gelu"] = { norm = "rms", norm_eps = 1e-5, mlp_ratio = 4 },
  ["layernorm-swiglu"] = { mlp = "swiglu", mlp_hidden = 352 },
}
-- The MLP's hidden width in place of the blocks' own (0: theirs), to tell its form from its width.
local mlp_hidden = ms.param("mlp_hidden", 0, function(value)
  return value >= 0 and value == math.floor(value), "a whole number of units, 0 for the blocks' own"
end)
-- The MLP's biases in place of the blocks' own, to tell SwiGLU's gate from its lack of biases.
local mlp_bias = ms.param("mlp_bias", "blocks", { "blocks", "true", "false" })
local function build(mixer, task, seed)
  local layer = layer_of[mixer]
  local options = { layers = { layer, layer }, d_model = 128, heads = mixer == "gpt" and 16 or 8,
                    task = task, seed = seed }
  for k, v in pairs(block_options[blocks]) do options[k] = v end
  if mlp_hidden > 0 then options.mlp_ratio, options.mlp_hidden = nil, mlp_hidden end
  if mlp_bias ~= "blocks" then options.mlp_bias = mlp_bias == "true" end
  return ms.model.decoder(options)
end

-- A run's test scores, written before its status becomes "completed".
local function result_file(out) return ms.out .. "/" .. out .. "/mad_test.csv" end
local columns = { "step", "lr", "weight_decay", "train_accuracy", "accuracy", "recall",
                  "sequence_accuracy", "loss", "best_step", "best_accuracy", "best_recall",
                  "best_loss" }

local function train(p, lr, wd)
  local s = settings[p.setting]
  local train_task, test_task, length = make_tasks(s)
  local per_epoch = (s.train + batch - 1) // batch
  local steps = quick and 3 or epochs * per_epoch
  -- MAD scores the test set after every epoch; here every epoch, but at most every 100 steps.
  local check_every = quick and 2 or per_epoch * ((100 + per_epoch - 1) // per_epoch)
  local model = build(p.mixer, train_task, p.seed)
  -- MAD reports the checkpoint with the lowest test loss (perplexity): tracked over the checks.
  local best
  local function check(step)
    local t = ms.evaluate(model, test_task, { lengths = { length }, batches = test_batches,
                                              batch = batch })[length]
    if not best or t.loss < best.loss then
      best = { step = step, accuracy = t.accuracy, recall = t.recall, loss = t.loss }
    end
    return t
  end
  return ms.train{
    model = model, task = training_set(train_task, s.train, s.data_seed, length),
    steps = steps, batch = batch, length = length,
    optimizer = ms.optim.adamw{ lr = lr, weight_decay = wd, betas = { 0.9, 0.999 },
                                decay = "cosine", min_lr = 1e-6 },
    -- On the training set (MAD's train_acc); the test set is scored in on_step and on_eval.
    eval = { lengths = { length }, every = 0, batches = test_batches, batch = batch },
    on_step_every = check_every,
    on_step = function(r) -- MAD's early stop: test accuracy 0.999
      if r.step < steps and check(r.step).recall >= 0.999 then return "stop" end
    end,
    on_eval = function(scores, step)
      local t = check(step)
      local values = { step, lr, wd, scores[length].accuracy, t.accuracy, t.recall,
                       t.sequence_accuracy, t.loss, best.step, best.accuracy, best.recall,
                       best.loss }
      for i, v in ipairs(values) do values[i] = string.format("%.8g", v) end
      local file = assert(io.open(result_file(p.out), "w"))
      file:write(table.concat(columns, ","), "\n", table.concat(values, ","), "\n")
      file:close()
    end,
    seed = p.seed, out = p.out,
  }
end

-- Run folders are named as ms.sweep names them: grid keys in `order`, then the seed.
local function grid_run(setting, mixer, lr, wd)
  return string.format("mad/setting=%s,mixer=%s,lr=%s,weight_decay=%s,seed=41", setting, mixer,
                       tostring(lr), tostring(wd))
end

-- A completed run's mad_test.csv; `score` is what MAD reports: the test accuracy (macro over
-- classes, as torchmetrics' MulticlassAccuracy: memscript's recall) of the lowest-loss check.
local function read_result(out)
  local file = ms.run_completed(out) and io.open(result_file(out))
  if not file then return nil end
  file:read("l")
  local r, i = {}, 0
  for x in (file:read("l") or ""):gmatch("[^,]+") do
    i = i + 1
    if columns[i] then r[columns[i]] = tonumber(x) end
  end
  file:close()
  if not r.best_recall then return nil end
  r.score = r.best_recall
  return r
end

-- MAD's choice per setting and mixer: the best score over the lr × weight-decay grid.
local function best_of_grid(setting, mixer)
  local best, found = nil, 0
  for _, lr in ipairs(lrs) do
    for _, wd in ipairs(wds) do
      local r = read_result(grid_run(setting, mixer, lr, wd))
      if r then
        found = found + 1
        if not best or r.score > best.score then best = r end
      end
    end
  end
  return best, found == #lrs * #wds
end

if phase ~= "seeds" then
  ms.sweep{
    name = "mad",
    grid = { setting = setting_names, mixer = mixers, lr = lrs, weight_decay = wds },
    order = { "setting", "mixer", "lr", "weight_decay" },
    seeds = { 41 },
    run = function(p) return train(p, p.lr, p.weight_decay) end,
  }
  ms.report{ runs = "mad", line = "mixer",
             title = "MAD: training-set accuracy (the test scores are in mad-table.md)" }
end

local waiting = 0
if phase ~= "grid" and not quick then
  ms.sweep{
    name = "mad-seeds",
    grid = { setting = setting_names, mixer = mixers },
    order = { "setting", "mixer" },
    seeds = { 42, 43 },
    run = function(p)
      local best, complete = best_of_grid(p.setting, p.mixer)
      if not complete then -- the grid cell is unfinished (another shard): left for later
        waiting = waiting + 1
        return { waiting = true }
      end
      return train(p, best.lr, best.weight_decay)
    end,
  }
  ms.report{ runs = "mad-seeds", line = "mixer",
             title = "MAD, seeds 42 and 43 at each setting's best lr and weight decay" }
  if waiting > 0 then
    io.stderr:write(string.format("mad: %d seed runs wait for their lr × weight-decay grid; " ..
                                  "run the script again once the grid is complete\n", waiting))
  end
end

-- The table: the paper's scores (% test accuracy, mean over a task's settings of the best over
-- lr × weight decay) beside memscript's. Yang et al. 2024's MAD table; compression, left out
-- here, is the paper's first column (Transformer 51.6, DeltaNet 42.2, Mamba 52.7, GLA 38.8).
local paper = {
  gpt = { fuzzy_recall = 29.8, in_context_recall = 94.1, memorization = 85.2,
          noisy_recall = 86.8, selective_copying = 99.6, six = 74.5 },
  deltanet = { fuzzy_recall = 35.7, in_context_recall = 100, memorization = 52.8,
               noisy_recall = 100, selective_copying = 100, six = 71.8 },
  mamba = { fuzzy_recall = 6.7, in_context_recall = 90.4, memorization = 89.5,
            noisy_recall = 90.1, selective_copying = 86.3, six = 69.3 },
  gla = { fuzzy_recall = 6.9, in_context_recall = 80.8, memorization = 63.3,
          noisy_recall = 81.6, selective_copying = 88.6, six = 60.0 },
}
local label = { gpt = "transformer (gpt)" }

local function mean(values)
  local sum = 0
  for _, v in ipairs(values) do sum = sum + v end
  return sum / #values
end

-- Per task and mixer: the seed-41 score (MAD's protocol) over the settings done, and the score
-- of each seed at the chosen lr / weight decay over the settings every seed has done.
local function task_score(task, mixer)
  local best_values, seeds_values = {}, { {}, {}, {} }
  for _, setting in ipairs(task.settings) do
    local best, complete = best_of_grid(setting, mixer)
    if best and complete then
      best_values[#best_values + 1] = best.score
      local name = string.format("mad-seeds/setting=%s,mixer=%s,seed=", setting, mixer)
      local r42, r43 = read_result(name .. "42"), read_result(name .. "43")
      if r42 and r43 then
        for i, v in ipairs{ best.score, r42.score, r43.score } do
          table.insert(seeds_values[i], v)
        end
      end
    end
  end
  local score = { done = #best_values, total = #task.settings }
  if #best_values > 0 then score.value = mean(best_values) end
  if #seeds_values[1] > 0 then
    score.seeds = ms.seed_stats{ values = { mean(seeds_values[1]), mean(seeds_values[2]),
                                            mean(seeds_values[3]) }, range = { 0, 1 } }
    score.seeds_done = #seeds_values[1]
  end
  return score
end

local function percent(score)
  if not score.value then return "–" end
  local text = string.format("%.1f", 100 * score.value)
  if score.done < score.total then
    text = text .. string.format(" (%d/%d)", score.done, score.total)
  end
  return text
end

local function interval(score)
  local s = score.seeds
  if not s then return "–" end
  local text = string.format("%.1f [%.1f, %.1f]", 100 * s.mean, 100 * s.low, 100 * s.high)
  if score.seeds_done < score.total then
    text = text .. string.format(" (%d/%d)", score.seeds_done, score.total)
  end
  return text
end

local function reference(mixer, key)
  local p = paper[mixer]
  return p and p[key] and string.format("%.1f", p[key]) or "–"
end

local shown = {}
for _, task in ipairs(tasks) do if #task.settings > 0 then shown[#shown + 1] = task end end
local scores = {}
for _, mixer in ipairs(mixers) do
  scores[mixer] = {}
  for _, task in ipairs(shown) do scores[mixer][task.name] = task_score(task, mixer) end
end

local header, rule = { "| model |" }, { "| --- |" }
for _, task in ipairs(shown) do
  header[#header + 1] = " " .. task.title .. ": paper | memscript |"
  rule[#rule + 1] = " --- | --- |"
end
header[#header + 1] = " average: paper | memscript | six tasks: paper |"
rule[#rule + 1] = " --- | --- | --- |"
local rows = { table.concat(header), table.concat(rule) }
local seed_rows = { "| model |", "| --- |" }
for _, task in ipairs(shown) do
  seed_rows[1] = seed_rows[1] .. " " .. task.title .. " |"
  seed_rows[2] = seed_rows[2] .. " --- |"
end
local found_any = false
for _, mixer in ipairs(mixers) do
  local name = "| " .. (label[mixer] or mixer) .. " |"
  local cells, seed_cells = { name }, { name }
  local ours, theirs, all_done = {}, {}, true
  for _, task in ipairs(shown) do
    local score = scores[mixer][task.name]
    cells[#cells + 1] = " " .. reference(mixer, task.name) .. " | " .. percent(score) .. " |"
    seed_cells[#seed_cells + 1] = " " .. interval(score) .. " |"
    if score.value then ours[#ours + 1], found_any = score.value, true end
    if score.done < score.total then all_done = false end
    if paper[mixer] then theirs[#theirs + 1] = paper[mixer][task.name] end
  end
  local our_mean = #ours == #shown and string.format("%.1f", 100 * mean(ours)) or "–"
  if #ours == #shown and not all_done then our_mean = our_mean .. " (partial)" end
  local their_mean = #theirs == #shown and string.format("%.1f", mean(theirs)) or "–"
  cells[#cells + 1] = " " .. their_mean .. " | " .. our_mean .. " | " .. reference(mixer, "six") ..
                      " |"
  rows[#rows + 1] = table.concat(cells)
  seed_rows[#seed_rows + 1] = table.concat(seed_cells)
end

if found_any and not ms.dry_run then
  local text = table.concat{
    "MAD test accuracy in % (macro over classes, as mad-lab's torchmetrics accuracy, at the ",
    "check with the lowest test loss): per task the mean over its settings (",
    settings_kind == "all" and "baseline and each changed knob" or
      settings_kind == "baseline" and "the baseline setting only" or "the settings asked for",
    ") of the best over lr ", table.concat(lrs, ", "), " × weight decay ",
    table.concat(wds, ", "), ", seed 41, ", quick and "3 steps (quick)" or epochs .. " epochs",
    ". The paper's: Yang et al. 2024, ",
    "the MAD table (Transformer, Mamba, GLA from Poli et al. 2024); its average is over the ",
    "same tasks, its six-task average includes compression. (n/N): settings done of N.\n\n",
    table.concat(rows, "\n"), "\n",
  }
  if phase ~= "grid" and not quick then
    text = text .. table.concat{
      "\nSeeds 41, 42 and 43 at each setting's chosen lr and weight decay: the mean of the ",
      "task score over the seeds and its 95% Student-t interval (seed 41's value is the ",
      "selected maximum, so the mean leans upward).\n\n", table.concat(seed_rows, "\n"), "\n",
    }
  end
  -- Beside the grid's report (absent while a sharded grid has not written one yet).
  local file = io.open(ms.out .. "/mad/report/mad-table.md", "w")
  if file then
    file:write(text)
    file:close()
  end
  print(text)
end
