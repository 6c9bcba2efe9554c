#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <tuple>

#include "harness.h"

using namespace memscript::test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

TEST_CASE("tasks sample int64 inputs and targets with a bool mask, deterministically") {
  REQUIRE_LUA_OK(R"lua(
    local parity = ms.task.parity{ p_one = 0.5 }
    local b = parity:sample{ batch = 4, length = 32, seed = 1 }
    local shape = b.inputs:shape()
    assert(shape[1] == 4 and shape[2] == 32)
    assert(b.inputs:dtype() == "int64" and b.targets:dtype() == "int64" and b.mask:dtype() == "bool")
    assert(b.mask:sum():item() == 128)
    local again = parity:sample{ batch = 4, length = 32, seed = 1 }
    assert(b.inputs:eq(again.inputs):sum():item() == 128)
    local other = parity:sample{ batch = 4, length = 32, seed = 2 }
    assert(b.inputs:eq(other.inputs):sum():item() < 128)
    local rows = b.targets:tolist()
    local ones = 0
    for t = 1, 32 do
      ones = ones + b.inputs:tolist()[1][t]
      assert(rows[1][t] == ones % 2)
    end
    local ranged = parity:sample{ batch = 2, length = { min = 5, max = 9 }, seed = 3 }
    assert(ranged.length >= 5 and ranged.length <= 9)
    assert(parity:vocab_size() == 2 and parity:num_classes() == 2)
  )lua");
}

TEST_CASE("ms.tensor builds tensors from nested tables") {
  REQUIRE_LUA_OK(R"lua(
    local t = ms.tensor{ {1, 2, 3}, {4, 5, 6} }
    assert(t:dtype() == "int64" and t:shape()[1] == 2 and t:shape()[2] == 3)
    assert(t:sum():item() == 21 and t:tolist()[2][3] == 6)
    assert(ms.tensor{ 0.5, 1.5 }:dtype() == "float32")
    assert(ms.tensor{ true, false }:dtype() == "bool")
    assert(tostring(t):find("4"))
    local ok, err = pcall(function() return t:item() end)
    assert(not ok and err:find("one element"))
  )lua");
}

TEST_CASE("models give logits per position and describe themselves") {
  REQUIRE_LUA_OK(R"lua(
    local parity = ms.task.parity{}
    local m = ms.model.decoder{ mixer = "lstm", layers = 2, d_model = 16, heads = 2, task = parity }
    local b = parity:sample{ batch = 3, length = 7 }
    local shape = m:forward(b.inputs):shape()
    assert(shape[1] == 3 and shape[2] == 7 and shape[3] == 2)
    local total = 0
    for _, part in ipairs(m:describe()) do total = total + part.parameters end
    assert(total == m:num_parameters() and total > 0)
    assert(m:config().layers[2].mixer == "lstm")
    assert(tostring(m):find("decoder%[lstm, lstm%]"))
    local ok, err = pcall(m.forward, m, ms.tensor{ {0, 5} })
    assert(not ok and err:find("tokens must be in %[0, 2%)"), err)
  )lua");
}

TEST_CASE("the same seed builds the same model") {
  REQUIRE_LUA_OK(R"lua(
    local parity = ms.task.parity{}
    local function logits()
      local m = ms.model.decoder{ mixer = "lstm", d_model = 8, heads = 1, layers = 1, task = parity, seed = 5 }
      return m:forward(ms.tensor{ {0, 1, 1, 0} }):tolist()
    end
    local a, b = logits(), logits()
    for t = 1, 4 do for c = 1, 2 do assert(a[1][t][c] == b[1][t][c]) end end
  )lua");
}

TEST_CASE("ms.param reads --set values typed like the default") {
  TempDir out;
  memscript::lua::Settings settings = test_settings(out);
  settings.params = {
      {"steps", "12"}, {"lr", "0.25"}, {"flag", "yes"}, {"name", "abc"}, {"unused", "1"}};
  memscript::lua::Interpreter interpreter(settings);
  CHECK(interpreter.run_code(R"lua(
    assert(ms.param("steps", 100) == 12 and math.type(ms.param("steps", 100)) == "integer")
    assert(ms.param("lr", 0.5) == 0.25 and math.type(ms.param("lr", 0.5)) == "float")
    assert(ms.param("flag", false) == true)
    assert(ms.param("name", "x") == "abc")
    assert(ms.param("absent", 7) == 7)
  )lua",
                             "=test") == 0);
  CHECK(interpreter.last_error().empty());
  CHECK(interpreter.unread_params() == std::vector<std::string>{"unused"});
}

