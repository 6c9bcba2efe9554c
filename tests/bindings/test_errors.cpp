#include <catch2/catch.hpp>

#include "harness.h"

using namespace memscript::test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

Ran run_script(const std::string& name, const std::vector<std::string>& args = {}) {
  TempDir out;
  memscript::lua::Interpreter interpreter(test_settings(out));
  const int status = interpreter.run_file(fs::path(MEMSCRIPT_TEST_SCRIPTS) / name, args);
  return {status, interpreter.last_error()};
}

}  // namespace

TEST_CASE("a runtime error names file and line and carries a traceback") {
  const Ran ran = run_script("runtime_error.lua");
  CHECK(ran.code == 1);
  CHECK_THAT(ran.error, Contains("runtime_error.lua:4: attempt to index a nil value"));
  CHECK_THAT(ran.error, Contains("stack traceback:"));
  CHECK_THAT(ran.error, Contains("runtime_error.lua:6:"));
}

TEST_CASE("a syntax error names file and line") {
  const Ran ran = run_script("syntax_error.lua");
  CHECK(ran.code == 1);
  CHECK_THAT(ran.error, Contains("syntax_error.lua:4:"));
}

TEST_CASE("an unknown option of a bound function names the key, the value and the script line") {
  const Ran ran = run_script("bad_option.lua");
  CHECK(ran.code == 1);
  CHECK_THAT(ran.error, Contains("bad_option.lua:3: ms.train: unknown option 'stpes' = 10"));
  CHECK_THAT(ran.error, Contains("did you mean 'steps'?"));
}

TEST_CASE("C++ exceptions become Lua errors that pcall catches, and the state goes on") {
  const Ran ran = run_lua(
      "local ok, err = pcall(ms.task.parity, { p_one = 2 })\n"
      "assert(not ok and err:find(\"option 'p_one' must be in %[0, 1%], got 2\"), err)\n"
      "local ok2, err2 = pcall(ms.model.decoder, { mixer = 'lstm', d_model = 6, heads = 4, vocab = "
      "2, classes = 2 })\n"
      "assert(not ok2 and err2:find(\"'heads' = 4 does not divide d_model = 6\"), err2)\n"
      "local ok3, err3 = pcall(ms.model.decoder, { mixer = 'lstmm', vocab = 2, classes = 2 })\n"
      "assert(not ok3 and err3:find(\"did you mean 'lstm'\"), err3)\n"
      "assert(ms.task.parity{ ones = 3 }:vocab_size() == 2)\n");
  CHECK(ran.error.empty());
  CHECK(ran.code == 0);
}

TEST_CASE("errors from bound methods point at the calling line") {
  const Ran ran = run_lua(
      "local t = ms.task.parity{ ones = 5 }\nlocal b = t:sample{ batch = 2, length = 3 }\n");
  CHECK(ran.code == 1);
  CHECK_THAT(ran.error, Contains("test:2: parity: ones = 5 is more than the sequence length 3"));
}

TEST_CASE("wrong argument types are reported lauxlib-style, not as crashes") {
  CHECK_THAT(run_lua("ms.evaluate(1, 2, {})").error,
             Contains("bad argument #1 to 'evaluate' (memscript.Model expected, got number)"));
  CHECK_THAT(run_lua("ms.task.parity{}:sample(5)").error,
             Contains("expects an options table, got number"));
  CHECK_THAT(run_lua("ms.task.parity{ 1, 2 }").error, Contains("positional entries"));
  CHECK_THAT(run_lua("ms.task.parity{ p_one = print }").error,
             Contains("option 'p_one' cannot be a function"));
  CHECK_THAT(run_lua("ms.tensor{ {1, 2}, {3} }").error, Contains("ragged table"));
}

TEST_CASE("errors inside Lua callbacks and nested pcalls leave the interpreter usable") {
  TempDir out;
  memscript::lua::Interpreter interpreter(test_settings(out));
  CHECK(interpreter.run_code("error('first')", "=one") == 1);
  CHECK_THAT(interpreter.last_error(), Contains("one:1: first"));
  CHECK(interpreter.run_code("x = ms.task.parity{} assert(x:num_classes() == 2)", "=two") == 0);
}

TEST_CASE("erroring scripts release every object they created (checked under LeakSanitizer)") {
  // Each snippet creates tasks, models, optimizers and tensors, then fails in a different
  // way; in the sanitizer build a leak would fail this test at exit.
  const char* snippets[] = {
      "local t = ms.task.parity{} local m = ms.model.decoder{ mixer = 'lstm', d_model = 8, heads = "
      "1, layers = 1, task = t }\n"
      "local b = t:sample{ batch = 2, length = 4 } local y = m:forward(b.inputs) error('lua "
      "error')",
      "local t = ms.task.parity{} local b = t:sample{ batch = 2, length = 4 } ms.task.parity{ "
      "p_one = 7 }",
      "local t = ms.task.parity{} local o = ms.optim.adamw{} local m = ms.model.decoder{ mixer = "
      "'lstm', d_model = 8, heads = 1, task = t }\n"
      "ms.train{ model = m, task = t, optimizer = o, steps = 1, stpes = 1 }",
      "local t = ms.tensor{ {1, 2}, {3, 4} } local s = t:sum() os.exit(4)",
      "local ok = pcall(function() local t = ms.task.parity{} error({}) end) "
      "error(setmetatable({}, {}))",
  };
  for (const char* snippet : snippets) {
    INFO(snippet);
    CHECK(run_lua(snippet).code != 0);
  }
}
