-- ms.sweep: one run per grid point and seed, in a fixed order, each under a name made from its
-- parameters; complete runs are skipped, interrupted ones continue from their checkpoint, a
-- failing run is listed and the others go on (a usage error, the command line's fault, stops
-- the sweep).
-- The C++ side (ms._sweep) provides locks, moving folders aside and atomic writes; the
-- report (ms.report) is C++ too and reads what this file writes into <root>/<sweep>/sweep.json.
return function(ms)
  local helpers = ms._sweep
  local dealt = 0 -- runs dealt out to shards so far, over every sweep of this script

  local function fail(message, level) error("ms.sweep: " .. message, (level or 1) + 2) end

  -- The text of a grid value in run names and reports: a hybrid {"deltanet", "gpt"} is
  -- "deltanet+gpt".
  local function label(value)
    local kind = type(value)
    if kind == "string" then return value end
    if kind == "number" or kind == "boolean" then return tostring(value) end
    if kind == "table" then
      local parts = {}
      for i, item in ipairs(value) do parts[i] = label(item) end
      return table.concat(parts, "+")
    end
    fail("grid values must be strings, numbers, booleans or lists of them, got a " .. kind, 3)
  end

  local function file_safe(text) return (text:gsub("[^%w%.%+%-]", "_")) end

  local function sorted_keys(t)
    local keys = {}
    for k in pairs(t) do
      if type(k) ~= "string" then fail("grid keys must be strings, got " .. tostring(k), 3) end
      keys[#keys + 1] = k
    end
    table.sort(keys)
    return keys
  end

  -- --- options ------------------------------------------------------------------------------

  local known = { name = true, grid = true, seeds = true, run = true, order = true }
  local reserved = { seed = true, name = true, out = true }

  local function check_name(name)
    if type(name) ~= "string" or name == "" then
      fail("option 'name' is required: a folder name like \"parity\"", 3)
    end
    for part in name:gmatch("[^/]+") do
      if part == ".." or part == "." or part:find("[^%w%._%+%-]") then
        fail("option 'name' = \"" .. name .. "\" must be a relative folder name of letters, " ..
             "digits and . _ + - (no '..')", 3)
      end
    end
    if name:sub(1, 1) == "/" then fail("option 'name' = \"" .. name .. "\" must be relative", 3) end
  end

  local function grid_keys(spec)
    local grid = spec.grid or {}
    if type(grid) ~= "table" then fail("option 'grid' must be a table of lists, got " .. type(grid), 3) end
    local keys = sorted_keys(grid)
    for _, key in ipairs(keys) do
      if reserved[key] then fail("grid key '" .. key .. "' is reserved (seed, name, out)", 3) end
      local values = grid[key]
      if type(values) ~= "table" or #values == 0 then
        fail("grid key '" .. key .. "' must be a non-empty list, like { \"lstm\", \"gpt\" }", 3)
      end
    end
    if spec.order == nil then return keys end
    if type(spec.order) ~= "table" then fail("option 'order' must be a list of grid keys", 3) end
    local listed = {}
    for _, key in ipairs(spec.order) do
      if grid[key] == nil then fail("option 'order' names '" .. tostring(key) .. "', not a grid key", 3) end
      listed[key] = true
    end
    for _, key in ipairs(keys) do
      if not listed[key] then fail("option 'order' leaves out grid key '" .. key .. "'", 3) end
    end
    return spec.order
  end

  local function check_spec(spec)
    if type(spec) ~= "table" then fail("expects one table of options", 2) end
    for key in pairs(spec) do
      if not known[key] then
        fail("unknown option '" .. tostring(key) .. "' (known: name, grid, seeds, order, run)", 2)
      end
    end
    check_name(spec.name)
    if type(spec.run) ~= "function" then fail("option 'run' is required: a function(p)", 2) end
    local seeds = spec.seeds or { ms.seed }
    if type(seeds) ~= "table" or #seeds == 0 then fail("option 'seeds' must be a non-empty list", 2) end
    for _, seed in ipairs(seeds) do
      if math.type(seed) ~= "integer" or seed < 0 then
        fail("option 'seeds' must hold whole numbers >= 0, got " .. tostring(seed), 2)
      end
    end
    return grid_keys(spec), seeds
  end

  -- --- the plan: every grid point x seed, first key slowest, seed fastest -------------------

  local function cartesian(keys, grid)
    local points = { {} }
    for _, key in ipairs(keys) do
      local next_points = {}
      for _, point in ipairs(points) do
        for _, value in ipairs(grid[key]) do
          local extended = {}
          for k, v in pairs(point) do extended[k] = v end
          extended[key] = value
          next_points[#next_points + 1] = extended
        end
      end
      points = next_points
    end
    return points
  end

  local function plan(spec, keys, seeds)
    local runs, by_name = {}, {}
    for _, point in ipairs(cartesian(keys, spec.grid or {})) do
      for _, seed in ipairs(seeds) do
        local labels, parts = { seed = tostring(seed) }, {}
        for _, key in ipairs(keys) do
          labels[key] = label(point[key])
          parts[#parts + 1] = key .. "=" .. file_safe(labels[key])
        end
        parts[#parts + 1] = "seed=" .. seed
        local name = table.concat(parts, ",")
        if by_name[name] then fail("two grid points share the run name '" .. name .. "'", 2) end
        by_name[name] = true
        local p = { seed = seed, name = name, out = spec.name .. "/" .. name }
        for k, v in pairs(point) do p[k] = v end
        runs[#runs + 1] = { name = name, out = p.out, params = p, labels = labels }
      end
    end
    return runs
  end

  local function deal_to_shards(runs)
    for _, run in ipairs(runs) do
      if helpers.shard_count then run.shard = dealt % helpers.shard_count end
      dealt = dealt + 1
    end
  end

  -- Under --resume / --replay the script is re-run for one run folder: only that run executes.
  local function rerun_target(run) return ms.rerun ~= nil and run.out == ms.rerun.out end
  local function mine(run)
    if ms.rerun then return rerun_target(run) end
    return run.shard == nil or run.shard == helpers.shard_index
  end

  -- --- the manifest (sweep.json): what the report needs to know about the plan --------------

  local function json(value)
    local kind = type(value)
    if kind == "string" then
      return '"' .. value:gsub('[%c"\\]', function(c)
        return string.format("\\u%04x", c:byte())
      end) .. '"'
    elseif kind == "number" or kind == "boolean" then
      return tostring(value)
    elseif kind == "table" then
      local parts = {}
      if #value > 0 or next(value) == nil then
        for i, item in ipairs(value) do parts[i] = json(item) end
        return "[" .. table.concat(parts, ",") .. "]"
      end
      for _, key in ipairs(sorted_keys(value)) do parts[#parts + 1] = json(key) .. ":" .. json(value[key]) end
      return "{" .. table.concat(parts, ",") .. "}"
    end
    return "null"
  end

  local function manifest(spec, keys, seeds, runs)
    local values = { seed = {} }
    for _, key in ipairs(keys) do
      values[key] = {}
      for i, value in ipairs(spec.grid[key]) do values[key][i] = label(value) end
    end
    for i, seed in ipairs(seeds) do values.seed[i] = tostring(seed) end
    local entries = {}
    for i, run in ipairs(runs) do entries[i] = { name = run.name, labels = run.labels, shard = run.shard } end
    return json({ sweep = spec.name, script = helpers.script(), command_line = helpers.command_line(),
                  job_script = helpers.job_script,
                  shards = helpers.shard_count, keys = keys, values = values, runs = entries }) .. "\n"
  end

  -- --- running one run -----------------------------------------------------------------------

  local function status_of(folder)
    local file = io.open(folder .. "/status", "r")
    if not file then return nil end
    local line = file:read("l")
    file:close()
    return line
  end

  local function complete(status) return status ~= nil and status:match("^completed") ~= nil end

  --- ms.run_completed(run) -> boolean: whether the run's folder (a sweep's run, or its folder
  --- name under --out) says completed now; another shard's run may have finished since ms.sweep
  --- returned, so scripts that read every shard's results ask this, not run.state.
  function ms.run_completed(run)
    local out = type(run) == "table" and run.out or run
    if type(out) ~= "string" then
      error("ms.run_completed: expects a run of ms.sweep or a run folder name, got a " .. type(run), 2)
    end
    return complete(status_of(ms.out .. "/" .. out))
  end

  -- Calls spec.run with ms.train comparing its model, task, optimizer and training settings
  -- with the folder's config.json and stopping there (helpers.checked), training nothing. Any
  -- other error stops the sweep. Returns how an interrupted run differs (mode "interrupted"),
  -- or nil; for a complete run a difference is an error raised by ms.train.
  local function compare_stored(spec, run, folder, mode)
    helpers.check(folder, mode)
    local ok, err = pcall(spec.run, run.params)
    local difference = helpers.check(nil)
    if not ok and err ~= helpers.checked then error(err, 0) end
    return difference
  end

  -- A complete run is skipped only when it is the run this invocation would train. A
  -- difference stops the sweep: its report would show another run under this run's name. A
  -- folder without config.json was not made by ms.train, so there is nothing to compare.
  local function check_complete(spec, run, folder)
    if helpers.exists(folder .. "/config.json") then compare_stored(spec, run, folder) end
  end

  -- Why the incomplete run in folder cannot be continued from its checkpoint, or nil when it
  -- can: it was interrupted (SIGTERM, SIGINT, --max-seconds, a killed process) rather than
  -- failed, and ms.train would train the very run stored there.
  local function why_not_continue(spec, run, folder)
    local status = status_of(folder) or ""
    if status:match("^failed") then return status end
    if not helpers.exists(folder .. "/config.json") then return "it has no config.json" end
    local difference = compare_stored(spec, run, folder, "interrupted")
    return difference and "not the run this invocation builds: " .. difference
  end

  local function message_of(err)
    if type(err) == "string" then return err end
    return tostring(err)
  end

  -- os.exit unwinds the script, and a usage error (a --set value the script cannot take, a
  -- --set key it has not read) would fail every run alike: both end the sweep, not one run.
  local function stop_on_exit_or_usage(err)
    if type(err) == "userdata" or helpers.usage_error() then error(err, 0) end
  end

  local function say(text)
    if not helpers.quiet then
      io.stderr:write(text, "\n")
      io.stderr:flush()
    end
  end

  -- Returns the outcome ("completed", "skipped", "busy" or "failed") and the run's result or
  -- error message.
  local function execute(spec, run)
    local sweep_folder = ms.out .. "/" .. spec.name
    local folder = ms.out .. "/" .. run.out
    if ms.dry_run or rerun_target(run) then -- a rerun continues the folder as it is
      local ok, result = pcall(spec.run, run.params)
      if not ok then stop_on_exit_or_usage(result) end
      return ok and "completed" or "failed", ok and result or message_of(result)
    end
    if complete(status_of(folder)) then
      check_complete(spec, run, folder)
      return "skipped"
    end
    local lock = helpers.lock(sweep_folder .. "/.locks/" .. run.name .. ".lock")
    if not lock then return "busy" end
    if complete(status_of(folder)) then -- finished by another process meanwhile
      lock:release()
      check_complete(spec, run, folder)
      return "skipped"
    end
    if helpers.exists(folder) then
      -- A resume of this run may be training it: its folder's own lock says so.
      local training = helpers.lock(folder .. "/.lock")
      if not training then
        lock:release()
        return "busy"
      end
      local ok, why_not = pcall(why_not_continue, spec, run, folder)
      if not ok then
        training:release()
        lock:release()
        error(why_not, 0)
      end
      if why_not then
        run.moved_to = helpers.move_aside(folder, sweep_folder .. "/.incomplete")
        say(string.format("sweep %s: %s is trained afresh (%s); the old folder is now %s",
                          spec.name, run.name, why_not, run.moved_to))
      else
        say(string.format("sweep %s: %s continues from its checkpoint", spec.name, run.name))
        helpers.continue_run(folder)
      end
      training:release()
    end
    local ok, result = pcall(spec.run, run.params)
    helpers.continue_run(nil)
    lock:release()
    if not ok then stop_on_exit_or_usage(result) end
    return ok and "completed" or "failed", ok and result or message_of(result)
  end

  local function summarize(spec, outcome, total, own)
    local shard = helpers.shard_count and
        string.format(" (shard %d/%d: %d of %d runs)", helpers.shard_index, helpers.shard_count, own, total) or ""
    say(string.format("sweep %s%s: %d completed, %d skipped (already complete), %d busy (running " ..
                      "elsewhere), %d failed", spec.name, shard, #outcome.completed, #outcome.skipped,
                      #outcome.busy, #outcome.failed))
    -- Failures are printed even with --quiet: the exit code points at this list.
    for _, run in ipairs(outcome.failed) do
      io.stderr:write("sweep ", spec.name, ": failed: ", run.name, ": ", run.error, "\n")
    end
    io.stderr:flush()
  end

  --- ms.sweep{ name =, grid = { key = {values...}, ... }, seeds = {...}, order = {keys...},
  ---           run = function(p) ... end } -> { completed =, skipped =, busy =, failed =,
  ---           elsewhere =, runs = }
  function ms.sweep(spec)
    local keys, seeds = check_spec(spec)
    local runs = plan(spec, keys, seeds)
    deal_to_shards(runs)
    helpers.count(#runs, 0)
    local outcome = { name = spec.name, runs = runs, completed = {}, skipped = {}, busy = {},
                      failed = {}, elsewhere = {} }
    if helpers.plan_only then return outcome end
    if not ms.dry_run and not ms.rerun then helpers.write(ms.out .. "/" .. spec.name .. "/sweep.json", manifest(spec, keys, seeds, runs)) end
    local own, done = 0, 0
    for _, run in ipairs(runs) do if mine(run) then own = own + 1 end end
    for _, run in ipairs(runs) do
      if mine(run) then
        done = done + 1
        say(string.format("sweep %s: run %d/%d %s", spec.name, done, own, run.name))
        local state, detail = execute(spec, run)
        run.state = state
        if state == "completed" then run.result = detail elseif state == "failed" then run.error = detail end
        table.insert(outcome[state], run)
      else
        run.state = "elsewhere"
        table.insert(outcome.elsewhere, run)
      end
    end
    helpers.count(0, #outcome.failed)
    summarize(spec, outcome, #runs, own)
    return outcome
  end
end
