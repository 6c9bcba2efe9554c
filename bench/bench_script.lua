-- make bench: what is written in the script against its built-in twin, side by side in one run,
-- one thread.
--  * A task (ms.task.define) against the built-in parity: median tokens per second of
--    task:sample (generation and the batch's tensors) over 7 repetitions. Target for a
--    parity-like script task: >= 5 M/s.
--  * A mixer (ms.mixer.define) on a fused primitive, the stdlib's deltanet_lua, against the
--    built-in deltanet: median ms per training step (forward, backward, AdamW) over 3
--    alternated repetitions, at the sizes of presets seed-mini and small, lengths 32 and 256.
--    Target: within 1.2x of the built-in.
require "memscript.mixers.deltanet"
local script_parity = require "memscript.tasks.parity"
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
  print(string.format("%-24s %8d %8d %12.2f", "parity_lua (stdlib)", length, batch, lua_rate / 1e6))
  print(string.format("%-24s %8d %8d %12.2f", "parity (built-in)", length, batch,
                      builtin_rate / 1e6))
end

local task = ms.task.parity{ p_one = 0.5 }
local sizes = {
  { name = "seed-mini", d_model = 4, heads = 4, head_dim = 4, mlp_ratio = 2 },
  { name = "small", d_model = 64, heads = 4, head_dim = 16, mlp_ratio = 4 },
}
local function ms_per_step(mixer, size, length, steps)
  local m = ms.model.decoder{ mixer = mixer, d_model = size.d_model, heads = size.heads,
                              head_dim = size.head_dim, mlp_ratio = size.mlp_ratio, layers = 2,
                              qkv_bias = true, task = task, seed = 1 }
  local start = os.clock()
  ms.train{ model = m, task = task, steps = steps, batch = 16, length = length,
            optimizer = ms.optim.adamw{ lr = 1e-3 } }
  return 1000 * (os.clock() - start) / steps
end

print(string.format("\n%-10s %6s %18s %18s %8s", "size", "length", "deltanet ms/step",
                    "deltanet_lua", "ratio"))
for _, size in ipairs(sizes) do
  for _, length in ipairs{ 32, 256 } do
    local steps = length == 32 and 40 or 8
    local builtin, written = {}, {}
    for repetition = 1, 3 do
      builtin[repetition] = ms_per_step("deltanet", size, length, steps)
      written[repetition] = ms_per_step("deltanet_lua", size, length, steps)
    end
    table.sort(builtin)
    table.sort(written)
    print(string.format("%-10s %6d %18.2f %18.2f %8.2f", size.name, length, builtin[2], written[2],
                        written[2] / builtin[2]))
  end
end
