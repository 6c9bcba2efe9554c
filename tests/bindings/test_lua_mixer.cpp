// ms.mixer.define (bindings/lua_mixer.cpp): a mixer written in the script works where a
// built-in does, keeps the mixer contract (causal, chunks = one pass, gradients to every
// parameter, save and load), and a wrong definition is one line naming what is wrong.

#include <catch2/catch.hpp>

#include "harness.h"

using Catch::Matchers::Contains;
using memscript::test::run_lua;

namespace {

// A minGRU-like gated recurrence written in Lua: h_t = (1 − z_t) h_{t−1} + z_t c_t.
const std::string kGatedMixer = R"lua(
  ms.mixer.define{
    name = "gated_lua",
    options = { hidden = 6, negative = false },
    init = function(ctx, opts)
      local self = { hidden = opts.hidden, negative = opts.negative }
      self.gates = ctx:linear("gates", ctx.d_model, 2 * opts.hidden)
      self.out = ctx:linear("out", opts.hidden, ctx.d_model, { init = "output" })
      self.norm = ctx:rms_norm("norm", opts.hidden)
      self.scale = ctx:param("scale", { opts.hidden }, "ones")
      return self
    end,
    forward = function(self, x, state)
      local g = self.gates(x)
      local z = g:narrow(3, 1, self.hidden):sigmoid()
      local c = g:narrow(3, self.hidden + 1, self.hidden)
      local h = state and state[1] or x:new_zeros{ x:shape()[1], self.hidden }
      local outs = {}
      for t = 1, x:shape()[2] do
        local zt = z:select(2, t)
        h = (1 - zt) * h + zt * c:select(2, t)
        outs[t] = h:unsqueeze(2)
      end
      return self.out(self.norm(ms.cat(outs, 2)) * self.scale), { h }
    end,
  }
)lua";

}  // namespace

TEST_CASE("a Lua mixer is causal, chunks give one pass, every parameter gets a gradient") {
  REQUIRE_LUA_OK(kGatedMixer + R"lua(
    local task = ms.task.parity{}
    local m = ms.model.decoder{ layers = { { mixer = "gated_lua", hidden = 5 }, { mixer = "gpt" } },
                                d_model = 8, task = task, seed = 3 }
    m:to("cpu", "float64")
    assert(m:config().layers[1].hidden == 5 and m:config().layers[1].negative == false)
    local b = task:sample{ batch = 3, length = 9 }
    local whole = m:forward(b.inputs)
    local first, state = m:forward(b.inputs:narrow(2, 1, 4))
    local rest = m:forward(b.inputs:narrow(2, 5, 5), state)
    assert((ms.cat({ first, rest }, 2) - whole):abs():amax():item() < 1e-9, "chunks")

    -- Causal: changing the last token leaves every earlier position's logits as they were.
    local changed = ms.cat({ b.inputs:narrow(2, 1, 8), 1 - b.inputs:narrow(2, 9, 1) }, 2)
    local again = m:forward(changed)
    assert((again:narrow(2, 1, 8) - whole:narrow(2, 1, 8)):abs():amax():item() == 0, "causal")

    m:loss(b):backward()
    for _, p in ipairs(m:parameters()) do
      assert(p:grad() and p:grad():abs():sum():item() > 0, "a parameter without gradient")
    end
  )lua");
}

TEST_CASE("a Lua mixer trains, saves, loads and re-runs to the same numbers") {
  REQUIRE_LUA_OK(kGatedMixer + R"lua(
    local task = ms.task.parity{}
    local function train()
      local m = ms.model.decoder{ mixer = "gated_lua", d_model = 8, task = task, seed = 5 }
      local r = ms.train{ model = m, task = task, steps = 6, batch = 4, length = 6,
                          optimizer = ms.optim.adam{ lr = 1e-2 }, eval = { lengths = { 6 } } }
      return m, r
    end
    local m1, r1 = train()
    local m2, r2 = train()
    assert(type(r1.loss) == "number" and r1.loss == r2.loss, "the same loss twice")
    assert(r1.scores[6].accuracy == r2.scores[6].accuracy, "the same evaluation twice")
    m1:save(ms.out .. "/gated.pt")
    local loaded = ms.model.load(ms.out .. "/gated.pt")
    local b = task:sample{ batch = 2, length = 7 }
    assert((loaded:forward(b.inputs) - m1:forward(b.inputs)):abs():amax():item() == 0, "load")
    assert(loaded:num_parameters() == m1:num_parameters())
  )lua");
}

