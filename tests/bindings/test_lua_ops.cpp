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

namespace {

// Shared by the scans below: float64 leaves from seeded normals, and the largest gap between
// two tensors' values.
const std::string kScanHelpers = R"lua(
  local function input(shape, seed)
    return ms.randn(shape, { seed = seed, dtype = "float64" }):requires_grad()
  end
  local function twin(t) return t:detach():requires_grad() end
  local function gap(a, b) return (a - b):abs():amax():item() end
)lua";

}  // namespace

TEST_CASE("ms.ops.diagonal_scan matches h_t = a_t h_{t-1} + b_t written in Lua, with gradients") {
  REQUIRE_LUA_OK(kScanHelpers + R"lua(
    local B, L, D = 2, 9, 5
    -- a in (−1, 1): both signs of the carry.
    local a, b, h0 = input({ B, L, D }, 1):tanh():detach():requires_grad(), input({ B, L, D }, 2),
                     input({ B, D }, 3)
    local h, last = ms.ops.diagonal_scan{ a = a, b = b, state = h0 }
    local a2, b2, s2 = twin(a), twin(b), twin(h0)
    local steps = {}
    for t = 1, L do
      s2 = a2:select(2, t) * s2 + b2:select(2, t)
      steps[t] = s2:unsqueeze(2)
    end
    local written = ms.cat(steps, 2)
    assert(gap(h, written) < 1e-12 and gap(last, s2) < 1e-12, "outputs")
    local w = ms.randn({ B, L, D }, { seed = 4, dtype = "float64" });
    ((h * w):sum() + last:sum()):backward();
    ((written * w):sum() + s2:sum()):backward()
    for name, pair in pairs{ a = { a, a2 }, b = { b, b2 }, state = { h0, nil } } do
      if pair[2] then assert(gap(pair[1]:grad(), pair[2]:grad()) < 1e-12, "grad " .. name) end
    end
    local zero_start = ms.ops.diagonal_scan{ a = a:detach(), b = b:detach() }
    assert(gap(zero_start:select(2, 1), b:detach():select(2, 1)) == 0, "h_0 = 0 by default")
  )lua");
}

TEST_CASE("ms.ops.complex_scan matches the LRU's complex recurrence written in Lua") {
  REQUIRE_LUA_OK(kScanHelpers + R"lua(
    local B, L, D = 2, 7, 3
    local lr, li = (input({ D }, 1) * 0.5):detach():requires_grad(), (input({ D }, 2) * 0.5):detach():requires_grad()
    local br, bi, sr, si = input({ B, L, D }, 3), input({ B, L, D }, 4), input({ B, D }, 5), input({ B, D }, 6)
    local hr, hi, last_r, last_i = ms.ops.complex_scan{ lambda_re = lr, lambda_im = li, b_re = br,
                                                        b_im = bi, state_re = sr, state_im = si }
    local lr2, li2, br2, bi2 = twin(lr), twin(li), twin(br), twin(bi)
    local r, i = twin(sr), twin(si)
    local rs, is = {}, {}
    for t = 1, L do
      -- (λ h)_re = λr hr − λi hi, (λ h)_im = λr hi + λi hr
      r, i = lr2 * r - li2 * i + br2:select(2, t), lr2 * i + li2 * r + bi2:select(2, t)
      rs[t], is[t] = r:unsqueeze(2), i:unsqueeze(2)
    end
    local wr, wi = ms.cat(rs, 2), ms.cat(is, 2)
    assert(gap(hr, wr) < 1e-12 and gap(hi, wi) < 1e-12, "outputs")
    assert(gap(last_r, r) < 1e-12 and gap(last_i, i) < 1e-12, "last state")
    local w = ms.randn({ B, L, D }, { seed = 7, dtype = "float64" });
    ((hr * w):sum() + (hi * w * 2):sum() + last_r:sum()):backward();
    ((wr * w):sum() + (wi * w * 2):sum() + r:sum()):backward()
    for name, pair in pairs{ lambda_re = { lr, lr2 }, lambda_im = { li, li2 }, b_re = { br, br2 },
                             b_im = { bi, bi2 } } do
      assert(gap(pair[1]:grad(), pair[2]:grad()) < 1e-10, "grad " .. name)
    end
  )lua");
}

