#include <catch2/catch.hpp>

#include "harness.h"

using namespace memscript::test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

TEST_CASE("the sandbox blocks what could escape the run folder, each with a clear error") {
  const char* blocked[][2] = {
      {"os.execute('true')", "os.execute is disabled"},
      {"io.popen('ls')", "io.popen is disabled"},
      {"package.loadlib('libc.so.6', 'puts')", "package.loadlib is disabled"},
      {"string.dump(print)", "string.dump is disabled"},
      {"os.tmpname()", "os.tmpname is disabled"},
      {"io.tmpfile()", "io.tmpfile is disabled"},
      {"load('return 1', 'x', 'b')", "binary chunks are disabled"},
      {"load('return 1', 'x', 'bt')", "binary chunks are disabled"},
      {"assert(load('\\27Lua\\84\\0', 'x'))", "attempt to load a binary chunk"},
      {"io.open('/tmp/memscript-sandbox-escape', 'w')", "is outside the output folder"},
      {"io.output('/tmp/memscript-sandbox-escape')", "is outside the output folder"},
      {"os.remove('/etc/hostname')", "is outside the output folder"},
      {"os.rename('/etc/hostname', 'x')", "is outside the output folder"},
      {"require 'socket.core'", "module 'socket.core' not found"},
  };
  for (const auto& [code, message] : blocked) {
    INFO(code);
    const Ran ran = run_lua(code);
    CHECK(ran.code == 1);
    CHECK_THAT(ran.error, Contains(message));
  }
  CHECK(!fs::exists("/tmp/memscript-sandbox-escape"));
}

TEST_CASE("the sandbox hides debug and keeps the harmless libraries") {
  CHECK(run_lua("assert(debug == nil and package.loaded.debug == nil)").code == 0);
  CHECK(run_lua("assert(string.format('%d', 3) == '3' and math.floor(2.5) == 2)").code == 0);
  CHECK(run_lua("assert(table.concat({1, 2}, ',') == '1,2' and utf8.char(72) == 'H')").code == 0);
  CHECK(
      run_lua("assert(os.time() > 0 and os.clock() >= 0 and type(os.getenv) == 'function')").code ==
      0);
  CHECK(run_lua("assert(load('return 1 + 1')() == 2)").code == 0);
  CHECK(run_lua("assert(coroutine.wrap(function() coroutine.yield(5) end)() == 5)").code == 0);
}

TEST_CASE("files can be written, renamed and removed inside the output folder, and read anywhere") {
  TempDir out;
  memscript::lua::Interpreter interpreter(test_settings(out));
  const std::string root = (out.path() / "runs").string();
  fs::create_directories(root);
  out.write("script.lua",
            "local root = ...\n"
            "local f = assert(io.open(root .. '/note.txt', 'w'))\n"
            "f:write('kept') f:close()\n"
            "assert(os.rename(root .. '/note.txt', root .. '/moved.txt'))\n"
            "assert(io.open(root .. '/moved.txt'):read('a') == 'kept')\n"
            "assert(io.open('" MEMSCRIPT_STDLIB
            "/memscript.lua', 'r')):close()\n"
            "local g = assert(io.open(root .. '/gone.txt', 'w')) g:close()\n"
            "assert(os.remove(root .. '/gone.txt'))\n");
  CHECK(interpreter.run_file(out / "script.lua", {root}) == 0);
  CHECK(interpreter.last_error().empty());
  CHECK(read_file(out.path() / "runs/moved.txt") == "kept");
  CHECK(!fs::exists(out.path() / "runs/gone.txt"));
}

TEST_CASE("a symlink inside the output folder cannot be used to write outside it") {
  TempDir out;
  fs::create_directories(out / "runs");
  fs::create_directories(out / "elsewhere");
  fs::create_directory_symlink(out / "elsewhere", out / "runs/link");
  memscript::lua::Interpreter interpreter(test_settings(out));
  const std::string path = (out / "runs/link/x.txt").string();
  CHECK(interpreter.run_code("io.open('" + path + "', 'w')", "=test") == 1);
  CHECK_THAT(interpreter.last_error(), Contains("outside the output folder"));
  CHECK(!fs::exists(out / "elsewhere/x.txt"));
}

TEST_CASE("os.exit in the sandbox ends the script with its code after cleaning up") {
  CHECK(run_lua("local t = ms.task.parity{} os.exit(3)").code == 3);
  CHECK(run_lua("os.exit(true)").code == 0);
  CHECK(run_lua("os.exit(false)").code == 1);
}

