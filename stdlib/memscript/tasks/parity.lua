-- Parity written in the script: the built-in ms.task.parity{ p_one = 0.5 }'s labels from a
-- sample function, as a worked example of ms.task.define (tests/bindings/test_script_task.cpp
-- checks its labels; make bench times it against the built-in).
--   input: uniform bits; target_t = (number of ones in x_1 .. x_t) mod 2, every position scored.
--
--   local parity = require "memscript.tasks.parity"
return ms.task.define{
  name = "parity_lua", vocab = 2, classes = 2,
  sample = function(rng, length)
    local inputs, targets, ones = rng:ints(2, length), {}, 0
    for t = 1, length do
      ones = ones + inputs[t]
      targets[t] = ones % 2
    end
    return inputs, targets
  end,
}
