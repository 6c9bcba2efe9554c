// Inputs that once crashed the process or corrupted its memory, and messages that once came
// out as libtorch's backtraces. Run under AddressSanitizer by `make test-sanitize`.

#include <catch2/catch.hpp>

#include "harness.h"
#include "runtime/model/mixer.h"

using namespace memscript::test;
using Catch::Matchers::Contains;

namespace {

// The error of `code`, which must fail with exit 1 and a one-line message.
std::string error_of(const std::string& code) {
  const Ran ran = run_lua(code);
  INFO(code);
  INFO(ran.error);
  CHECK(ran.code == 1);
  const std::string first = ran.error.substr(0, ran.error.find("\nstack traceback:"));
  CHECK(first.find('\n') == std::string::npos);
  CHECK(ran.error.find("Exception raised from") == std::string::npos);
  return first;
}

std::string decoder(const std::string& mixer, const std::string& extra = "") {
  return "ms.model.decoder{ mixer = '" + mixer +
         "', d_model = 8, heads = 2, layers = 2, vocab = 4, classes = 2" + extra + " }";
}

}  // namespace

TEST_CASE("option tables that contain themselves or nest without end are clear errors") {
  CHECK_THAT(error_of("local t = {} t.x = t ms.train(t)"),
             Contains("ms.train.x: option 'x' contains itself"));
  CHECK_THAT(error_of("local t = { steps = 1 } t.eval = { lengths = { t } } ms.train(t)"),
             Contains("contains itself"));
  CHECK_THAT(error_of("local t = {} t[1] = t ms.task.parity{ ones = t }"),
             Contains("contains itself"));
  for (int depth : {12, 17, 100, 1000, 100000}) {
    INFO(depth);
    const std::string nest = "local t = {} for i = 1, " + std::to_string(depth) +
                             " do t = { x = t } end ms.task.parity(t)";
    CHECK_THAT(error_of(nest), depth < 16 ? Contains("unknown option 'x'")
                                          : Contains("nests tables more than 16 deep"));
    const std::string list = "local t = {} for i = 1, " + std::to_string(depth) +
                             " do t = { t } end ms.task.parity{ ones = t }";
    CHECK_THAT(error_of(list), depth < 16 ? Contains("option 'ones'") : Contains("deep"));
  }
}

TEST_CASE("ms.tensor and :tolist() refuse tables and tensors nested too deep") {
  for (int depth : {17, 19, 1000, 100000}) {
    INFO(depth);
    CHECK_THAT(error_of("local t = 1 for i = 1, " + std::to_string(depth) +
                        " do t = { t } end ms.tensor(t)"),
               Contains("ms.tensor: tables nested more than 16 deep"));
  }
  CHECK_THAT(error_of("local t = {} t[1] = t ms.tensor(t)"), Contains("nested more than 16 deep"));
  REQUIRE_LUA_OK(
      "local t = 1 for i = 1, 16 do t = { t } end\n"
      "assert(#ms.tensor(t):shape() == 16)\n"
      "local l = ms.tensor(t):tolist() for i = 1, 16 do l = l[1] end assert(l == 1)\n");
}

TEST_CASE("a state from another model or batch size is refused, for every pair of mixers") {
  const std::vector<std::string> mixers = memscript::mixer_names();
  REQUIRE(mixers.size() >= 9);
  std::string script =
      "local mixers = { ... }\n"
      "local t = ms.task.parity{ p_one = 0.5 }\n"
      "local function model(m) return ms.model.decoder{ mixer = m, d_model = 8, heads = 2, "
      "layers = 2, vocab = 4, classes = 2 } end\n"
      "local x3 = t:sample{ batch = 3, length = 5 }.inputs\n"
      "local x5 = t:sample{ batch = 5, length = 5 }.inputs\n"
      "local refused, accepted = 0, 0\n"
      "for _, a in ipairs(mixers) do\n"
      "  local ma = model(a)\n"
      "  local _, state3 = ma:forward(x3)\n"
      "  -- the same model, another batch size\n"
      "  local ok, err = pcall(ma.forward, ma, x5, state3)\n"
      "  assert(not ok and err:find('does not fit this model and batch 5'), a .. ': ' .. "
      "tostring(err))\n"
      "  -- the same architecture and batch (another model of it): accepted; any other: refused\n"
      "  for _, b in ipairs(mixers) do\n"
      "    local mb = model(b)\n"
      "    local ok2, err2 = pcall(mb.forward, mb, x3, state3)\n"
      "    if a == b then assert(ok2, err2) accepted = accepted + 1\n"
      "    else assert(not ok2 and err2:find('does not fit'), a .. ' -> ' .. b .. ': ' .. "
      "tostring(err2)) refused = refused + 1 end\n"
      "  end\n"
      "end\n"
      "assert(refused == #mixers * (#mixers - 1) and accepted == #mixers)\n";
  TempDir out;
  memscript::lua::Interpreter interpreter(test_settings(out));
  out.write("states.lua", script);
  const int status = interpreter.run_file(out / "states.lua", mixers);
  INFO(interpreter.last_error());
  CHECK(status == 0);
}