TEST_CASE("ms.ops.selective_scan matches Mamba's scan written in Lua, both eigenvalue ranges") {
  REQUIRE_LUA_OK(kScanHelpers + R"lua(
    local B, L, D, N = 2, 6, 3, 4
    for _, negative in ipairs{ false, true } do
      local u, B_, C_ = input({ B, L, D }, 1), input({ B, L, N }, 2), input({ B, L, N }, 3)
      local delta = input({ B, L, D }, 4):softplus():detach():requires_grad()
      local A = (-input({ D, N }, 5):exp()):detach():requires_grad()
      local h0 = input({ B, D, N }, 6)
      local y, last = ms.ops.selective_scan{ u = u, delta = delta, A = A, B = B_, C = C_,
                                             state = h0, negative_eigenvalues = negative }
      local u2, d2, A2, B2, C2, h = twin(u), twin(delta), twin(A), twin(B_), twin(C_), twin(h0)
      local ys = {}
      for t = 1, L do
        local dt = d2:select(2, t):unsqueeze(3)                        -- [B, D, 1]
        local a = (dt * A2):exp()
        if negative then a = 2 * a - 1 end
        h = a * h + (dt * u2:select(2, t):unsqueeze(3)) * B2:select(2, t):unsqueeze(2)
        ys[t] = h:matmul(C2:select(2, t):unsqueeze(3)):squeeze(3):unsqueeze(2)
      end
      local written = ms.cat(ys, 2)
      local what = negative and "negative eigenvalues" or "positive"
      assert(gap(y, written) < 1e-12 and gap(last, h) < 1e-12, what .. ": outputs")
      local w = ms.randn({ B, L, D }, { seed = 8, dtype = "float64" });
      ((y * w):sum() + last:sum()):backward();
      ((written * w):sum() + h:sum()):backward()
      for name, pair in pairs{ u = { u, u2 }, delta = { delta, d2 }, A = { A, A2 }, B = { B_, B2 },
                               C = { C_, C2 } } do
        assert(gap(pair[1]:grad(), pair[2]:grad()) < 1e-10, what .. ": grad " .. name)
      end
    end
  )lua");
}

TEST_CASE("ms.ops.causal_attention is softmax attention written in Lua, with a key cache") {
  REQUIRE_LUA_OK(kScanHelpers + R"lua(
    for _, head_dim in ipairs{ 4, 16 } do      -- the CPU kernel's sizes and libtorch's
      local q, k, v = input({ 2, 2, 3, head_dim }, 1), input({ 2, 2, 5, head_dim }, 2),
                      input({ 2, 2, 5, head_dim }, 3)
      local o = ms.ops.causal_attention{ q = q, k = k, v = v }
      -- Query i is the key position 2 + i: it sees keys 1 .. 2 + i.
      local scores = q:matmul(k:transpose(3, 4)) * (1 / math.sqrt(head_dim))
      local visible = ms.tensor{ { true, true, true, false, false }, { true, true, true, true, false },
                                 { true, true, true, true, true } }
      local masked = scores + (1 - visible:to("float64")) * -1e30
      local written = masked:softmax(4):matmul(v)
      assert(gap(o, written) < 1e-12, "head_dim " .. head_dim)
      -- ALiBi: head h's score for key j loses slopes[h] · (the query's position − j).
      local slopes = ms.tensor{ 0.5, 0.125 }:to("float64")
      local distance = ms.tensor{ { 2, 1, 0, -1, -2 }, { 3, 2, 1, 0, -1 },
                                  { 4, 3, 2, 1, 0 } }:to("float64")
      local bias = -(slopes:reshape{ 2, 1, 1 } * distance:reshape{ 1, 3, 5 })
      local biased = ms.ops.causal_attention{ q = q, k = k, v = v, slopes = slopes }
      local written_biased = (masked + bias:reshape{ 1, 2, 3, 5 }):softmax(4):matmul(v)
      assert(gap(biased, written_biased) < 1e-12, "alibi, head_dim " .. head_dim)
      assert(gap(biased, o) > 1e-3, "alibi changes the output")
      -- Relative positions: the score of key j gains q_position_i · relative[p_i − j] / √d,
      -- relative's row d + 1 in Lua's numbering.
      local qp, relative = input({ 2, 2, 3, head_dim }, 4), input({ 2, 5, head_dim }, 5)
      local by_distance = qp:matmul(relative:transpose(2, 3))  -- [2, 2, 3, distance + 1]
      local rows = {}
      for i = 1, 3 do
        local pick = {}  -- pick[d + 1][j] = 1 where query i is d past key j (query i is key 2 + i)
        for d = 0, 4 do
          pick[d + 1] = {}
          for j = 1, 5 do pick[d + 1][j] = d == 2 + i - j and 1 or 0 end
        end
        rows[i] = by_distance:select(3, i):matmul(ms.tensor(pick):to("float64")):reshape{ 2, 2, 1, 5 }
      end
      local bias = ms.cat(rows, 3) * (1 / math.sqrt(head_dim))
      local relative_o = ms.ops.causal_attention{ q = q, k = k, v = v, q_position = qp,
                                                  relative = relative }
      local written_relative = (masked + bias):softmax(4):matmul(v)
      assert(gap(relative_o, written_relative) < 1e-12, "relative, head_dim " .. head_dim)
      relative_o:sum():backward()
      assert(qp:grad():abs():amax():item() > 0 and relative:grad():abs():amax():item() > 0,
             "gradients reach q_position and relative")
    end
  )lua");
}

