-- xLSTM's sLSTM written in the script: a loop over time on tensor ops (its gates read h_{t−1},
-- so no fused scan applies; there is no sLSTM kernel).
--
-- Beck et al., "xLSTM: Extended Long Short-Term Memory", 2024 (the sLSTM's equations and their
-- stabilised form). Per channel, the heads' recurrent weights block-diagonal (R_g [head_dim,
-- head_dim] per head and gate g ∈ {i, f, z, o}):
--   g̃_t = W_g x_t + R_g h_{t−1} + b_g,   i_t = exp(ĩ_t),   f_t = σ(f̃_t) (or exp(f̃_t)),
--   z_t = tanh(z̃_t),   o_t = σ(õ_t)
--   c_t = f_t c_{t−1} + i_t z_t,   n_t = f_t n_{t−1} + i_t,   h_t = o_t ⊙ c_t / n_t
--   y_t = W_out (LN_head(h_t))   (the block's GroupNorm: a learned scale per channel, no bias)
-- stored stabilised: m_t = max(log f_t + m_{t−1}, ĩ_t), i'_t = exp(ĩ_t − m_t),
-- f'_t = exp(log f_t + m_{t−1} − m_t), c and n kept as c e^(−m), n e^(−m). h does not depend on
-- m (m_0 = 0 at the start; the reference code takes m_1 = ĩ_1, the same h), so m is computed
-- without gradient and the gradients are exactly those of the unstabilised equations.
-- The forget gate's bias starts spread over 3..6 across the channels (as mlstm_lua's; the
-- reference code's is a power law per head), R at normal(0, 0.02).
-- Left out from the paper's block: the causal conv before i and f, the head-wise (block-diagonal)
-- input projections (W here is a full d_model → 4 · width map) and the gated MLP after it (the
-- decoder's MLP stands there).
-- Options: head_dim (0: d_model / heads), forget_gate ("sigmoid" or "exp").
-- State: { h, c, n, m }, each [batch, heads · head_dim].
--
--   require "memscript.mixers.slstm"
--   local m = ms.model.decoder{ mixer = "slstm_lua", heads = 4, task = task }

local maximum = ms.maximum

ms.mixer.define{
  name = "slstm_lua",
  options = { head_dim = 0, forget_gate = "sigmoid" },
  init = function(ctx, opts)
    assert(opts.forget_gate == "sigmoid" or opts.forget_gate == "exp",
           "slstm_lua: forget_gate must be \"sigmoid\" or \"exp\", got " .. opts.forget_gate)
    local H = ctx.heads
    local head_dim = opts.head_dim > 0 and opts.head_dim or ctx.d_model // H
    local width = H * head_dim
    local self = { heads = H, head_dim = head_dim, width = width,
                   exp_forget = opts.forget_gate == "exp" }
    self.gates = ctx:linear("gates", ctx.d_model, 4 * width)                -- ĩ, f̃, z̃, õ
    self.recurrent = ctx:param("recurrent", { 4, H, head_dim, head_dim })   -- R_g[head][out][in]
    local spread = width > 1 and ms.arange(width):to("float32") * (3 / (width - 1)) or ms.zeros{ 1 }
    self.forget_bias = ctx:param("forget_bias", spread + 3)
    self.norm_weight = ctx:param("norm_weight", { width }, "ones")
    self.output = ctx:linear("output", width, ctx.d_model, { init = "output" })
    return self
  end,
  forward = function(self, x, state)
    local batch, length = x:shape()[1], x:shape()[2]
    local H, d, width = self.heads, self.head_dim, self.width
    local pre = self.gates(x):reshape{ batch, length, 4, width }
    local h, c, n, m
    if state then
      h, c, n, m = state[1], state[2], state[3], state[4]
    else
      h = x:new_zeros{ batch, width }
      c, n, m = h, h, h
    end
    local hs = {}
    for t = 1, length do
      local recurrent = ms.einsum("bhd,ghed->bghe", h:reshape{ batch, H, d }, self.recurrent)
      local g = pre:select(2, t) + recurrent:reshape{ batch, 4, width }
      local i_pre = g:select(2, 1)
      local f_pre = g:select(2, 2) + self.forget_bias
      local log_f = self.exp_forget and f_pre or f_pre:logsigmoid()
      local m_new = maximum(log_f:detach() + m, i_pre:detach())        -- no gradient: h ignores m
      local i, f = (i_pre - m_new):exp(), (log_f + m - m_new):exp()
      c = f * c + i * g:select(2, 3):tanh()
      n = f * n + i
      h = g:select(2, 4):sigmoid() * c / n
      m = m_new
      hs[t] = h:unsqueeze(2)
    end
    local out = ms.cat(hs, 2):reshape{ batch, length, H, d }
    local centred = out - out:mean(4, true)
    local normed = centred / ((centred * centred):mean(4, true) + 1e-5):sqrt()
    return self.output(normed:reshape{ batch, length, width } * self.norm_weight), { h, c, n, m }
  end,
}