TEST_CASE("ctx:embedding and ctx:causal_conv hold their weights and keep chunks = one pass") {
  REQUIRE_LUA_OK(R"lua(
    ms.mixer.define{
      name = "conv_embed",
      init = function(ctx, opts)
        local self = {}
        self.conv, self.conv_weight, self.conv_bias = ctx:causal_conv("conv", ctx.d_model, 3)
        self.position, self.table = ctx:embedding("position", 64, ctx.d_model)
        self.out = ctx:linear("out", ctx.d_model, ctx.d_model, { init = "output" })
        return self
      end,
      forward = function(self, x, state)
        local start = state and state.position or 0
        local u, window = self.conv(x, state and state[1])
        local p = self.position(ms.arange(start, start + x:shape()[2]))   -- [length, d_model]
        return self.out(u + p), { window }
      end,
    }
    local task = ms.task.parity{}
    local m = ms.model.decoder{ mixer = "conv_embed", d_model = 6, heads = 2, task = task, seed = 2 }
    m:to("cpu", "float64")
    local params = m:named_parameters()
    local w = params["blocks.0.mixer.conv_weight"]
    assert(w:shape()[1] == 6 and w:shape()[2] == 1 and w:shape()[3] == 3, "conv weight shape")
    -- libtorch's Conv1d init: uniform within ±1/√K.
    assert(w:abs():amax():item() <= 1 / math.sqrt(3) and w:abs():amax():item() > 0.1, "conv init")
    assert(params["blocks.0.mixer.position_weight"]:shape()[1] == 64, "embedding shape")
    local b = task:sample{ batch = 2, length = 9 }
    local whole = m:forward(b.inputs)
    local first, state = m:forward(b.inputs:narrow(2, 1, 4))
    local rest = m:forward(b.inputs:narrow(2, 5, 5), state)
    assert((ms.cat({ first, rest }, 2) - whole):abs():amax():item() < 1e-12, "chunks")
    m:loss(b):backward()
    for name, p in pairs(m:named_parameters()) do
      assert(p:grad() and p:grad():abs():sum():item() > 0, "no gradient for " .. name)
    end
  )lua");
  const std::string define = R"lua(
    ms.mixer.define{ name = "probe", init = function(ctx)
      local self = {}
      self.conv = ctx:causal_conv("conv", ctx.d_model, 2)
      self.embed = ctx:embedding("e", 4, ctx.d_model)
      return self
    end, forward = function(self, x, state) return BODY end }
    ms.model.decoder{ mixer = "probe", d_model = 4, task = ms.task.parity{} }
  )lua";
  const auto with_body = [&](const std::string& body) {
    std::string code = define;
    code.replace(code.find("BODY"), 4, body);
    return run_lua(code).error;
  };
  CHECK_THAT(with_body("x + self.embed(ms.arange(0, 5))"),
             Contains("indices must lie in 0..3, got 4"));
  CHECK_THAT(with_body("x + self.embed(ms.zeros{2})"),
             Contains("an int64 tensor of indices expected, got float32"));
  CHECK_THAT(with_body("self.conv(x:narrow(3, 1, 3))"),
             Contains("[batch, length, 4] expected, got"));
  CHECK_THAT(with_body("self.conv(x, ms.zeros{1, 4, 3})"),
             Contains("the window [batch, channels, K - 1] ="));
}

