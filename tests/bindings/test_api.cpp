#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

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
    assert(b.inputs:dtype() == "Long" and b.targets:dtype() == "Long" and b.mask:dtype() == "Bool")
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
    assert(t:dtype() == "Long" and t:shape()[1] == 2 and t:shape()[2] == 3)
    assert(t:sum():item() == 21 and t:tolist()[2][3] == 6)
    assert(ms.tensor{ 0.5, 1.5 }:dtype() == "Float")
    assert(ms.tensor{ true, false }:dtype() == "Bool")
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