TEST_CASE("libtorch's errors reach the script as one line in memscript's words") {
  const std::string model = "local t = ms.task.parity{ p_one = 0.5 } local m = " + decoder("lstm") +
                            " local b = t:sample{ batch = 2, length = 4 }\n";
  CHECK_THAT(error_of(model + "b.targets = ms.tensor{ {0, 1, 7, 0}, {0, 0, 0, 0} } m:loss(b)"),
             Contains("loss: targets must be classes in [0, 2), got 7"));
  CHECK_THAT(error_of(model + "b.targets = ms.tensor{ {0, 1}, {0, 0} } m:loss(b)"),
             Contains("loss: the batch's targets must be an int64 tensor shaped like its inputs"));
  CHECK_THAT(error_of(model + "b.mask = ms.tensor{ 1, 2 } m:loss(b)"),
             Contains("loss: the batch's mask must be a boolean tensor"));
  CHECK_THAT(error_of("ms.tensor{ 1, 2, 3 }:eq(ms.tensor{ 1, 2 })"),
             Contains("bad argument #1 to 'eq' (a tensor of shape [2] cannot be compared with one "
                      "of [3]"));
  CHECK_THAT(error_of(model + "m:forward(ms.tensor{ {0, 9} })"),
             Contains("tokens must be in [0, 4), got 9"));
  CHECK_THAT(error_of("ms.tensor{ 1.5 }:backward()"), Contains("backward() needs a scalar"));
  REQUIRE_LUA_OK(model + "assert(m:loss(b):item() > 0)\n");
}

TEST_CASE("impossible sizes are refused before anything is allocated, naming the option") {
  const std::pair<std::string, std::string> cases[] = {
      {decoder("lstm", ", layers = 1e9"), "option 'layers' must be"},
      {"ms.model.decoder{ mixer = 'lstm', layers = 100000, d_model = 1024, vocab = 4, classes = 2 "
       "}",
       "option 'layers' = 100000: the model's parameters would need at least"},
      {"ms.model.decoder{ mixer = 'lstm', d_model = 10000000, heads = 1, vocab = 4, classes = 2 }",
       "option 'd_model' = 10000000: the model's parameters would need at least"},
      {"ms.model.decoder{ mixer = 'lstm', d_model = 8, heads = 1, vocab = 1e12, classes = 2 }",
       "option 'vocab' = 1000000000000: the model's parameters would need at least"},
      {"ms.model.decoder{ mixer = 'lstm', d_model = 2048, vocab = 4, classes = 2, mlp_hidden = "
       "1 << 24 }",
       "option 'mlp_hidden' = 16777216: the model's parameters would need at least"},
      {"ms.model.decoder{ mixer = 'lstm', d_model = 2048, vocab = 4, classes = 2, mlp_ratio = "
       "100000 }",
       "option 'mlp_ratio' = 100000: the model's parameters would need at least"},
      {"ms.task.parity{ p_one = 0.5 }:sample{ batch = 1e9, length = 32 }",
       "parity: a batch of 1000000000 sequences of length 32 would need at least"},
      {"local t = ms.task.parity{ p_one = 0.5 } local m = " + decoder("lstm") +
           " ms.train{ model = m, task = t, steps = 1, batch = 1e9, length = 32 }",
       "ms.train: a step of batch = 1000000000 at length = 32"},
      {"local t = ms.task.parity{ p_one = 0.5 } local m = " + decoder("lstm") +
           " ms.train{ model = m, task = t, steps = 1, batch = 2, length = 1e10 }",
       "at length = 10000000000"},
      {"local t = ms.task.parity{ p_one = 0.5 } local m = " + decoder("lstm") +
           " ms.evaluate(m, t, { lengths = { 1e9 }, batch = 1000 })",
       "ms.evaluate: a batch of batch = 1000 at length 1000000000"},
      // A range to the largest integer: refused at once, not checked length by length.
      {"local t = ms.task.dyck{ pairs = 2 } local m = " + decoder("lstm", ", vocab = 4") +
           " ms.train{ model = m, task = t, steps = 1, batch = 1, length = { min = 2, max = "
           "math.maxinteger } }",
       "would need at least"},
  };
  for (const auto& [code, message] : cases) {
    INFO(code);
    const std::string error = error_of(code);
    CHECK_THAT(error, Contains(message));
    CHECK(error.find("bad_alloc") == std::string::npos);
  }
}

TEST_CASE("plots of numbers near the ends of double finish, with their ends as ticks") {
  REQUIRE_LUA_OK(
      "ms.plot{ file = 'big.svg', lines = { { label = 'a', x = { 1, 2 }, y = { -1e308, 1e308 } } } "
      "}\n"
      "ms.plot{ file = 'wide.svg', lines = { { label = 'a', x = { -1e308, 1e308 }, y = { 0, 1 } } "
      "} }\n");
}

TEST_CASE("require takes module names below the script's folder only") {
  const Ran absolute = run_lua("require '/etc/passwd'");
  CHECK(absolute.code == 1);
  CHECK_THAT(absolute.error, Contains("a module name is a path below the script's folder"));
}
