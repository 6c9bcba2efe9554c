// The stdlib's mixers written on ms.ops (stdlib/memscript/mixers/mlstm.lua, mamba2.lua,
// deltaproduct.lua, slstm.lua): each one's output, in float64, is its paper's recurrence written
// out token by token in plain Lua numbers (no ms.ops) from the mixer's own weights and input, to
// 1e-9; and each keeps the mixer contract (two-layer decoder: chunks give one pass to 1e-9,
// causal, a gradient on every parameter, a few steps of ms.train).

#include <catch2/catch.hpp>

#include "harness.h"

using memscript::test::run_lua;

namespace {

// What every case below uses: the mixers' inputs and outputs seen by name, plain-Lua helpers,
// a float64 decoder with its mixer weights spread out, and the contract checks.
const std::string kPrelude = R"lua(
    -- Every stdlib mixer required below reports its latest input and output here (by name),
    -- so that a recurrence written out in plain Lua can be run on the same x.
    local seen = {}
    do
      local define = ms.mixer.define
      ms.mixer.define = function(definition)
        local forward = definition.forward
        definition.forward = function(self, x, state)
          local y, new_state = forward(self, x, state)
          seen[definition.name] = { x = x, y = y }
          return y, new_state
        end
        return define(definition)
      end
    end

    -- Plain Lua arithmetic for the written-out recurrences.
    local exp, log, sqrt, abs = math.exp, math.log, math.sqrt, math.abs
    local function sigmoid(z) return 1 / (1 + exp(-z)) end
    local function softplus(z) return log(1 + exp(z)) end
    local function silu(z) return z * sigmoid(z) end
    local function zeros(n) local r = {} for i = 1, n do r[i] = 0 end return r end
    -- W x (+ b), W a list of rows.
    local function matvec(W, x, b)
      local r = {}
      for i, row in ipairs(W) do
        local s = b and b[i] or 0
        for j, w in ipairs(row) do s = s + w * x[j] end
        r[i] = s
      end
      return r
    end
    local function slice(x, from, n) return table.move(x, from, from + n - 1, 1, {}) end
    -- Layer norm of x[from .. from + n − 1] (no affine), as a list.
    local function layer_norm(x, from, n)
      local mean, var, r = 0, 0, {}
      for a = 1, n do mean = mean + x[from + a - 1] / n end
      for a = 1, n do var = var + (x[from + a - 1] - mean) ^ 2 / n end
      for a = 1, n do r[a] = (x[from + a - 1] - mean) / sqrt(var + 1e-5) end
      return r
    end

