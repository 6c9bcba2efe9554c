// The script's fused primitives (ms.ops, bindings/lua_ops.cpp) on CUDA tensors against the same
// calls on the CPU, outputs and gradients in float32; and a mixer written in Lua (the stdlib's
// deltanet_lua and gla_lua) through a forward and backward on CUDA against the CPU. Label gpu:
// `make test-gpu` runs it where a GPU is usable (gpu_main.cpp skips loudly elsewhere).

#include <catch2/catch.hpp>

#include "../bindings/harness.h"

namespace {

// `call(device)` builds the op's inputs (seeded on the CPU, then moved) and returns its results
// and the gradients of a fixed weighting of them; both devices must agree to 1e-4 relative.
const std::string kCompare = R"lua(
  local function inputs(specs, device)
    local t = {}
    for name, spec in pairs(specs) do
      local x = ms.randn(spec.shape, { seed = spec.seed })
      if spec.map then x = spec.map(x) end
      x = x:to(device)
      if spec.grad then x = x:detach():requires_grad() end
      t[name] = x
    end
    return t
  end
  local function compare(name, specs, call)
    local results = {}
    for _, device in ipairs{ "cpu", "cuda" } do
      local x = inputs(specs, device)
      local outs = { call(x) }
      local loss = outs[1]:sum() * 0
      for i, out in ipairs(outs) do
        local w = ms.randn(out:shape(), { seed = 100 + i }):to(device)
        loss = loss + (out * w):sum()
      end
      loss:backward()
      local got = {}
      for i, out in ipairs(outs) do got[#got + 1] = out:detach():to("cpu") end
      local names = {}
      for key in pairs(specs) do names[#names + 1] = key end
      table.sort(names)
      for _, key in ipairs(names) do
        if specs[key].grad then got[#got + 1] = x[key]:grad():to("cpu") end
      end
      results[device] = got
    end
    for i, cpu in ipairs(results.cpu) do
      local gap = (cpu - results.cuda[i]):abs():amax():item()
      local scale = cpu:abs():amax():item()
      assert(gap <= 1e-4 * scale + 1e-5, name .. ": result " .. i .. " differs by " .. gap)
    end
  end
)lua";

}  // namespace

TEST_CASE("ms.ops on CUDA tensors match the CPU, outputs and gradients", "[gpu]") {
  REQUIRE_LUA_OK(kCompare + R"lua(
    local B, H, L, dk, dv = 2, 3, 37, 4, 5
    local function unit(x) return ms.ops.l2_normalize(x) end
    for _, update in ipairs{ "delta", "additive" } do
      for _, alpha_shape in ipairs{ { B, H, L }, { B, H, L, dk } } do
        compare("delta_rule " .. update .. " alpha of " .. #alpha_shape .. " dims", {
          q = { shape = { B, H, L, dk }, seed = 1, map = unit, grad = true },
          k = { shape = { B, H, L, dk }, seed = 2, map = unit, grad = true },
          v = { shape = { B, H, L, dv }, seed = 3, grad = true },
          beta = { shape = { B, H, L }, seed = 4, map = function(x) return x:sigmoid() end, grad = true },
          alpha = { shape = alpha_shape, seed = 5, map = function(x) return x:sigmoid() end, grad = true },
          state = { shape = { B, H, dv, dk }, seed = 6, grad = true },
        }, function(x)
          return ms.ops.delta_rule{ q = x.q, k = x.k, v = x.v, beta = x.beta, alpha = x.alpha,
                                    state = x.state, update = update }
        end)
      end
    end
    local positive = function(x) return x:elu() + 1 end
    compare("linear_attention", {
      q = { shape = { B, H, L, dk }, seed = 1, map = positive, grad = true },
      k = { shape = { B, H, L, dk }, seed = 2, map = positive, grad = true },
      v = { shape = { B, H, L, dv }, seed = 3, grad = true },
    }, function(x) return ms.ops.linear_attention{ q = x.q, k = x.k, v = x.v } end)
    compare("diagonal_scan", {
      a = { shape = { B, L, 6 }, seed = 1, map = function(x) return x:tanh() end, grad = true },
      b = { shape = { B, L, 6 }, seed = 2, grad = true },
    }, function(x) return ms.ops.diagonal_scan{ a = x.a, b = x.b } end)
    compare("complex_scan", {
      lambda_re = { shape = { 6 }, seed = 1, map = function(x) return x:tanh() * 0.7 end, grad = true },
      lambda_im = { shape = { 6 }, seed = 2, map = function(x) return x:tanh() * 0.7 end, grad = true },
      b_re = { shape = { B, L, 6 }, seed = 3, grad = true },
      b_im = { shape = { B, L, 6 }, seed = 4, grad = true },
    }, function(x)
      return ms.ops.complex_scan{ lambda_re = x.lambda_re, lambda_im = x.lambda_im,
                                  b_re = x.b_re, b_im = x.b_im }
    end)
    for _, negative in ipairs{ false, true } do
      compare("selective_scan", {
        u = { shape = { B, L, 6 }, seed = 1, grad = true },
        delta = { shape = { B, L, 6 }, seed = 2, map = function(x) return x:softplus() end, grad = true },
        A = { shape = { 6, 4 }, seed = 3, map = function(x) return -x:exp() end, grad = true },
        B = { shape = { B, L, 4 }, seed = 4, grad = true },
        C = { shape = { B, L, 4 }, seed = 5, grad = true },
      }, function(x)
        return ms.ops.selective_scan{ u = x.u, delta = x.delta, A = x.A, B = x.B, C = x.C,
                                      negative_eigenvalues = negative }
      end)
    end
    compare("causal_attention", {
      q = { shape = { B, H, L, 8 }, seed = 1, grad = true },
      k = { shape = { B, H, L, 8 }, seed = 2, grad = true },
      v = { shape = { B, H, L, 8 }, seed = 3, grad = true },
    }, function(x) return ms.ops.causal_attention{ q = x.q, k = x.k, v = x.v } end)
    compare("causal_attention, relative positions", {
      q = { shape = { B, H, L, 8 }, seed = 1, grad = true },
      k = { shape = { B, H, L, 8 }, seed = 2, grad = true },
      v = { shape = { B, H, L, 8 }, seed = 3, grad = true },
      q_position = { shape = { B, H, L, 8 }, seed = 4, grad = true },
      relative = { shape = { H, L, 8 }, seed = 5, grad = true },
    }, function(x)
      return ms.ops.causal_attention{ q = x.q, k = x.k, v = x.v, q_position = x.q_position,
                                      relative = x.relative }
    end)
    compare("causal_conv", {
      x = { shape = { B, L, 6 }, seed = 1, grad = true },
      weight = { shape = { 6, 1, 4 }, seed = 2, grad = true },
      bias = { shape = { 6 }, seed = 3, grad = true },
    }, function(x) return ms.ops.causal_conv{ x = x.x, weight = x.weight, bias = x.bias } end)
  )lua");
}

TEST_CASE("a mixer written in Lua runs on CUDA as on the CPU, outputs and gradients", "[gpu]") {
  REQUIRE_LUA_OK(R"lua(
    require "memscript.mixers.deltanet"
    require "memscript.mixers.gla"
    local task = ms.task.parity{}
    local b = task:sample{ batch = 3, length = 19 }
    for _, mixer in ipairs{ "deltanet_lua", "gla_lua" } do
      local results = {}
      for _, device in ipairs{ "cpu", "cuda" } do
        local m = ms.model.decoder{ mixer = mixer, d_model = 16, heads = 2, task = task, seed = 3 }
        m:to(device, "float32")
        local logits = m:forward(b.inputs)     -- forward and loss move the batch to the model
        m:loss(b):backward()
        local grads = {}
        for name, p in pairs(m:named_parameters()) do grads[name] = p:grad():to("cpu") end
        results[device] = { logits = logits:detach():to("cpu"), grads = grads }
      end
      local gap = (results.cpu.logits - results.cuda.logits):abs():amax():item()
      assert(gap < 1e-4, mixer .. ": logits differ by " .. gap)
      for name, g in pairs(results.cpu.grads) do
        local d = (g - results.cuda.grads[name]):abs():amax():item()
        assert(d <= 1e-4 * g:abs():amax():item() + 1e-6, mixer .. ", " .. name .. ": " .. d)
      end
    end
  )lua");
}