TEST_CASE("a --set value that does not fit its default's type is a usage error") {
  TempDir out;
  memscript::lua::Settings settings = test_settings(out);
  settings.params = {{"steps", "abc"}};
  memscript::lua::Interpreter interpreter(settings);
  CHECK(interpreter.run_code("ms.param('steps', 100)", "=test") == memscript::lua::kUsageError);
  CHECK_THAT(interpreter.last_error(), Contains("--set steps=abc: expected an integer"));
}

TEST_CASE("ms.param with choices takes only values, or list items, among them") {
  TempDir out;
  memscript::lua::Settings settings = test_settings(out);
  settings.params = {{"model", "b"}, {"models", "c, a"}, {"width", "64"}, {"flags", "yes"}};
  memscript::lua::Interpreter interpreter(settings);
  CHECK(interpreter.run_code(R"lua(
    local names = { "a", "b", "c" }
    assert(ms.param("model", "a", names) == "b")
    local models = ms.param("models", names, names)
    assert(#models == 2 and models[1] == "c" and models[2] == "a")
    assert(ms.param("width", 128, { 64, 128 }) == 64)
    assert(ms.param("flags", { false }, { true, false })[1] == true)
    assert(ms.param("absent", "z", names) == "z")  -- the default is the script's to choose
  )lua",
                             "=test") == 0);
  CHECK(interpreter.last_error().empty());

  struct Bad {
    const char* key;
    const char* value;
    const char* code;
    const char* message;
  };
  for (const Bad& bad :
       {Bad{"model", "d", "ms.param('model', 'a', { 'a', 'b' })",
            "--set model=d: expected one of: a, b"},
        Bad{"models", "a,x", "ms.param('models', { 'a' }, { 'a', 'b' })",
            "--set models=a,x: expected a comma-separated list from: a, b (item 2 is 'x')"},
        Bad{"width", "32", "ms.param('width', 64, { 64, 128 })",
            "--set width=32: expected one of: 64, 128"},
        Bad{"flags", "no,yes", "ms.param('flags', { true }, { true })",
            "--set flags=no,yes: expected a comma-separated list from: true (item 1 is "
            "'false')"}}) {
    INFO(bad.code);
    settings.params = {{bad.key, bad.value}};
    memscript::lua::Interpreter rejecting(settings);
    CHECK(rejecting.run_code(bad.code, "=test") == memscript::lua::kUsageError);
    CHECK_THAT(rejecting.last_error(), Contains(bad.message));
  }

  // The choices themselves are the script's: checked whether or not --set names the key.
  for (const auto& [code, message] : std::vector<std::pair<std::string, std::string>>{
           {"ms.param('absent', 'a', 'a,b')",
            "the choices must be a list (or a check, a function), got string"},
           {"ms.param('absent', 'a', {})", "the choices must be a list of at least one value"},
           {"ms.param('absent', 'a', { 'a', {} })", "choice 2 is a table"}}) {
    INFO(code);
    memscript::lua::Interpreter script(test_settings(out));
    CHECK(script.run_code(code, "=test") == 1);
    CHECK_THAT(script.last_error(), Contains("bad argument #3 to 'param'") && Contains(message));
  }
}

TEST_CASE("ms.keys lists a table's keys, sorted, as ms.param's choices") {
  TempDir out;
  memscript::lua::Settings settings = test_settings(out);
  settings.params = {{"model", "gpt"}};
  memscript::lua::Interpreter interpreter(settings);
  CHECK(interpreter.run_code(R"lua(
    local layers = { lstm = 1, gpt = 2, mamba = 3 }
    assert(table.concat(ms.keys(layers), ",") == "gpt,lstm,mamba")
    assert(table.concat(ms.keys{ [3] = "c", [1] = "a" }, ",") == "1,3")
    assert(#ms.keys{} == 0)
    assert(ms.param("model", "lstm", ms.keys(layers)) == "gpt")
  )lua",
                             "=test") == 0);
  CHECK(interpreter.last_error().empty());
  memscript::lua::Interpreter wrong(test_settings(out));
  CHECK(wrong.run_code("ms.keys('layers')", "=test") == 1);
  CHECK_THAT(wrong.last_error(),
             Contains("test:1: bad argument #1 to 'keys' (table expected, got string)"));
}