    local task = ms.task.parity{}
    -- A float64 decoder of `layers` layers of `layer`; its mixers' weights moved off their
    -- small initial values (seeded), so that every gate and branch does something.
    local function build(layer, layers, spread)
      local list = {}
      for i = 1, layers do list[i] = layer end
      local m = ms.model.decoder{ layers = list, d_model = 8, heads = 2, task = task, seed = 7 }
      m:to("cpu", "float64")
      local seed = 11
      for name, p in pairs(m:named_parameters()) do
        if spread and name:find("%.mixer%.") then
          seed = seed + 1
          p:copy(p + spread * ms.randn(p:shape(), { seed = seed, dtype = "float64" }))
        end
      end
      return m
    end
    -- The mixer's weights as Lua lists, by their short names (query_weight, ...).
    local function weights(m)
      local w = {}
      for name, p in pairs(m:named_parameters()) do
        local short = name:match("^blocks%.0%.mixer%.(.+)$")
        if short then w[short] = p:tolist() end
      end
      return w
    end
    -- The mixer's output on its latest input against `reference(w, x_row)` (x_row: the tokens'
    -- inputs of one batch row, a list of lists), the largest difference.
    local function against(m, name, reference)
      local b = task:sample{ batch = 2, length = 10 }
      m:forward(b.inputs)
      local x, y = seen[name].x:tolist(), seen[name].y:tolist()
      local w, gap = weights(m), 0
      for row = 1, #x do
        local expected = reference(w, x[row])
        for t = 1, #x[row] do
          for j = 1, #y[row][t] do gap = math.max(gap, abs(y[row][t][j] - expected[t][j])) end
        end
      end
      return gap
    end
    -- Chunks against one pass, causality, a gradient on every parameter and a few steps of
    -- training, for a two-layer decoder of `layer`.
    local function check_contract(layer)
      local m = build(layer, 2, 0.3)
      local b = task:sample{ batch = 3, length = 11 }
      local whole = m:forward(b.inputs)
      local first, state = m:forward(b.inputs:narrow(2, 1, 4))
      local second, state2 = m:forward(b.inputs:narrow(2, 5, 6), state)
      local third = m:forward(b.inputs:narrow(2, 11, 1), state2)
      local gap = (ms.cat({ first, second, third }, 2) - whole):abs():amax():item()
      assert(gap < 1e-9, layer.mixer .. ": chunks differ from one pass by " .. gap)

      -- Causal: a changed token 6 leaves positions 1-5 as they were, and moves position 6.
      local changed = ms.cat({ b.inputs:narrow(2, 1, 5), 1 - b.inputs:narrow(2, 6, 1),
                               b.inputs:narrow(2, 7, 5) }, 2)
      local again = m:forward(changed)
      assert((again:narrow(2, 1, 5) - whole:narrow(2, 1, 5)):abs():amax():item() == 0,
             layer.mixer .. ": not causal")
      assert((again:narrow(2, 6, 1) - whole:narrow(2, 6, 1)):abs():amax():item() > 0,
             layer.mixer .. ": the changed token changed nothing")

      -- From the initial weights: every parameter gets a gradient.
      local fresh = build(layer, 2)
      fresh:loss(b):backward()
      for name, p in pairs(fresh:named_parameters()) do
        assert(p:grad() and p:grad():abs():sum():item() > 0,
               layer.mixer .. ": no gradient for " .. name)
      end

      local trained = ms.model.decoder{ layers = { layer, layer }, d_model = 8, heads = 2,
                                        task = task, seed = 5 }
      -- A few steps of training run.
      local run = ms.train{ model = trained, task = task, steps = 4, batch = 4, length = 8,
                            optimizer = ms.optim.adam{ lr = 1e-2 }, eval = { lengths = { 8 } } }
      assert(run.loss == run.loss and run.loss < 10, layer.mixer .. ": training gave " .. run.loss)
    end
    -- The stabiliser at work: input gates of e^1000 (inf in float64 unstabilised) stay finite.
    local function check_stabilised(layer, bias_name)
      local m = build(layer, 1)
      for name, p in pairs(m:named_parameters()) do
        if name:find("%.mixer%." .. bias_name .. "$") then p:copy(p + 1000) end
      end
      local big = m:forward(task:sample{ batch = 2, length = 10 }.inputs):abs():amax():item()
      assert(big < 1e6, layer.mixer .. ": input gates of e^1000 gave " .. big)
    end
)lua";

}  // namespace

