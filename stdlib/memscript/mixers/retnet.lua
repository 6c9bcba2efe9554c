-- RetNet's retention written in the script: the built-in `retnet` mixer
-- (runtime/model/mixers/retnet.cpp) again, on tensor ops and the fused delta-rule kernel's
-- additive update (ms.ops.delta_rule{ update = "additive" }); tests/bindings/test_lua_mixer.cpp
-- holds the two to 1e-9 in float64 from the same weights.
--
-- Sun et al., "Retentive Network: A Successor to Transformer for Large Language Models", 2023.
-- Per head h, with the fixed decay γ_h = 1 − 2^(−5−h):
--   S_t = γ_h S_{t−1} + v_t k_tᵀ  (k_t scaled by head_dim^(−1/2)),   o_t = S_t q_t
--   y_t = W_out (RMSNorm(o_t per head) ⊙ swish(W_g x_t))
-- As the built-in: no xPos rotation, the decay alone orders the tokens.
-- Options: head_dim (0: d_model / heads), qkv_bias (false). State: { S }.
--
--   require "memscript.mixers.retnet"
--   local m = ms.model.decoder{ mixer = "retnet_lua", task = task }
ms.mixer.define{
  name = "retnet_lua",
  options = { head_dim = 0, qkv_bias = false },
  init = function(ctx, opts)
    local head_dim = opts.head_dim > 0 and opts.head_dim or ctx.d_model // ctx.heads
    local width = ctx.heads * head_dim
    local self = { heads = ctx.heads, head_dim = head_dim, gamma = {} }
    for h = 1, ctx.heads do self.gamma[h] = 1 - 2 ^ (-4 - h) end
    local qkv = { bias = opts.qkv_bias }
    self.query = ctx:linear("query", ctx.d_model, width, qkv)
    self.key = ctx:linear("key", ctx.d_model, width, qkv)
    self.value = ctx:linear("value", ctx.d_model, width, qkv)
    self.gate = ctx:linear("gate", ctx.d_model, width, { bias = false, activation = "silu" })
    self.output = ctx:linear("output", width, ctx.d_model, { init = "output" })
    return self
  end,
  forward = function(self, x, state)
    local batch, length = x:shape()[1], x:shape()[2]
    local function heads(t)
      return t:reshape{ batch, length, self.heads, self.head_dim }:transpose(2, 3)
    end
    local q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
    k = k * (1 / math.sqrt(self.head_dim))
    local gamma = ms.tensor(self.gamma):to(x:dtype()):to(x:device()):reshape{ 1, self.heads, 1 }
    local alpha = x:new_zeros{ batch, self.heads, length } + gamma
    local o, S = ms.ops.delta_rule{ q = q, k = k, v = v, beta = alpha * 0 + 1, alpha = alpha,
                                    state = state and state[1], update = "additive" }
    local normalised = o / ((o * o):mean(4, true) + 1e-6):sqrt()
    local merged = normalised:transpose(2, 3):reshape{ batch, length, self.heads * self.head_dim }
    return self.output(merged * self.gate(x)), { S }
  end,
}