TEST_CASE("ms.param with a check takes only values the check accepts") {
  TempDir out;
  memscript::lua::Settings settings = test_settings(out);
  settings.params = {{"vocab", "64"}, {"widths", "32,64"}};
  memscript::lua::Interpreter interpreter(settings);
  CHECK(interpreter.run_code(R"lua(
    local function even(v) return v % 2 == 0, "an even integer" end
    assert(ms.param("vocab", 8192, even) == 64)
    local widths = ms.param("widths", { 128 }, function(list) return #list == 2 end)
    assert(#widths == 2 and widths[2] == 64)
    assert(ms.param("absent", 7, even) == 7)  -- the default is the script's to choose
  )lua",
                             "=test") == 0);
  CHECK(interpreter.last_error().empty());

  for (const auto& [value, code, message] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"7", "ms.param('vocab', 8, function(v) return v % 2 == 0, 'an even integer' end)",
            "--set vocab=7: expected an even integer"},
           {"7", "ms.param('vocab', 8, function(v) return nil end)",
            "--set vocab=7: expected a value the script's check accepts"}}) {
    INFO(code);
    settings.params = {{"vocab", value}};
    memscript::lua::Interpreter rejecting(settings);
    CHECK(rejecting.run_code(code, "=test") == memscript::lua::kUsageError);
    CHECK_THAT(rejecting.last_error(), Contains(message));
    CHECK_THAT(rejecting.last_error(), !Contains("traceback"));
  }

  // A check that fails is the script's error, not the command line's.
  settings.params = {{"vocab", "7"}};
  memscript::lua::Interpreter failing(settings);
  CHECK(failing.run_code("ms.param('vocab', 8, function(v) error('broken check') end)", "=test") ==
        1);
  CHECK_THAT(failing.last_error(), Contains("broken check"));
}