TEST_CASE("the stdlib's mlstm_lua is xLSTM's mLSTM written out, to 1e-9, and keeps the contract") {
  REQUIRE_LUA_OK(kPrelude + R"lua(
    require "memscript.mixers.mlstm"
    -- xLSTM's mLSTM as the paper writes it (eqs. 19-27, not stabilised): per head
    -- C_t = f_t C_{t−1} + i_t v_t k_tᵀ, n_t = f_t n_{t−1} + i_t k_t,
    -- h̃_t = C_t q_t / max(|n_tᵀ q_t|, 1), i_t = exp(ĩ_t), f_t = σ(f̃_t) or exp(f̃_t).
    local function mlstm(H, d, forget)
      return function(w, x)
        local C, n, y = {}, {}, {}
        for h = 1, H do
          C[h], n[h] = {}, zeros(d)
          for a = 1, d do C[h][a] = zeros(d) end
        end
        for t, xt in ipairs(x) do
          local q = matvec(w.query_weight, xt, w.query_bias)
          local k = matvec(w.key_weight, xt, w.key_bias)
          local v = matvec(w.value_weight, xt, w.value_bias)
          local i_pre = matvec(w.input_gate_weight, xt, w.input_gate_bias)
          local f_pre = matvec(w.forget_gate_weight, xt, w.forget_bias)
          local o = matvec(w.output_gate_weight, xt, w.output_gate_bias)
          local h_tilde, gated = {}, {}
          for h = 1, H do
            local i, f = exp(i_pre[h]), forget == "exp" and exp(f_pre[h]) or sigmoid(f_pre[h])
            local at = (h - 1) * d
            local nq = 0
            for a = 1, d do
              n[h][a] = f * n[h][a] + i * k[at + a] / sqrt(d)
              nq = nq + n[h][a] * q[at + a]
              for c = 1, d do C[h][a][c] = f * C[h][a][c] + i * v[at + a] * k[at + c] / sqrt(d) end
            end
            for a = 1, d do
              local s = 0
              for c = 1, d do s = s + C[h][a][c] * q[at + c] end
              h_tilde[at + a] = s / math.max(abs(nq), 1)
            end
            local normed = layer_norm(h_tilde, at + 1, d)
            for a = 1, d do
              gated[at + a] = sigmoid(o[at + a]) * normed[a] * w.norm_weight[at + a]
            end
          end
          y[t] = matvec(w.output_weight, gated, w.output_bias)
        end
        return y
      end
    end
    for _, forget in ipairs{ "sigmoid", "exp" } do
      local layer = { mixer = "mlstm_lua", forget_gate = forget, qkv_bias = forget == "exp" }
      local gap = against(build(layer, 1, 0.3), "mlstm_lua", mlstm(2, 4, forget))
      assert(gap < 1e-9, "mlstm_lua (" .. forget .. " forget gate): " .. gap)
      check_contract(layer)
      check_stabilised(layer, "input_gate_bias")
    end
  )lua");
}

TEST_CASE("the stdlib's mamba2_lua is Mamba-2's SSD written out, to 1e-9, and keeps the contract") {
  REQUIRE_LUA_OK(kPrelude + R"lua(
    require "memscript.mixers.mamba2"
    -- Mamba-2's SSD layer as the paper writes it: per head S_t = a_t S_{t−1} + Δ_t x_t B_tᵀ,
    -- y_t = S_t C_t + D x_t, after a causal depthwise conv of K taps and a SiLU.
    local function mamba2(E, H, N, K, negative)
      local P = E // H
      return function(w, x)
        local S, raw, y = {}, {}, {}
        for h = 1, H do
          S[h] = {}
          for p = 1, P do S[h][p] = zeros(N) end
        end
        for t, xt in ipairs(x) do
          local projected = matvec(w.in_proj_weight, xt)
          local z = slice(projected, 1, E)
          raw[t] = slice(projected, E + 1, E + 2 * N)
          local u = {}
          for c = 1, E + 2 * N do
            local s = w.conv_bias[c]
            for j = 1, K do
              local at = t - K + j
              if at >= 1 then s = s + w.conv_weight[c][1][j] * raw[at][c] end
            end
            u[c] = silu(s)
          end
          local gated, squares = {}, 0
          for h = 1, H do
            local delta = softplus(projected[2 * E + 2 * N + h] + w.dt_bias[h])
            local a = exp(-delta * exp(w.A_log[h]))
            if negative then a = 2 * a - 1 end
            for p = 1, P do
              local xp, out = u[(h - 1) * P + p], 0
              for n = 1, N do
                S[h][p][n] = a * S[h][p][n] + delta * xp * u[E + n]
                out = out + S[h][p][n] * u[E + N + n]
              end
              local c = (h - 1) * P + p
              gated[c] = (out + w.D[h] * xp) * silu(z[c])
              squares = squares + gated[c] ^ 2 / E
            end
          end
          for c = 1, E do gated[c] = gated[c] / sqrt(squares + 1e-5) * w.norm_weight[c] end
          y[t] = matvec(w.out_proj_weight, gated)
        end
        return y
      end
    end
    for _, negative in ipairs{ false, true } do
      local layer = { mixer = "mamba2_lua", d_state = 3, d_conv = 3,
                      negative_eigenvalues = negative }
      local gap = against(build(layer, 1, 0.3), "mamba2_lua", mamba2(16, 2, 3, 3, negative))
      assert(gap < 1e-9, "mamba2_lua" .. (negative and " (negative eigenvalues): " or ": ") .. gap)
      check_contract(layer)
    end
  )lua");
}

