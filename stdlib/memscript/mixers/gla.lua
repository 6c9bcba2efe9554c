-- Gated linear attention written in the script: the built-in `gla` mixer
-- (runtime/model/mixers/gla.cpp) again, on tensor ops and the fused delta-rule kernel's additive
-- update with a decay per key column (ms.ops.delta_rule{ update = "additive", alpha = [.., dk] });
-- tests/bindings/test_lua_mixer.cpp holds the two to 1e-9 in float64 from the same weights.
--
-- Yang et al., "Gated Linear Attention Transformers with Hardware-Efficient Training", ICML 2024.
-- Per head, with a gate per key column:
--   α_t = exp(logsigmoid(W_up W_down x_t + b) / τ)     [key_dim], τ = gate_normaliser
--   S_t = S_{t−1} diag(α_t) + v_t k_tᵀ,   o_t = S_t q_t   (q_t scaled by key_dim^(−1/2))
--   y_t = W_out (RMSNorm(o_t per head) ⊙ swish(W_r x_t))
-- Options: head_dim (0: d_model / heads), key_dim (0: head_dim / 2, at least 1), gate_rank (16),
-- gate_normaliser (16). State: { S [batch, heads, head_dim, key_dim] }.
--
--   require "memscript.mixers.gla"
--   local m = ms.model.decoder{ mixer = "gla_lua", task = task }
ms.mixer.define{
  name = "gla_lua",
  options = { head_dim = 0, key_dim = 0, gate_rank = 16, gate_normaliser = 16.0 },
  init = function(ctx, opts)
    local head_dim = opts.head_dim > 0 and opts.head_dim or ctx.d_model // ctx.heads
    local key_dim = opts.key_dim > 0 and opts.key_dim or math.max(1, head_dim // 2)
    assert(opts.gate_normaliser > 0, "gla_lua: gate_normaliser must be positive")
    local keys, width = ctx.heads * key_dim, ctx.heads * head_dim
    local self = { heads = ctx.heads, head_dim = head_dim, key_dim = key_dim,
                   tau = opts.gate_normaliser }
    local plain = { bias = false }
    self.query = ctx:linear("query", ctx.d_model, keys, plain)
    self.key = ctx:linear("key", ctx.d_model, keys, plain)
    self.value = ctx:linear("value", ctx.d_model, width, plain)
    self.gate_down = ctx:linear("gate_down", ctx.d_model, opts.gate_rank, plain)
    self.gate_up = ctx:linear("gate_up", opts.gate_rank, keys)
    self.output_gate = ctx:linear("output_gate", ctx.d_model, width,
                                  { bias = false, activation = "silu" })
    self.output = ctx:linear("output", width, ctx.d_model, { init = "output" })
    return self
  end,
  forward = function(self, x, state)
    local batch, length = x:shape()[1], x:shape()[2]
    local function heads(t)
      return t:reshape{ batch, length, self.heads, -1 }:transpose(2, 3)
    end
    local q = heads(self.query(x)) * (1 / math.sqrt(self.key_dim))
    local k, v = heads(self.key(x)), heads(self.value(x))
    local alpha = heads((self.gate_up(self.gate_down(x)):logsigmoid() / self.tau):exp())
    local beta = x:new_zeros{ batch, self.heads, length } + 1
    local o, S = ms.ops.delta_rule{ q = q, k = k, v = v, beta = beta, alpha = alpha,
                                    state = state and state[1], update = "additive" }
    local normalised = o / ((o * o):mean(4, true) + 1e-6):sqrt()
    local merged = normalised:transpose(2, 3):reshape{ batch, length, self.heads * self.head_dim }
    return self.output(merged * self.output_gate(x)), { S }
  end,
}