TEST_CASE("option --unsafe lifts the sandbox") {
  CHECK(run_lua("assert(type(debug) == 'table' and type(debug.traceback) == 'function')", true)
            .code == 0);
  CHECK(run_lua("assert(type(string.dump(function() end)) == 'string')", true).code == 0);
  CHECK(
      run_lua("assert(type(io.popen) == 'function' and type(package.loadlib) == 'function')", true)
          .code == 0);
}

TEST_CASE("require finds the stdlib and the script's own folder, and records the latter") {
  TempDir out;
  memscript::lua::Interpreter interpreter(test_settings(out));
  const int status = interpreter.run_file(fs::path(MEMSCRIPT_TEST_SCRIPTS) / "uses_helper.lua", {});
  CHECK(interpreter.last_error().empty());
  CHECK(status == 0);
}

TEST_CASE("the run folder keeps the script and modules as they were read, not as edited since") {
  TempDir out;
  const fs::path src = out / "runs/src";
  fs::create_directories(src);
  // The script edits itself and its module before it trains, as a user's editor may while a
  // sweep runs; a "#!" line and a BOM-less UTF-8 comment are kept byte for byte.
  const std::string script =
      "#!/usr/bin/env memscript\n"
      "-- exp: train once — after editing this file and the module\n"
      "local helper = require 'lib.helper'\n"
      "local dir = ...\n"
      "for _, name in ipairs({ '/exp.lua', '/lib/helper.lua' }) do\n"
      "  local f = assert(io.open(dir .. name, 'w')) f:write('-- edited\\n') f:close()\n"
      "end\n"
      "local parity = ms.task.parity{ ones = { min = 1, max = 4 } }\n"
      "ms.train{ model = ms.model.decoder{ mixer = 'lstm', layers = 1, d_model = 8,\n"
      "                                    task = parity },\n"
      "          task = parity, steps = helper.steps, batch = 4, length = 8,\n"
      "          optimizer = ms.optim.adamw{ lr = 1e-3 }, out = 'tiny' }\n";
  const std::string module = "return { steps = 2 }\n";
  out.write("runs/src/exp.lua", script);
  fs::create_directories(src / "lib");
  out.write("runs/src/lib/helper.lua", module);
  memscript::lua::Interpreter interpreter(test_settings(out));
  const int status = interpreter.run_file(src / "exp.lua", {src.string()});
  INFO(interpreter.last_error());
  REQUIRE(status == 0);
  CHECK(read_file(src / "exp.lua") == "-- edited\n");
  CHECK(read_file(out / "runs/tiny/script/exp.lua") == script);
  CHECK(read_file(out / "runs/tiny/script/lib/helper.lua") == module);
}

TEST_CASE("a script's line numbers count its \"#!\" line, as Lua's own loader does") {
  TempDir out;
  fs::create_directories(out / "runs");
  out.write("runs/bang.lua", "#!/usr/bin/env memscript\nlocal x = 1\nerror('line three')\n");
  out.write("runs/bom.lua", "\xEF\xBB\xBFlocal x = 1\nerror('line two')\n");
  memscript::lua::Interpreter bang(test_settings(out));
  CHECK(bang.run_file(out / "runs/bang.lua", {}) == 1);
  CHECK_THAT(bang.last_error(), Contains("bang.lua:3: line three"));
  memscript::lua::Interpreter bom(test_settings(out));
  CHECK(bom.run_file(out / "runs/bom.lua", {}) == 1);
  CHECK_THAT(bom.last_error(), Contains("bom.lua:2: line two"));
}

TEST_CASE("pcall and coroutine.close stay yieldable and keep their results under the sandbox") {
  REQUIRE_LUA_OK(
      "local co = coroutine.wrap(function() local ok, v = pcall(coroutine.yield, 1) return ok, v "
      "end)\n"
      "assert(co() == 1)\n"
      "local ok, v = co(5) assert(ok == true and v == 5)\n"
      "assert(select('#', pcall(function() return 1, nil, 3 end)) == 4)\n"
      "local ok2, err = pcall(error, 'x', 0) assert(not ok2 and err == 'x')\n"
      "local c = coroutine.create(function() coroutine.yield() end) coroutine.resume(c)\n"
      "assert(coroutine.close(c) == true)\n");
}

TEST_CASE("nested coroutine.close calls end in Lua's C-stack error inside the sandbox") {
  TempDir out;
  memscript::lua::Interpreter interpreter(test_settings(out));
  const int status =
      interpreter.run_file(fs::path(MEMSCRIPT_TEST_SCRIPTS) / "coroutine_close_nesting.lua", {});
  INFO(interpreter.last_error());
  CHECK(status == 0);
}
