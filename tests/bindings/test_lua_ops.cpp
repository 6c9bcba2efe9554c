// ms.ops.* (bindings/lua_ops.cpp): the fused recurrences on Lua tensors against the same
// recurrences written in the script with tensor ops, outputs and gradients in float64.

#include <catch2/catch.hpp>

#include "harness.h"

using Catch::Matchers::Contains;
using memscript::test::run_lua;

TEST_CASE("ms.ops.delta_rule matches the delta rule written in Lua, outputs and gradients") {
  REQUIRE_LUA_OK(R"lua(
    local B, H, L, dk, dv = 2, 2, 7, 3, 4
    local function input(shape, seed) return ms.randn(shape, { seed = seed, dtype = "float64" }) end
    local base = {
      q = input({ B, H, L, dk }, 1), k = input({ B, H, L, dk }, 2), v = input({ B, H, L, dv }, 3),
      beta = input({ B, H, L }, 4):sigmoid(), alpha = input({ B, H, L }, 5):sigmoid(),
      state = input({ B, H, dv, dk }, 6), key_alpha = input({ B, H, L, dk }, 9):sigmoid(),
    }
    local w_out, w_state = input({ B, H, L, dv }, 7), input({ B, H, dv, dk }, 8)
    local function leaves()
      local t = {}
      for name, x in pairs(base) do t[name] = x:detach():to("float64"):requires_grad() end
      return t
    end

    -- S_t = α S (I − β k kᵀ) + β v kᵀ (additive: α S + β v kᵀ), o_t = S_t q_t, token by token;
    -- with α per key column, S diag(α) in place of α S.
    local function written(x, additive, per_key)
      local S, outputs = x.state, {}
      for t = 1, L do
        local k, v = x.k:select(3, t), x.v:select(3, t)
        if per_key then
          S = S * x.key_alpha:select(3, t):unsqueeze(-2)
        else
          S = S * x.alpha:select(3, t):unsqueeze(-1):unsqueeze(-1)
        end
        local recalled = additive and 0 or S:matmul(k:unsqueeze(-1)):squeeze(-1)
        local write = (v - recalled) * x.beta:select(3, t):unsqueeze(-1)
        S = S + write:unsqueeze(-1) * k:unsqueeze(-2)
        outputs[t] = S:matmul(x.q:select(3, t):unsqueeze(-1)):squeeze(-1):unsqueeze(3)
      end
      return ms.cat(outputs, 3), S
    end

    local function largest_gap(a, b) return (a - b):abs():amax():item() end

    for _, case in ipairs{ { "delta", false }, { "additive", false }, { "delta", true },
                           { "additive", true } } do
      local update, per_key = case[1], case[2]
      local what = update .. (per_key and ", α per key" or "")
      local x, y = leaves(), leaves()
      local o1, s1 = ms.ops.delta_rule{ q = x.q, k = x.k, v = x.v, beta = x.beta,
                                        alpha = per_key and x.key_alpha or x.alpha,
                                        state = x.state, update = update }
      local o2, s2 = written(y, update == "additive", per_key)
      assert(largest_gap(o1, o2) < 1e-9, what .. ": outputs")
      assert(largest_gap(s1, s2) < 1e-9, what .. ": state")
      local fused_loss = (o1 * w_out):sum() + (s1 * w_state):sum()
      local written_loss = (o2 * w_out):sum() + (s2 * w_state):sum()
      fused_loss:backward()
      written_loss:backward()
      local alpha = per_key and "key_alpha" or "alpha"
      for _, name in ipairs{ "q", "k", "v", "beta", alpha, "state" } do
        assert(largest_gap(x[name]:grad(), y[name]:grad()) < 1e-9, what .. ": grad " .. name)
      end
    end
  )lua");
}

TEST_CASE("ms.ops.linear_attention matches linear attention written in Lua") {
  REQUIRE_LUA_OK(R"lua(
    local B, H, L, dk, dv = 1, 2, 9, 3, 2
    local function input(shape, seed) return ms.randn(shape, { seed = seed, dtype = "float64" }) end
    local q = input({ B, H, L, dk }, 1):elu() + 1
    local k = (input({ B, H, L, dk }, 2):elu() + 1):requires_grad()
    local v = input({ B, H, L, dv }, 3)
    local o, S, z = ms.ops.linear_attention{ q = q, k = k, v = v }
    -- o_t = Σ_{s≤t} (q_t·k_s) v_s / (Σ_{s≤t} q_t·k_s + eps): the causal form.
    local scores = q:matmul(k:transpose(3, 4)) * ms.causal_mask(L):to("float64")
    local expected = scores:matmul(v) / (scores:sum(4, true) + 1e-6)
    assert((o - expected):abs():amax():item() < 1e-12)
    assert((S - k:transpose(3, 4):matmul(v)):abs():amax():item() < 1e-12)
    assert((z - k:sum(3)):abs():amax():item() < 1e-12)
    o:sum():backward()
    assert(k:grad() ~= nil)
  )lua");
}

