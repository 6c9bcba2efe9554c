-- HGRN2 written in the script: the built-in `hgrn2` mixer (runtime/model/mixers/hgrn2.cpp) again,
-- on the fused delta-rule kernel's additive update with a decay per key column (gated linear
-- attention's recurrence, ms.ops.delta_rule{ update = "additive", alpha = [.., dk] });
-- tests/bindings/test_lua_mixer.cpp holds the two to 1e-9 in float64 from the same weights.
--
-- Qin et al., "HGRN2: Gated Linear RNNs with State Expansion", COLM 2024. HGRN's forget gate f
-- decays the state and its complement 1 − f is the key, so what a channel forgets it writes; the
-- state is expanded from a vector to a matrix of `expand` key columns per head:
--   f_t = σ(W_f x_t),   q_t = swish(W_q x_t),   i_t = W_i x_t             (f, q [expand] per head)
--   S_t = S_{t−1} diag(f_t) + i_t (1 − f_t)ᵀ,   o_t = S_t q_t · expand^(−1/2)
--   y_t = W_out RMSNorm(o_t)                     (over the whole width, with a learned scale)
-- as flash-linear-attention's HGRN2 layer (its q scale is GLA's default, expand^(−1/2)). Left
-- out: the layer-dependent lower bound on f of the HGRN models (a learned floor that rises with
-- depth); here every layer has the first layer's bound, 0.
-- Options: head_dim (0: d_model / heads, the width of i per head), expand (0: head_dim).
-- State: { S [batch, heads, head_dim, expand] }.
--
--   require "memscript.mixers.hgrn2"
--   local m = ms.model.decoder{ mixer = "hgrn2_lua", task = task }
ms.mixer.define{
  name = "hgrn2_lua",
  options = { head_dim = 0, expand = 0 },
  init = function(ctx, opts)
    local head_dim = opts.head_dim > 0 and opts.head_dim or ctx.d_model // ctx.heads
    local expand = opts.expand > 0 and opts.expand or head_dim
    local keys, width = ctx.heads * expand, ctx.heads * head_dim
    local self = { heads = ctx.heads, head_dim = head_dim, expand = expand }
    local plain = { bias = false }
    self.query = ctx:linear("query", ctx.d_model, keys, { bias = false, activation = "silu" })
    self.forget = ctx:linear("forget", ctx.d_model, keys, plain)
    self.input = ctx:linear("input", ctx.d_model, width, plain)
    self.norm = ctx:rms_norm("norm", width)
    self.output = ctx:linear("output", width, ctx.d_model, { init = "output" })
    return self
  end,
  forward = function(self, x, state)
    local batch, length = x:shape()[1], x:shape()[2]
    local function heads(t)
      return t:reshape{ batch, length, self.heads, -1 }:transpose(2, 3)
    end
    local f = heads(self.forget(x):sigmoid())
    local q = heads(self.query(x)) * (1 / math.sqrt(self.expand))
    local beta = x:new_zeros{ batch, self.heads, length } + 1
    local o, S = ms.ops.delta_rule{ q = q, k = 1 - f, v = heads(self.input(x)), beta = beta,
                                    alpha = f, state = state and state[1], update = "additive" }
    local merged = o:transpose(2, 3):reshape{ batch, length, self.heads * self.head_dim }
    return self.output(self.norm(merged)), { S }
  end,
}
