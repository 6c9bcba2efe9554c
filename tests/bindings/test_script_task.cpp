// ms.task.define (bindings/lua_script_task.cpp): a task written in the script is drawn per
// (seed, index) like the built-ins, trains and evaluates, and a sample function that breaks its
// promises is one line naming its file:line.

#include <catch2/catch.hpp>

#include "harness.h"

using Catch::Matchers::Contains;
using memscript::test::run_lua;

namespace {

// The stdlib's parity written in Lua; a running parity computed in the test is its oracle.
const std::string kParity = R"lua(
  local parity = require "memscript.tasks.parity"
)lua";

}  // namespace

TEST_CASE("a script task is drawn per (seed, index), labelled by its function, and trains") {
  REQUIRE_LUA_OK(kParity + R"lua(
    local a = parity:sample{ batch = 5, length = 12, seed = 7 }
    local b = parity:sample{ batch = 2, length = 12, seed = 7 }
    local c = parity:sample{ batch = 5, length = 12, seed = 8 }
    local function same(x, y)
      return (x:to("float64") - y:to("float64")):abs():sum():item() == 0
    end
    assert(same(a.inputs:narrow(1, 1, 2), b.inputs), "sequence i depends on (seed, i) only")
    assert(not same(a.inputs, c.inputs), "another seed, other sequences")
    for _, row in ipairs(a.mask:tolist()) do
      for _, scored in ipairs(row) do assert(scored, "no mask: every position scored") end
    end
    -- Labels against a running parity computed here, and the vocabulary and classes.
    local inputs, targets = a.inputs:tolist(), a.targets:tolist()
    for i = 1, 5 do
      local ones = 0
      for t = 1, 12 do
        ones = ones + inputs[i][t]
        assert(targets[i][t] == ones % 2)
      end
    end
    assert(parity:vocab_size() == 2 and parity:num_classes() == 2)
    assert(parity:config().task == "parity_lua")

    local function train()
      local m = ms.model.decoder{ mixer = "lstm", d_model = 8, task = parity, seed = 2 }
      return ms.train{ model = m, task = parity, steps = 5, batch = 8, length = 6,
                       eval = { lengths = { 6 } } }
    end
    local r1, r2 = train(), train()
    assert(type(r1.loss) == "number" and r1.loss == r2.loss, "re-runs to the same numbers")
    assert(r1.scores[6].accuracy == r2.scores[6].accuracy)
  )lua");
}

TEST_CASE("a script task scores its mask, or only its last position with score = last") {
  REQUIRE_LUA_OK(R"lua(
    local function sample(rng, length)
      local inputs, targets, mask = {}, {}, {}
      for t = 1, length do inputs[t], targets[t], mask[t] = rng:int(3), t % 2, t % 3 == 0 end
      return inputs, targets, mask
    end
    local masked = ms.task.define{ name = "masked", vocab = 3, classes = 2, sample = sample }
    local last = ms.task.define{ name = "last", vocab = 3, classes = 2, sample = sample,
                                 score = "last" }
    local m = masked:sample{ batch = 1, length = 6 }.mask:tolist()[1]
    assert(not m[1] and not m[2] and m[3] and not m[4] and not m[5] and m[6])
    local l = last:sample{ batch = 1, length = 6 }.mask:tolist()[1]
    assert(not l[1] and not l[3] and l[6])
  )lua");
}

TEST_CASE("a wrong script task is one line naming its sample function and what is wrong") {
  const auto define = [](const std::string& body) {
    return "ms.task.define{ name = 'bad', vocab = 3, classes = 2,\n"
           "  sample = function(rng, length)\n" +
           body + "\n  end }";
  };
  const std::string ok_targets = "local t = {} for i = 1, length do t[i] = 0 end";
  CHECK_THAT(run_lua(define(ok_targets + " return { 1, 2 }, t")).error,
             Contains("test:2: task 'bad': sample returned 2 inputs for length 4"));
  CHECK_THAT(run_lua(define(ok_targets + " return t, { 0, 0, 2, 0 }")).error,
             Contains("targets[3] must be an integer in [0, 2), got 2"));
  CHECK_THAT(run_lua(define(ok_targets + " return { 0, 1, 0.5, 0 }, t")).error,
             Contains("inputs[3] must be an integer in [0, 3)"));
  CHECK_THAT(run_lua(define(ok_targets + " return t, t, { 1, 1, 1, 1 }")).error,
             Contains("mask[1] must be true or false"));
  CHECK_THAT(run_lua(define("error('no sample today')")).error,
             Contains("test:3: no sample today"));
  CHECK_THAT(run_lua("ms.task.define{ name = 'parity', vocab = 2, classes = 2, "
                     "sample = function() end }")
                 .error,
             Contains("'parity' is a built-in task's name"));
  CHECK_THAT(run_lua("ms.task.define{ name = 'x', vocab = 2, classes = 2, lenght = 3, "
                     "sample = function() end }")
                 .error,
             Contains("unknown key 'lenght'"));
  CHECK_THAT(run_lua("ms.task.define{ name = 'x', vocab = 0, classes = 2, "
                     "sample = function() end }")
                 .error,
             Contains("vocab must be a positive integer"));
  CHECK_THAT(
      run_lua("local kept\n" + define(ok_targets + " kept = rng return t, t") + "\nkept:int(2)")
          .error,
      Contains("valid only inside its sample function"));
}