TEST_CASE("ms.param reads a comma-separated --set value as a list typed like its default") {
  TempDir out;
  memscript::lua::Settings settings = test_settings(out);
  settings.params = {{"lrs", "1e-4, 5e-4,1e-3"},
                     {"sizes", "64,128"},
                     {"names", "a,b"},
                     {"flags", "yes,off"},
                     {"none", ""},
                     {"any", "x,y"},
                     {"wds", "0,0.5"}};
  memscript::lua::Interpreter interpreter(settings);
  CHECK(interpreter.run_code(R"lua(
    local lrs = ms.param("lrs", { 1e-3 })
    assert(#lrs == 3 and lrs[1] == 1e-4 and lrs[2] == 5e-4 and lrs[3] == 1e-3)
    assert(math.type(lrs[3]) == "float")
    local sizes = ms.param("sizes", { 1, 2, 3 })
    assert(#sizes == 2 and sizes[2] == 128 and math.type(sizes[2]) == "integer")
    local names = ms.param("names", { "x" })
    assert(#names == 2 and names[1] == "a" and names[2] == "b")
    local flags = ms.param("flags", { false })
    assert(flags[1] == true and flags[2] == false)
    assert(next(ms.param("none", { 1 })) == nil)
    local wds = ms.param("wds", { 0, 0.1 })
    assert(#wds == 2 and wds[1] == 0 and math.type(wds[1]) == "float" and wds[2] == 0.5)
    local any = ms.param("any", {})
    assert(any[1] == "x" and any[2] == "y")
    local default = { 7, 8 }
    assert(ms.param("absent", default) == default)
    -- Metamethods are not called (they could raise inside C++): the raw items count.
    local trap = setmetatable({ 1, 2 }, { __len = function() error("__len") end,
                                          __index = function() error("__index") end })
    assert(ms.param("absent", trap) == trap)
    assert(ms.param("sizes", trap)[2] == 128)
  )lua",
                             "=test") == 0);
  CHECK(interpreter.last_error().empty());
}

TEST_CASE("a --set list item that does not fit, or a mixed list default, is one clear error") {
  TempDir out;
  memscript::lua::Settings settings = test_settings(out);
  settings.params = {{"lrs", "1e-4,abc"}, {"sizes", "64,,128"}};
  {
    memscript::lua::Interpreter interpreter(settings);
    CHECK(interpreter.run_code("ms.param('lrs', { 0.5 })", "=test") == memscript::lua::kUsageError);
    CHECK_THAT(interpreter.last_error(),
               Contains("--set lrs=1e-4,abc: expected a comma-separated list of numbers (item 2 "
                        "is 'abc')"));
  }
  {
    memscript::lua::Interpreter interpreter(settings);
    CHECK(interpreter.run_code("ms.param('sizes', { 1 })", "=test") == memscript::lua::kUsageError);
    CHECK_THAT(interpreter.last_error(), Contains("item 2 is empty"));
  }
  {
    memscript::lua::Interpreter interpreter(settings);
    CHECK(interpreter.run_code("ms.param('mixed', { 1, 'a' })", "=test") == 1);
    CHECK_THAT(interpreter.last_error(), Contains("bad argument #2 to 'param'") &&
                                             Contains("item 2 is a string, item 1 a number"));
  }
  {
    memscript::lua::Interpreter interpreter(settings);
    CHECK(interpreter.run_code("ms.param('nested', { {} })", "=test") == 1);
    CHECK_THAT(interpreter.last_error(), Contains("item 1 is a table"));
  }
}

TEST_CASE("option --dry-run builds everything, trains nothing and writes no run folder") {
  TempDir out;
  memscript::lua::Settings settings = test_settings(out);
  settings.dry_run = true;
  memscript::lua::Interpreter interpreter(settings);
  CHECK(interpreter.run_file(fs::path(MEMSCRIPT_TEST_SCRIPTS) / "tiny_train.lua", {}) == 0);
  CHECK(interpreter.last_error().empty());
  CHECK(!fs::exists(out / "runs"));
}

TEST_CASE("ms.train writes a run folder with config, metrics, evaluation and the script") {
  TempDir out;
  memscript::lua::Interpreter interpreter(test_settings(out));
  CHECK(interpreter.run_file(fs::path(MEMSCRIPT_TEST_SCRIPTS) / "tiny_train.lua", {}) == 0);
  CHECK(interpreter.last_error().empty());
  const fs::path run = out / "runs/tiny";
  const auto config = nlohmann::json::parse(read_file(run / "config.json"));
  CHECK(config["train"]["steps"] == 5);
  CHECK(config["model"]["layers"][0]["mixer"] == "lstm");
  CHECK(config["task"]["ones"]["max"] == 4);
  CHECK(config["versions"]["lua"].get<std::string>().find("Lua 5.4") == 0);
  CHECK(!config["versions"]["processor"].get<std::string>().empty());
  CHECK(read_file(run / "script/tiny_train.lua") ==
        read_file(fs::path(MEMSCRIPT_TEST_SCRIPTS) / "tiny_train.lua"));
  CHECK(read_file(run / "status") == "completed\n");
  const std::string csv = read_file(run / "eval.csv");
  CHECK_THAT(csv, Contains("step,length,accuracy"));
  CHECK_THAT(csv, Contains("\n5,12,"));
  int lines = 0;
  std::istringstream metrics(read_file(run / "metrics.jsonl"));
  for (std::string line; std::getline(metrics, line); ++lines)
    CHECK_NOTHROW(nlohmann::json::parse(line));
  CHECK(lines == 6);  // 5 steps logged one by one, then the evaluation
}

TEST_CASE("training twice with the same seed gives identical metrics") {
  TempDir out;
  {
    memscript::lua::Interpreter interpreter(test_settings(out));
    REQUIRE(interpreter.run_file(fs::path(MEMSCRIPT_TEST_SCRIPTS) / "tiny_train.lua", {}) == 0);
  }
  {
    memscript::lua::Interpreter interpreter(test_settings(out));
    REQUIRE(interpreter.run_file(fs::path(MEMSCRIPT_TEST_SCRIPTS) / "tiny_train.lua", {}) == 0);
  }
  CHECK(fs::exists(out / "runs/tiny-1"));
  CHECK(read_file(out / "runs/tiny/metrics.jsonl") == read_file(out / "runs/tiny-1/metrics.jsonl"));
}

TEST_CASE("ms.train rejects a model that does not fit the task and a run name that escapes") {
  CHECK_THAT(run_lua(R"lua(
    local p = ms.task.parity{}
    local m = ms.model.decoder{ mixer = "lstm", d_model = 8, heads = 1, vocab = 2, classes = 3 }
    ms.train{ model = m, task = p, steps = 1 })lua")
                 .error,
             Contains("does not fit task parity"));
  CHECK_THAT(run_lua(R"lua(
    local p = ms.task.parity{}
    local m = ms.model.decoder{ mixer = "lstm", d_model = 8, heads = 1, task = p }
    ms.train{ model = m, task = p, steps = 1, out = "../escape" })lua")
                 .error,
             Contains("option 'out'"));
}

TEST_CASE("models continue from a state, and a sequence in chunks gives one pass's logits") {
  REQUIRE_LUA_OK(R"lua(
    local p = ms.task.parity{}
    local m = ms.model.decoder{ mixer = "lstm", d_model = 8, heads = 1, layers = 2, task = p }
    local whole = m:forward(ms.tensor{ {0, 1, 1, 0, 1, 1} }):tolist()
    local first, state = m:forward(ms.tensor{ {0, 1, 1} })
    local second = m:forward(ms.tensor{ {0, 1, 1} }, state)
    local a, b = first:tolist(), second:tolist()
    for c = 1, 2 do
      assert(math.abs(whole[1][3][c] - a[1][3][c]) < 1e-5)
      assert(math.abs(whole[1][6][c] - b[1][3][c]) < 1e-5)
    end
  )lua");
}

TEST_CASE("a custom loop: m:loss(batch), loss:backward() and m:parameters()") {
  REQUIRE_LUA_OK(R"lua(
    local p = ms.task.parity{}
    local m = ms.model.decoder{ mixer = "lstm", d_model = 8, heads = 1, layers = 1, task = p }
    local loss = m:loss(p:sample{ batch = 4, length = 6, seed = 1 })
    assert(loss:numel() == 1 and loss:item() > 0)
    loss:backward()
    local params = m:parameters()
    assert(#params > 4)
    local ok, err = pcall(function() return ms.tensor{ 1.0 }:backward() end)
    assert(not ok and err:find("depends on parameters"), err)
    assert(m:eval() == m and m:train() == m and m:to("cpu") == m)
  )lua");
}

TEST_CASE("per-layer options and presets build the layers asked for") {
  REQUIRE_LUA_OK(R"lua(
    local p = ms.task.parity{}
    local m = ms.model.decoder{ layers = { { mixer = "lstm", hidden = 6 }, { mixer = "lstm" } },
                                d_model = 8, heads = 1, task = p }
    local config = m:config()
    assert(#config.layers == 2 and config.layers[1].hidden == 6 and config.layers[2].hidden == 8)
    local mini = ms.model.decoder{ mixer = "lstm", preset = "seed-mini", task = p }
    assert(mini:config().d_model == 4 and #mini:config().layers == 2 and mini:config().mlp_ratio == 2)
    local small = ms.model.decoder{ mixer = "lstm", preset = "small", task = p }
    assert(small:config().d_model == 64 and small:config().heads == 4)
    local wide = ms.model.decoder{ mixer = "lstm", preset = "small", d_model = 32, task = p }
    assert(wide:config().d_model == 32)
  )lua");
}

TEST_CASE("bad model options name the option and list what is valid") {
  const std::pair<const char*, const char*> cases[] = {
      {"ms.model.decoder{ mixer = 'lsmt', vocab = 2, classes = 2 }", "did you mean 'lstm'?"},
      {"ms.model.decoder{ mixer = 'nope', vocab = 2, classes = 2 }", "mixers: "},
      {"ms.model.decoder{ mixer = 'lstm', layers = 0, vocab = 2, classes = 2 }",
       "'layers' must be in [1, 100000], got 0"},
      {"ms.model.decoder{ mixer = 'lstm', d_model = 0, vocab = 2, classes = 2 }",
       "'d_model' must be >= 1, got 0"},
      {"ms.model.decoder{ mixer = 'lstm', heads = -1, vocab = 2, classes = 2 }",
       "'heads' must be >= 1, got -1"},
      {"ms.model.decoder{ mixer = 'lstm', d_model = 10, heads = 4, vocab = 2, classes = 2 }",
       "does not divide d_model = 10"},
      {"ms.model.decoder{ layers = { { hidden = 3 } }, vocab = 2, classes = 2 }",
       "entry 1 has no mixer"},
      {"ms.model.decoder{ mixer = 'lstm', preset = 'huge', vocab = 2, classes = 2 }",
       "must be one of seed-mini, small"},
      {"ms.model.decoder{ mixer = 'lstm', vocab = 1, task = ms.task.dyck{} }",
       "smaller than the vocabulary of task dyck"},
      {"ms.model.decoder{ mixer = 'lstm' }", "'vocab' is required"},
  };
  for (const auto& [code, message] : cases) {
    INFO(code);
    const Ran ran = run_lua(code);
    CHECK(ran.code == 1);
    CHECK_THAT(ran.error, Contains(message));
  }
}

TEST_CASE("m:save writes inside the output folder, ms.model.load brings back the same model") {
  TempDir out;
  fs::create_directories(out / "runs");
  memscript::lua::Interpreter interpreter(test_settings(out));
  const std::string path = (out / "runs/model.pt").string();
  out.write("save.lua", R"lua(
    local path = ...
    local p = ms.task.parity{}
    local m = ms.model.decoder{ mixer = "lstm", d_model = 8, heads = 1, task = p }
    m:save(path)
    local loaded = ms.model.load(path)
    local x = ms.tensor{ {0, 1, 1, 0} }
    local a, b = m:forward(x):tolist(), loaded:forward(x):tolist()
    for t = 1, 4 do for c = 1, 2 do assert(a[1][t][c] == b[1][t][c]) end end
    local ok, err = pcall(m.save, m, "/tmp/memscript-escape.pt")
    assert(not ok and err:find("outside the output folder"), err)
    local ok2, err2 = pcall(ms.model.load, path .. ".missing")
    assert(not ok2 and err2:find("cannot load the model"), err2)
  )lua");
  CHECK(interpreter.run_file(out / "save.lua", {path}) == 0);
  CHECK(interpreter.last_error().empty());
  CHECK(fs::is_regular_file(path));
  CHECK(!fs::exists("/tmp/memscript-escape.pt"));
}

TEST_CASE("ms.model.load of a run folder gives back the model its training ended with") {
  REQUIRE_LUA_OK(R"lua(
    local task = ms.task.parity{ score = "last" }
    local m = ms.model.decoder{ mixer = "deltanet", d_model = 8, heads = 2, layers = 1,
                                task = task }
    local eval = { lengths = { { min = 7, max = 9 } }, batches = 1, batch = 8 }
    local r = ms.train{ model = m, task = task, steps = 6, batch = 4, length = 6,
                        optimizer = ms.optim.adam{ lr = 1e-2 }, eval = eval, out = "again" }
    local again = ms.model.load(r.out)
    local b = task:sample{ batch = 2, length = 7 }
    assert((again:forward(b.inputs) - m:forward(b.inputs)):abs():amax():item() == 0, "weights")
    local _, summary = ms.evaluate(again, task, eval)
    assert(summary.ranges[1].accuracy == r.ranges[1].accuracy, "the run's own evaluation")
    local ok, err = pcall(ms.model.load, ms.out)
    assert(not ok and err:find("is not a run folder"), err)
  )lua");
}

TEST_CASE("a loop written with opt:step() moves the parameters to ms.train's bits") {
  // Every position scored, and the answer only (read out at the last positions alone).
  const std::string task =
      GENERATE(std::string("ms.task.parity{}"), std::string("ms.task.parity{ score = 'last' }"));
  INFO(task);
  REQUIRE_LUA_OK("local task = " + task + R"lua(
    local function model()
      return ms.model.decoder{ mixer = "deltanet", d_model = 8, heads = 2, layers = 1,
                               task = task, seed = 3 }
    end
    local spec = ms.optim.adamw{ lr = 3e-3, warmup = 3, decay = "cosine", min_lr = 1e-4 }
    local a = model()
    ms.train{ model = a, task = task, optimizer = spec, steps = 12, batch = 4, length = 6,
              seed = 5, clip = 0.05, out = "loop" }
    local b = model()
    local opt = spec:bind(b, { steps = 12, clip = 0.05 })
    local lrs, norms = {}, {}
    for step = 1, 12 do
      opt:zero_grad()
      local loss = b:loss(task:sample{ batch = 4, length = 6, seed = 5, step = step })
      loss:backward()
      lrs[step], norms[step] = opt:step()
    end
    local pa, pb = a:parameters(), b:parameters()
    assert(#pa == #pb)
    for i = 1, #pa do
      assert(pa[i]:eq(pb[i]):sum():item() == pa[i]:numel(), "parameter " .. i .. " differs")
    end
    assert(norms[1] > 0.05, "the clip must have acted: " .. norms[1])
    local state = opt:state()
    assert(state.step == 12 and state.steps == 12 and state.next_lr == nil)
    assert(state.lr == lrs[12] and state.grad_norm == norms[12])
    assert(lrs[1] < lrs[2] and lrs[2] < lrs[3] and lrs[12] < lrs[4], "warmup, then cosine")
    local ok, err = pcall(function() opt:step() end)
    assert(not ok and err:find("all 12 steps of the schedule are taken"), err)
    local fresh = spec:bind(model(), { steps = 2 })
    assert(fresh:state().next_lr == spec:bind(model(), { steps = 2 }):state().next_lr)
    ok, err = pcall(function() fresh:step() end)
    assert(not ok and err:find("call loss:backward%(%) first"), err)
  )lua");
  CHECK_THAT(run_lua("ms.optim.sgd{}:bind(ms.model.decoder{ mixer = 'lstm', d_model = 4, "
                     "vocab = 2, classes = 2 }, {})")
                 .error,
             Contains("bind: option 'steps' is required"));
  CHECK_THAT(run_lua("ms.optim.sgd{}:bind(ms.model.decoder{ mixer = 'lstm', d_model = 4, "
                     "vocab = 2, classes = 2 }, { steps = 3, clip = -1 })")
                 .error,
             Contains("clip"));
  CHECK_THAT(run_lua("ms.task.parity{}:sample{ batch = 2, length = 4, step = 0 }").error,
             Contains("step"));
}

TEST_CASE("ms.optim offers adam, adamw and sgd with schedules, and checks their options") {
  REQUIRE_LUA_OK(R"lua(
    for _, kind in ipairs{ "adam", "adamw", "sgd" } do assert(ms.optim[kind]{ lr = 0.1 }) end
    assert(ms.optim.sgd{ lr = 0.1, momentum = 0.9, warmup = 10, decay = "linear", min_lr = 0.01 })
    assert(ms.optim.adamw{ decay = "cosine" }))lua");
  CHECK_THAT(run_lua("ms.optim.sgd{ betas = {0.9, 0.9} }").error,
             Contains("ms.optim.sgd: unknown option 'betas'"));
  CHECK_THAT(run_lua("ms.optim.adam{ decay = 'step' }").error, Contains("decay"));
  CHECK_THAT(run_lua("ms.optim.adamw{ lr = 0.1, min_lr = 1 }").error, Contains("min_lr"));
}

TEST_CASE("ms.evaluate returns the scores by length and the summary beyond the training length") {
  REQUIRE_LUA_OK(R"lua(
    local p = ms.task.parity{}
    local m = ms.model.decoder{ mixer = "lstm", d_model = 8, heads = 1, layers = 1, task = p }
    local scores, summary = ms.evaluate(m, p, { lengths = { 8, 12, 16 }, batches = 1, batch = 4,
                                                train_length = 8 })
    assert(summary.train_length == 8)
    local mean = (scores[12].accuracy + scores[16].accuracy) / 2
    assert(math.abs(summary.beyond_accuracy - mean) < 1e-12, summary.beyond_accuracy)
    local _, none = ms.evaluate(m, p, { lengths = { 8 }, batches = 1, batch = 4 })
    assert(none.beyond_accuracy ~= none.beyond_accuracy))lua");
}

TEST_CASE("scores carry scaled accuracy, and score = 'last' scores one position per sequence") {
  REQUIRE_LUA_OK(
      "local t = ms.task.parity{ p_one = 0.5, score = 'last' }\n"
      "assert(t:config().score == 'last')\n"
      "local m = ms.model.decoder{ mixer = 'lstm', d_model = 4, heads = 1, layers = 1, task = t }\n"
      "local s = ms.evaluate(m, t, { lengths = { 8 }, batches = 2, batch = 4 })[8]\n"
      "assert(s.scored == 8, s.scored)\n"
      "assert(math.abs(s.scaled_accuracy - (s.accuracy - 0.5) / 0.5) < 1e-12)\n"
      "local k = ms.task.running_sum{}\n"
      "local mk = ms.model.decoder{ mixer = 'lstm', d_model = 4, heads = 1, layers = 1, task = k "
      "}\n"
      "local c = 1 / k:num_classes()\n"
      "local r = ms.evaluate(mk, k, { lengths = { 6 }, batches = 1, batch = 4 })[6]\n"
      "assert(math.abs(r.scaled_accuracy - (r.accuracy - c) / (1 - c)) < 1e-12)\n");
  CHECK_THAT(run_lua("ms.task.parity{ score = 'first' }").error,
             Contains("option 'score' must be one of all, last"));
}

TEST_CASE("evaluation lengths may be ranges: every length in them, and one mean per range") {
  REQUIRE_LUA_OK(
      "local t = ms.task.parity{ p_one = 0.5, score = 'last' }\n"
      "local m = ms.model.decoder{ mixer = 'lstm', d_model = 4, heads = 1, layers = 1, task = t }\n"
      "local scores, summary = ms.evaluate(m, t, { lengths = { 4, { min = 6, max = 9 }, 8 },\n"
      "                                           batches = 1, batch = 4 })\n"
      "local n = 0 for _ in pairs(scores) do n = n + 1 end\n"
      "assert(n == 5 and scores[4] and scores[6] and scores[9], n)\n"
      "local r = summary.ranges[1]\n"
      "assert(r.min == 6 and r.max == 9 and #summary.ranges == 1)\n"
      "local mean = (scores[6].accuracy + scores[7].accuracy + scores[8].accuracy + "
      "scores[9].accuracy) / 4\n"
      "assert(math.abs(r.accuracy - mean) < 1e-12)\n"
      "local run = ms.train{ model = m, task = t, steps = 2, batch = 2, length = 4, out = "
      "'ranges',\n"
      "  eval = { lengths = { { min = 5, max = 7 } }, batches = 1, batch = 2 } }\n"
      "assert(run.ranges[1].min == 5 and run.ranges[1].accuracy == run.ranges[1].accuracy)\n"
      "local f = assert(io.open(run.out .. '/metrics.jsonl')) local text = f:read('a') f:close()\n"
      "assert(text:find('\"ranges\":%[{\"accuracy\":'), text)\n");
  CHECK_THAT(run_lua("ms.evaluate(ms.model.decoder{ mixer = 'lstm', vocab = 2, classes = 2 }, "
                     "ms.task.parity{ p_one = 0.5 }, { lengths = { { min = 9, max = 6 } } })")
                 .error,
             Contains("option 'lengths[1]' = { min = 9, max = 6 } must have min <= max"));
  CHECK_THAT(run_lua("ms.evaluate(ms.model.decoder{ mixer = 'lstm', vocab = 2, classes = 2 }, "
                     "ms.task.parity{ p_one = 0.5 }, { lengths = { 'x' } })")
                 .error,
             Contains("option 'lengths[1]' must be a length >= 1 or a range"));
}