TEST_CASE("a Lua mixer with recurrent = false keeps a growing key-value cache across chunks") {
  REQUIRE_LUA_OK(R"lua(
    -- Causal attention written in the script, its state the keys and values seen so far.
    ms.mixer.define{
      name = "attention_lua",
      recurrent = false,
      init = function(ctx)
        local self = { heads = ctx.heads }
        self.qkv = ctx:linear("qkv", ctx.d_model, 3 * ctx.d_model)
        self.out = ctx:linear("out", ctx.d_model, ctx.d_model, { init = "output" })
        return self
      end,
      forward = function(self, x, state)
        local batch, length, width = x:shape()[1], x:shape()[2], x:shape()[3]
        local function heads(t) return t:reshape{ batch, -1, self.heads, width // self.heads }:transpose(2, 3) end
        local parts = self.qkv(x):split(width, 3)
        local q, k, v = heads(parts[1]), heads(parts[2]), heads(parts[3])
        if state then k, v = ms.cat({ state[1], k }, 3), ms.cat({ state[2], v }, 3) end
        local o = ms.ops.causal_attention{ q = q, k = k, v = v }
        return self.out(o:transpose(2, 3):reshape{ batch, length, width }), { k, v }
      end,
    }
    local task = ms.task.parity{}
    local m = ms.model.decoder{ mixer = "attention_lua", d_model = 8, heads = 2, task = task, seed = 1 }
    m:to("cpu", "float64")
    local b = task:sample{ batch = 2, length = 9 }
    local whole = m:forward(b.inputs)
    local first, state = m:forward(b.inputs:narrow(2, 1, 4))
    local rest = m:forward(b.inputs:narrow(2, 5, 5), state)
    assert((ms.cat({ first, rest }, 2) - whole):abs():amax():item() < 1e-12, "chunks")
  )lua");
  // Growing is for caches: a recurrent mixer's state keeps its shape, and a cache its rank.
  const std::string grows = R"lua(
    ms.mixer.define{ name = "grows", recurrent = RECURRENT,
      forward = function(self, x, s) return x, { STATE } end }
    ms.model.decoder{ mixer = "grows", d_model = 4, task = ms.task.parity{} }
  )lua";
  const auto with = [&](const std::string& recurrent, const std::string& state) {
    std::string code = grows;
    code.replace(code.find("RECURRENT"), 9, recurrent);
    code.replace(code.find("STATE"), 5, state);
    return run_lua(code);
  };
  const std::string growing = "ms.zeros{ 2, x:shape()[2], 3 }";
  CHECK(with("false", growing).code == 0);
  CHECK_THAT(with("false", "s and ms.zeros{ 2, 3 } or ms.zeros{ 2, 3, 1 }").error,
             Contains("the state's entry 1 changed shape between chunks, [2, 3, 1] to [2, 3]"));
  CHECK_THAT(with("true", growing).error,
             Contains("changed shape between chunks, [2, 2, 3] to [2, 1, 3] (a recurrent = false "
                      "mixer's state may grow)"));
}

