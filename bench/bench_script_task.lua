-- make bench: a task written in the script (ms.task.define) against the built-in parity, side
-- by side in one run: median tokens per second of task:sample (generation and the batch's
-- tensors) over 7 repetitions, one thread. Target for a parity-like script task: >= 5 M/s.
local script_parity = ms.task.define{
  name = "bench_parity", vocab = 2, classes = 2,
  sample = function(rng, length)
    local inputs, targets, ones = rng:ints(2, length), {}, 0
    for t = 1, length do
      ones = ones + inputs[t]
      targets[t] = ones % 2
    end
    return inputs, targets
  end,
}
local builtin = ms.task.parity{ p_one = 0.5 }

local function median_rate(task, batch, length)
  local rates = {}
  for repetition = 1, 7 do
    local start = os.clock()
    for i = 1, 4 do task:sample{ batch = batch, length = length, seed = 100 * repetition + i } end
    rates[repetition] = 4 * batch * length / (os.clock() - start)
  end
  table.sort(rates)
  return rates[4]
end

print(string.format("%-24s %8s %8s %12s", "task", "length", "batch", "M tokens/s"))
for _, shape in ipairs{ { 64, 256 }, { 256, 256 } } do
  local length, batch = shape[1], shape[2]
  local lua_rate = median_rate(script_parity, batch, length)
  local builtin_rate = median_rate(builtin, batch, length)
  print(string.format("%-24s %8d %8d %12.2f", "parity (ms.task.define)", length, batch, lua_rate / 1e6))
  print(string.format("%-24s %8d %8d %12.2f", "parity (built-in)", length, batch,
                      builtin_rate / 1e6))
end