TEST_CASE("the stdlib's deltaproduct_lua is DeltaProduct written out, to 1e-9; the contract") {
  REQUIRE_LUA_OK(kPrelude + R"lua(
    require "memscript.mixers.deltaproduct"
    -- DeltaProduct as the paper writes it: per token, n_h delta-rule steps, each with its own
    -- L2-normalised key, value and β, S ← S (I − β k kᵀ) + β v kᵀ; then o_t = S q_t.
    local function deltaproduct(H, d, n, negative)
      local function unit(x, from)
        local norm = 0
        for a = 1, d do norm = norm + x[from + a - 1] ^ 2 end
        local r = {}
        for a = 1, d do r[a] = x[from + a - 1] / sqrt(norm) end
        return r
      end
      return function(w, x)
        local S, y = {}, {}
        for h = 1, H do
          S[h] = {}
          for a = 1, d do S[h][a] = zeros(d) end
        end
        for t, xt in ipairs(x) do
          local q = matvec(w.query_weight, xt, w.query_bias)
          local k = matvec(w.key_weight, xt, w.key_bias)
          local v = matvec(w.value_weight, xt, w.value_bias)
          local beta = matvec(w.beta_weight, xt, w.beta_bias)
          local o = {}
          for h = 1, H do
            for j = 1, n do
              local kj = unit(k, ((j - 1) * H + h - 1) * d + 1)
              local b = (negative and 2 or 1) * sigmoid(beta[(j - 1) * H + h])
              for a = 1, d do
                local Sk = 0
                for c = 1, d do Sk = Sk + S[h][a][c] * kj[c] end
                local vj = v[((j - 1) * H + h - 1) * d + a]
                for c = 1, d do S[h][a][c] = S[h][a][c] + b * (vj - Sk) * kj[c] end
              end
            end
            local qh = unit(q, (h - 1) * d + 1)
            for a = 1, d do
              local s = 0
              for c = 1, d do s = s + S[h][a][c] * qh[c] end
              o[(h - 1) * d + a] = s
            end
          end
          y[t] = matvec(w.output_weight, o, w.output_bias)
        end
        return y
      end
    end
    for _, case in ipairs{ { 2, false, false }, { 3, true, true }, { 1, true, false } } do
      local n, negative, bias = case[1], case[2], case[3]
      local layer = { mixer = "deltaproduct_lua", householder = n, negative_eigenvalues = negative,
                      qkv_bias = bias }
      local gap = against(build(layer, 1, 0.3), "deltaproduct_lua", deltaproduct(2, 4, n, negative))
      assert(gap < 1e-9, "deltaproduct_lua (householder = " .. n .. "): " .. gap)
      check_contract(layer)
    end

    -- One Householder factor per token is DeltaNet: deltanet_lua from the same weights.
    require "memscript.mixers.deltanet"
    local one = build({ mixer = "deltaproduct_lua", householder = 1, qkv_bias = true }, 2, 0.3)
    local deltanet = build({ mixer = "deltanet_lua", qkv_bias = true }, 2)
    local source = one:named_parameters()
    for name, p in pairs(deltanet:named_parameters()) do p:copy(assert(source[name], name)) end
    local b = task:sample{ batch = 2, length = 9 }
    local gap = (one:forward(b.inputs) - deltanet:forward(b.inputs)):abs():amax():item()
    assert(gap < 1e-9, "deltaproduct_lua (householder = 1) against deltanet_lua: " .. gap)
  )lua");
}