TEST_CASE("a wrong Lua mixer definition is one line naming what is wrong") {
  const auto define = [](const std::string& fields) {
    return "ms.mixer.define{ name = 'bad', " + fields +
           " }\n"
           "ms.model.decoder{ mixer = 'bad', d_model = 4, task = ms.task.parity{} }";
  };
  const std::string identity = "forward = function(self, x, state) return x end";
  CHECK_THAT(run_lua("ms.mixer.define{ name = 'gpt', " + identity + " }").error,
             Contains("mixer 'gpt' is a built-in mixer"));
  CHECK_THAT(run_lua("ms.mixer.define{ name = 'a', " + identity +
                     " }\n"
                     "ms.mixer.define{ name = 'a', " +
                     identity + " }")
                 .error,
             Contains("mixer 'a' is already defined"));
  CHECK_THAT(run_lua("ms.mixer.define{ name = 'a' }").error,
             Contains("forward must be a function"));
  CHECK_THAT(run_lua("ms.mixer.define{ name = 'a', step = 1, " + identity + " }").error,
             Contains("unknown key 'step'"));
  CHECK_THAT(run_lua(define("forward = function(self, x) return x:narrow(3, 1, 2) end")).error,
             Contains("test:1: mixer 'bad': forward must return a tensor of x's shape [2, 2, 4] "
                      "and dtype Float, got [2, 2, 2] Float"));
  CHECK_THAT(run_lua(define("forward = function(self, x) return 3 end")).error,
             Contains("forward must return a tensor first, got number"));
  CHECK_THAT(
      run_lua(
          define("forward = function(self, x, s) return x, { ms.zeros{ 2, x:shape()[2] } } end"))
          .error,
      Contains("the state's entry 1 changed shape between chunks, [2, 2] to [2, 1]"));
  CHECK_THAT(run_lua(define("init = function(ctx) return { ctx = ctx } end, "
                            "forward = function(self, x) self.ctx:param('w', { 2 }) return x end"))
                 .error,
             Contains("ctx:param: parameters are made in init, not afterwards (in forward)"));
  CHECK_THAT(
      run_lua(define("init = function(ctx) ctx:param('w', { 2 }) ctx:param('w', { 3 }) end, " +
                     identity))
          .error,
      Contains("mixer 'bad' already has a parameter 'w'"));
  CHECK_THAT(run_lua(define("options = { width = 4 }, " + identity) +
                     "\nms.model.decoder{ mixer = 'bad', width = 'wide', d_model = 4, "
                     "task = ms.task.parity{} }")
                 .error,
             Contains("width"));
  CHECK_THAT(
      run_lua(define("init = function(ctx) ctx:param('w', { 1 << 20, 1 << 20 }) end, " + identity))
          .error,
      Contains("a parameter of shape [1048576, 1048576] would need at least 4.0 TiB"));
  CHECK_THAT(
      run_lua(define("init = function(ctx) ctx:linear('w', 1 << 30, 1 << 30) end, " + identity))
          .error,
      Contains("ctx:linear's weight of shape [1073741824, 1073741824] would need"));
  CHECK_THAT(
      run_lua(define("init = function(ctx) ctx:param('w', { 2, 0 }) end, " + identity)).error,
      Contains("sizes must be positive integers"));
  CHECK_THAT(run_lua(define("init = function(ctx) error('no init today') end, " + identity)).error,
             Contains("no init today"));
  CHECK_THAT(
      run_lua("ms.model.decoder{ mixer = 'gated_lau', d_model = 4, task = ms.task.parity{} }")
          .error,
      Contains("which is not a mixer"));
}

TEST_CASE("an error in a Lua mixer's forward during training fails the run, checkpoint kept") {
  REQUIRE_LUA_OK(R"lua(
    local calls = 0
    ms.mixer.define{ name = "flaky", forward = function(self, x)
      calls = calls + 1
      if calls > 12 then error("gave up at call " .. calls) end
      return x * 1
    end }
    local task = ms.task.parity{}
    local ok, message = pcall(ms.train, {
      model = ms.model.decoder{ mixer = "flaky", layers = 1, d_model = 4, task = task },
      task = task, steps = 20, batch = 2, length = 4, checkpoint_every = 2, out = "flaky" })
    assert(not ok and message:find("test:5: gave up at call 13"), message)
    local status = assert(io.open(ms.out .. "/flaky/status")):read("a")
    assert(status:find("failed"), status)
    assert(io.open(ms.out .. "/flaky/checkpoint.pt"), "the checkpoint is kept")
  )lua");
}