TEST_CASE("ms.ops scans and attention name the argument that is wrong") {
  const std::string setup = "local x = ms.zeros{2, 5, 3}; ";
  CHECK_THAT(run_lua(setup + "ms.ops.diagonal_scan{ a = x, b = ms.zeros{2, 5, 4} }").error,
             Contains("ms.ops.diagonal_scan: option 'b' must be a's shape = [2, 5, 3], got "
                      "[2, 5, 4]"));
  CHECK_THAT(run_lua(setup + "ms.ops.diagonal_scan{ a = ms.zeros{2, 5}, b = x }").error,
             Contains("option 'a' must be a floating [batch, length, channels], got [2, 5]"));
  CHECK_THAT(run_lua(setup + "ms.ops.complex_scan{ b_re = x, b_im = x, lambda_re = ms.zeros{3}, "
                             "lambda_im = ms.zeros{3}, state_re = ms.zeros{2, 3} }")
                 .error,
             Contains("option 'state_im' must come with the other part"));
  CHECK_THAT(run_lua(setup + "ms.ops.selective_scan{ u = x, delta = x, A = ms.zeros{4, 2}, "
                             "B = ms.zeros{2, 5, 2}, C = ms.zeros{2, 5, 2} }")
                 .error,
             Contains("option 'A' must be [channels, states] = [3, states], got [4, 2]"));
  CHECK_THAT(run_lua(setup + "ms.ops.selective_scan{ u = x, delta = x, A = ms.zeros{3, 2}, "
                             "B = ms.zeros{2, 5, 2}, C = ms.zeros{2, 5, 3} }")
                 .error,
             Contains("option 'C' must be [batch, length, states] = [2, 5, 2], got [2, 5, 3]"));
  CHECK_THAT(run_lua("local q = ms.zeros{1, 2, 4, 3}; ms.ops.causal_attention{ q = q, "
                     "k = ms.zeros{1, 2, 3, 3}, v = ms.zeros{1, 2, 3, 3} }")
                 .error,
             Contains("option 'k' must be [batch, heads, keys, head_dim] with keys ≥ the 4 "
                      "queries, got [1, 2, 3, 3]"));
  CHECK_THAT(run_lua("local q = ms.zeros{1, 2, 4, 3}; ms.ops.causal_attention{ q = q, k = q, "
                     "v = q:to('float64') }")
                 .error,
             Contains("option 'v' must have q's dtype and device"));
  CHECK_THAT(run_lua("local q = ms.zeros{1, 2, 4, 3}; ms.ops.causal_attention{ q = q, k = q, "
                     "v = q, slopes = ms.zeros{3} }")
                 .error,
             Contains("option 'slopes' must be [heads] = [2], got [3]"));
  const std::string qkv =
      "local q = ms.zeros{1, 2, 4, 3}; ms.ops.causal_attention{ q = q, k = q, "
      "v = q, ";
  CHECK_THAT(run_lua(qkv + "q_position = q }").error,
             Contains("option 'relative' must come with the other of q_position and relative"));
  CHECK_THAT(run_lua(qkv + "q_position = q, relative = ms.zeros{2, 3, 3} }").error,
             Contains("option 'relative' must be [heads, keys, head_dim] = [2, 4, 3], got "
                      "[2, 3, 3]"));
  CHECK_THAT(
      run_lua(qkv + "q_position = q, relative = ms.zeros{2, 4, 3}, slopes = ms.zeros{2} }").error,
      Contains("option 'slopes' and relative positions do not combine"));
}