TEST_CASE("ms.ops name the argument whose shape, dtype or value is wrong") {
  const std::string setup =
      "local q = ms.zeros{1, 2, 5, 3}; local v = ms.zeros{1, 2, 5, 4}; "
      "local beta = ms.zeros{1, 2, 5}; ";
  CHECK_THAT(run_lua(setup + "ms.ops.delta_rule{ q = q, k = ms.zeros{1, 2, 5, 2}, v = v, "
                             "beta = beta }")
                 .error,
             Contains("ms.ops.delta_rule: option 'k' must be q's shape = [1, 2, 5, 3], got "
                      "[1, 2, 5, 2]"));
  CHECK_THAT(
      run_lua(setup + "ms.ops.delta_rule{ q = q, k = q, v = v, beta = beta:to('float64') }").error,
      Contains("option 'beta' must have q's dtype and device"));
  CHECK_THAT(run_lua(setup + "ms.ops.delta_rule{ q = q, k = q, v = v }").error,
             Contains("option 'beta' is required"));
  CHECK_THAT(run_lua(setup + "ms.ops.delta_rule{ q = q, k = q, v = v, beta = beta, "
                             "alpha = ms.zeros{1, 2, 5, 4} }")
                 .error,
             Contains("option 'alpha' must be [batch, heads, length, dk] = [1, 2, 5, 3], got "
                      "[1, 2, 5, 4]"));
  CHECK_THAT(run_lua(setup + "ms.ops.delta_rule{ q = q, k = q, v = v, beta = beta, "
                             "alpha = ms.zeros{1, 2} }")
                 .error,
             Contains("option 'alpha' must be [batch, heads, length] or [batch, heads, length, "
                      "dk] = [1, 2, 5], got [1, 2]"));
  CHECK_THAT(run_lua(setup + "ms.ops.delta_rule{ q = q, k = q, v = v, beta = beta, "
                             "state = ms.zeros{1, 2, 3, 4} }")
                 .error,
             Contains("option 'state' must be [batch, heads, dv, dk] = [1, 2, 4, 3]"));
  CHECK_THAT(run_lua(setup + "ms.ops.delta_rule{ q = q, k = q, v = v, beta = beta, "
                             "update = 'erase' }")
                 .error,
             Contains("update"));
  CHECK_THAT(run_lua(setup + "ms.ops.linear_attention{ q = q, k = q, v = v, "
                             "sum = ms.zeros{1, 2, 3, 4} }")
                 .error,
             Contains("option 'normaliser' must come with the other state tensor"));
  CHECK_THAT(run_lua("ms.ops.delta_rule{ q = ms.zeros{2, 3}, k = 1 }").error,
             Contains("option 'q' must be [batch, heads, length, dk], got [2, 3]"));
}

TEST_CASE("ms.ops.l2_normalize equals x / ‖x‖ in float64 and names a bad argument") {
  REQUIRE_LUA_OK(R"lua(
    local x = ms.randn({ 2, 3, 5 }, { seed = 4, dtype = "float64" })
    local gap = (ms.ops.l2_normalize(x) - x / x:norm(3, true)):abs():amax():item()
    assert(gap < 1e-12, gap)
  )lua");
  CHECK_THAT(run_lua("ms.ops.l2_normalize(ms.arange(3))").error,
             Contains("a floating tensor expected"));
  CHECK_THAT(run_lua("ms.mixer.define{ name = 'a', init = function(ctx) "
                     "ctx:linear('w', 2, 2, { activation = 'tanh' }) end, "
                     "forward = function(s, x) return x end }\n"
                     "ms.model.decoder{ mixer = 'a', d_model = 4, task = ms.task.parity{} }")
                 .error,
             Contains("activation must be sigmoid, silu, gelu, relu or softplus"));
}

TEST_CASE("ms.ops.causal_conv matches the convolution written in Lua, in chunks too") {
  REQUIRE_LUA_OK(R"lua(
    local B, L, C, K = 2, 7, 3, 4
    local f64 = { dtype = "float64" }
    local x, w, b = ms.randn({ B, L, C }, { seed = 1, dtype = "float64" }),
                    ms.randn({ C, 1, K }, { seed = 2, dtype = "float64" }),
                    ms.randn({ C }, { seed = 3, dtype = "float64" })
    -- u_t = silu(b + Σ_j w[:, 0, j] x_{t − (K − 1) + j}), zeros before the sequence.
    local padded = ms.cat({ ms.zeros({ B, K - 1, C }, f64), x }, 2)
    local rows = {}
    for t = 1, L do
      local sum = b
      for j = 1, K do
        sum = sum + padded:select(2, t + j - 1) * w:select(2, 1):select(2, j)
      end
      rows[t] = sum:silu():unsqueeze(2)
    end
    local written = ms.cat(rows, 2)
    local u = ms.ops.causal_conv{ x = x, weight = w, bias = b }
    assert((u - written):abs():amax():item() < 1e-12, "one pass")
    local first, window = ms.ops.causal_conv{ x = x:narrow(2, 1, 3), weight = w, bias = b }
    local rest = ms.ops.causal_conv{ x = x:narrow(2, 4, 4), weight = w, bias = b, window = window }
    assert((ms.cat({ first, rest }, 2) - u):abs():amax():item() < 1e-12, "chunks")
  )lua");
  CHECK_THAT(run_lua("ms.ops.causal_conv{ x = ms.zeros{ 1, 4, 3 }, weight = ms.zeros{ 2, 1, 4 }, "
                     "bias = ms.zeros{ 3 } }")
                 .error,
             Contains("option 'weight' must be [3, 1, K], got [2, 1, 4]"));
  CHECK_THAT(run_lua("ms.ops.causal_conv{ x = ms.zeros{ 1, 4, 3 }, weight = ms.zeros{ 3, 1, 4 }, "
                     "bias = ms.zeros{ 3 }, window = ms.zeros{ 1, 3, 2 } }")
                 .error,
             Contains("option 'window' must be [batch, channels, K - 1] = [1, 3, 3]"));
}