TEST_CASE(
    "the stdlib's qlstm, deltanet, retnet, gla and hgrn2 in Lua match the built-ins to 1e-9") {
  REQUIRE_LUA_OK(R"lua(
    require "memscript.mixers.qlstm"
    require "memscript.mixers.deltanet"
    require "memscript.mixers.retnet"
    require "memscript.mixers.gla"
    require "memscript.mixers.hgrn2"
    local task = ms.task.parity{}
    -- The built-in's parameter of a Lua one: gate_up.weight there is gate_up_weight here (a
    -- bare parameter, as hgrn2's norm_weight, has the same name in both).
    local function built_in(name, source)
      if source[name] then return name end
      local renamed = name:gsub("%.([%w_]+)_weight$", ".%1.weight"):gsub("%.([%w_]+)_bias$",
        function(m) return m == "forget" and ".forget_bias" or "." .. m .. ".bias" end)
      return renamed
    end
    local cases = {
      { "qlstm", { hidden = 5, gate_bias = true } },
      { "deltanet", { head_dim = 3, qkv_bias = true } },
      { "retnet", { head_dim = 3, qkv_bias = true } },
      { "gla", { head_dim = 4, key_dim = 3, gate_rank = 2, gate_normaliser = 4 } },
      { "hgrn2", { head_dim = 3, expand = 2 } },
    }
    local signed = { qlstm = true, deltanet = true }
    for _, case in ipairs(cases) do
      for _, negative in ipairs(signed[case[1]] and { false, true } or { false }) do
        local function build(mixer)
          local layer = { mixer = mixer, negative_eigenvalues = signed[case[1]] and negative or nil }
          for key, value in pairs(case[2]) do layer[key] = value end
          local m = ms.model.decoder{ layers = { layer, layer }, d_model = 8, heads = 2,
                                      task = task, seed = 4 }
          return m:to("cpu", "float64")
        end
        local builtin, written = build(case[1]), build(case[1] .. "_lua")
        local what = case[1] .. (negative and " (negative eigenvalues)" or "")
        assert(builtin:num_parameters() == written:num_parameters(), what)
        local source = builtin:named_parameters()
        for name, p in pairs(written:named_parameters()) do
          p:copy(assert(source[built_in(name, source)], built_in(name, source)))
        end
        local b = task:sample{ batch = 3, length = 11 }
        local gap = (builtin:forward(b.inputs) - written:forward(b.inputs)):abs():amax():item()
        assert(gap < 1e-9, what .. ": outputs differ by " .. gap)
        builtin:loss(b):backward()
        written:loss(b):backward()
        for name, p in pairs(written:named_parameters()) do
          local g = (p:grad() - source[built_in(name, source)]:grad()):abs():amax():item()
          assert(g < 1e-9, what .. ", " .. name .. ": gradients differ by " .. g)
        end
      end
    end
  )lua");
}

TEST_CASE("t:copy, m:to(device, dtype) and ms.zeros{ n, dtype = } work and name what they refuse") {
  CHECK_THAT(run_lua("ms.zeros{ 2, dtpye = 'float64' }").error,
             Contains("'dtpye' is not an option here"));
  CHECK_THAT(run_lua("ms.zeros{ 2 }:copy(ms.zeros{ 3 })").error,
             Contains("a tensor of shape [2] expected, got [3]"));
  CHECK_THAT(run_lua("ms.model.decoder{ mixer = 'gpt', d_model = 4, task = ms.task.parity{} }"
                     ":to('cpu', 'half')")
                 .error,
             Contains("dtype expected (\"float32\" or \"float64\")"));
  REQUIRE_LUA_OK(R"lua(
    local t = ms.zeros{ 2 }
    assert(t:copy(ms.ones{ 2 }) == t and t:sum():item() == 2)
    -- A Lua mixer's state made in x's dtype: creation options inside the shape's table.
    assert(ms.zeros{ 2, dtype = "float64" }:dtype() == "float64")
    local z = ms.ones({ 3 }, { dtype = "float64" }):new_zeros{ 2, 4 }
    assert(z:dtype() == "float64" and z:shape()[2] == 4 and z:sum():item() == 0)
    assert(ms.randn{ 2, seed = 3 }:sum():item() == ms.randn({ 2 }, { seed = 3 }):sum():item())
    local m = ms.model.decoder{ mixer = "gpt", d_model = 4, task = ms.task.parity{} }
    m:to("cpu", "float64")
    assert(m:forward(ms.task.parity{}:sample{ length = 3 }.inputs):dtype() == "float64")
  )lua");
}