TEST_CASE("the stdlib's slstm_lua is xLSTM's sLSTM written out, to 1e-9, and keeps the contract") {
  REQUIRE_LUA_OK(kPrelude + R"lua(
    require "memscript.mixers.slstm"
    -- xLSTM's sLSTM as the paper writes it (not stabilised): c_t = f_t c_{t−1} + i_t z_t,
    -- n_t = f_t n_{t−1} + i_t, h_t = o_t c_t / n_t, the gates reading x_t and h_{t−1}.
    local function slstm(H, d, forget)
      local width = H * d
      return function(w, x)
        local h, c, n, y = zeros(width), zeros(width), zeros(width), {}
        for t, xt in ipairs(x) do
          local pre = matvec(w.gates_weight, xt, w.gates_bias)
          local function gate(g, head, e)
            local s = pre[(g - 1) * width + (head - 1) * d + e]
            for j = 1, d do s = s + w.recurrent[g][head][e][j] * h[(head - 1) * d + j] end
            return s
          end
          local new_h = {}
          for head = 1, H do
            for e = 1, d do
              local ch = (head - 1) * d + e
              local f_pre = gate(2, head, e) + w.forget_bias[ch]
              local i, f = exp(gate(1, head, e)), forget == "exp" and exp(f_pre) or sigmoid(f_pre)
              c[ch] = f * c[ch] + i * math.tanh(gate(3, head, e))
              n[ch] = f * n[ch] + i
              new_h[ch] = sigmoid(gate(4, head, e)) * c[ch] / n[ch]
            end
          end
          h = new_h
          local normed = {}
          for head = 1, H do
            local part = layer_norm(h, (head - 1) * d + 1, d)
            for e = 1, d do
              normed[(head - 1) * d + e] = part[e] * w.norm_weight[(head - 1) * d + e]
            end
          end
          y[t] = matvec(w.output_weight, normed, w.output_bias)
        end
        return y
      end
    end
    for _, forget in ipairs{ "sigmoid", "exp" } do
      local layer = { mixer = "slstm_lua", forget_gate = forget }
      local gap = against(build(layer, 1, 0.3), "slstm_lua", slstm(2, 4, forget))
      assert(gap < 1e-9, "slstm_lua (" .. forget .. " forget gate): " .. gap)
      check_contract(layer)
      check_stabilised(layer, "gates_bias")
    end
  )lua");
}

TEST_CASE("the stdlib's hgrn2_lua is HGRN2 written out, to 1e-9, and keeps the contract") {
  REQUIRE_LUA_OK(kPrelude + R"lua(
    require "memscript.mixers.hgrn2"
    -- Per head S_t = S_{t−1} diag(f_t) + i_t (1 − f_t)ᵀ with f_t = σ(W_f x_t), o_t = S_t q_t
    -- with q_t = swish(W_q x_t) / √expand; an RMS norm over the width, the output projection.
    local function hgrn2(H, P, E)  -- heads, values per head, keys per head (expand)
      return function(w, x)
        local S, y = {}, {}
        for h = 1, H do
          S[h] = {}
          for p = 1, P do S[h][p] = zeros(E) end
        end
        for t, xt in ipairs(x) do
          local f, q = matvec(w.forget_weight, xt), matvec(w.query_weight, xt)
          local i, o, squares = matvec(w.input_weight, xt), {}, 0
          for h = 1, H do
            for p = 1, P do
              local out = 0
              for e = 1, E do
                local c = (h - 1) * E + e
                local gate = sigmoid(f[c])
                S[h][p][e] = gate * S[h][p][e] + i[(h - 1) * P + p] * (1 - gate)
                out = out + S[h][p][e] * silu(q[c]) / sqrt(E)
              end
              o[(h - 1) * P + p] = out
              squares = squares + out ^ 2 / (H * P)
            end
          end
          for c = 1, H * P do o[c] = o[c] / sqrt(squares + 1e-5) * w.norm_weight[c] end
          y[t] = matvec(w.output_weight, o, w.output_bias)
        end
        return y
      end
    end
    for _, expand in ipairs{ 0, 3 } do
      local layer = { mixer = "hgrn2_lua", expand = expand }
      local gap = against(build(layer, 1, 0.3), "hgrn2_lua", hgrn2(2, 4, expand > 0 and expand or 4))
      assert(gap < 1e-9, "hgrn2_lua (expand " .. expand .. "): " .. gap)
      check_contract(layer)
    end
  )lua");
}
