-- DeltaNet written in the script: the built-in `deltanet` mixer (runtime/model/mixers/deltanet.cpp)
-- again, on memscript's tensor operations and its fused delta-rule kernel (ms.ops.delta_rule),
-- as a worked example of a Lua mixer on a fused primitive (tests/bindings/test_lua_mixer.cpp:
-- the two match to 1e-9 in float64, outputs and every gradient, from the same weights; make
-- bench times one against the other).
--
-- Schlag et al. 2021, Yang et al. 2024; negative eigenvalues: Grazzi et al. 2025. Per head:
--   q_t, k_t = L2-normalised W_q x_t, W_k x_t;   v_t = W_v x_t;   β_t = σ(w_βᵀ x_t + b_β)
--   (2σ(·) with negative_eigenvalues)
--   S_t = S_{t−1} (I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ,   o_t = S_t q_t,   y_t = W_out [o_t per head]
-- Options: head_dim (0: d_model / heads), negative_eigenvalues (false), qkv_bias (false).
-- State: { S [batch, heads, head_dim, head_dim] }.
--
--   require "memscript.mixers.deltanet"
--   local m = ms.model.decoder{ mixer = "deltanet_lua", negative_eigenvalues = true, task = task }
ms.mixer.define{
  name = "deltanet_lua",
  options = { head_dim = 0, negative_eigenvalues = false, qkv_bias = false },
  init = function(ctx, opts)
    local head_dim = opts.head_dim > 0 and opts.head_dim or ctx.d_model // ctx.heads
    local width = ctx.heads * head_dim
    local self = { heads = ctx.heads, head_dim = head_dim, negative = opts.negative_eigenvalues }
    local qkv = { bias = opts.qkv_bias }
    self.query = ctx:linear("query", ctx.d_model, width, qkv)
    self.key = ctx:linear("key", ctx.d_model, width, qkv)
    self.value = ctx:linear("value", ctx.d_model, width, qkv)
    self.beta = ctx:linear("beta", ctx.d_model, ctx.heads, { activation = "sigmoid" })
    self.output = ctx:linear("output", width, ctx.d_model, { init = "output" })
    return self
  end,
  forward = function(self, x, state)
    local batch, length = x:shape()[1], x:shape()[2]
    -- [batch, length, heads · head_dim] -> [batch, heads, length, head_dim]
    local function heads(t) return t:reshape{ batch, length, self.heads, self.head_dim } end
    local q = ms.ops.l2_normalize(heads(self.query(x))):transpose(2, 3)
    local k = ms.ops.l2_normalize(heads(self.key(x))):transpose(2, 3)
    local v = heads(self.value(x)):transpose(2, 3)
    local beta = self.beta(x):transpose(2, 3)
    if self.negative then beta = 2 * beta end
    local o, S = ms.ops.delta_rule{ q = q, k = k, v = v, beta = beta, state = state and state[1] }
    local merged = o:transpose(2, 3):reshape{ batch, length, self.heads * self.head_dim }
    return self.output(merged), { S }
  end,
}
