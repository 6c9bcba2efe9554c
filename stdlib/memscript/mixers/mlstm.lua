-- xLSTM's mLSTM written in the script: the matrix memory runs on the fused delta-rule kernel's
-- additive update (ms.ops.delta_rule{ update = "additive" }), the normaliser n riding along as
-- one more value column of ones, the stabiliser m a running maximum (cummax) over time.
--
-- Beck et al., "xLSTM: Extended Long Short-Term Memory", 2024 (the mLSTM's equations and, from
-- its appendix, their stabilised form). Per head, with q_t = W_q x_t, k_t = W_k x_t / √head_dim
-- and v_t = W_v x_t:
--   ĩ_t = w_iᵀ x_t + b_i,   f̃_t = w_fᵀ x_t + b_f,   i_t = exp(ĩ_t),   f_t = σ(f̃_t) (or exp(f̃_t))
--   C_t = f_t C_{t−1} + i_t v_t k_tᵀ,   n_t = f_t n_{t−1} + i_t k_t
--   h̃_t = C_t q_t / max(|n_tᵀ q_t|, 1),   y_t = W_out (σ(W_o x_t + b_o) ⊙ LN_head(h̃_t))
-- stored stabilised: m_t = max(log f_t + m_{t−1}, ĩ_t), C̃ = C e^(−m), ñ = n e^(−m), so the
-- kernel's decay and write are α_t = exp(log f_t + m_{t−1} − m_t), β_t = exp(ĩ_t − m_t) ≤ 1 and
-- h̃_t = C̃_t q_t / max(|ñ_tᵀ q_t|, e^(−m_t)). Any m gives the same h̃ (m_0 = 0 at the start, as
-- the reference code's step-by-step form; its parallel form amounts to m_1 = ĩ_1), so m is
-- computed without gradient and the gradients are exactly those of the unstabilised equations.
-- Taken from the paper: the cell's gates (one ĩ and f̃ per head, read from x_t; the forget bias
-- starting spread over 3..6 across heads, as the reference code's), the scaled key, the
-- head-wise layer norm of the block (its GroupNorm: a learned scale per channel, no bias) and
-- the cell's σ output gate, applied after the norm. Left out: the block's up-projection, the
-- causal conv before q and k, the learnable skip, and its SiLU branch in place of σ(W_o x_t)
-- (the decoder's block and MLP stand around the mixer instead).
-- Options: head_dim (0: d_model / heads), qkv_bias (false), forget_gate ("sigmoid" or "exp").
-- State: { C̃ and ñ [batch, heads, head_dim + 1, head_dim] (ñ the last row), m [batch, heads] }.
--
--   require "memscript.mixers.mlstm"
--   local m = ms.model.decoder{ mixer = "mlstm_lua", heads = 4, task = task }

ms.mixer.define{
  name = "mlstm_lua",
  options = { head_dim = 0, qkv_bias = false, forget_gate = "sigmoid" },
  init = function(ctx, opts)
    assert(opts.forget_gate == "sigmoid" or opts.forget_gate == "exp",
           "mlstm_lua: forget_gate must be \"sigmoid\" or \"exp\", got " .. opts.forget_gate)
    local H = ctx.heads
    local head_dim = opts.head_dim > 0 and opts.head_dim or ctx.d_model // H
    local width = H * head_dim
    local self = { heads = H, head_dim = head_dim, exp_forget = opts.forget_gate == "exp" }
    local qkv = { bias = opts.qkv_bias }
    self.query = ctx:linear("query", ctx.d_model, width, qkv)
    self.key = ctx:linear("key", ctx.d_model, width, qkv)
    self.value = ctx:linear("value", ctx.d_model, width, qkv)
    self.input_gate = ctx:linear("input_gate", ctx.d_model, H)
    self.forget_gate = ctx:linear("forget_gate", ctx.d_model, H, { bias = false })
    local spread = H > 1 and ms.arange(H):to("float32") * (3 / (H - 1)) or ms.zeros{ 1 }
    self.forget_bias = ctx:param("forget_bias", spread + 3)
    self.output_gate = ctx:linear("output_gate", ctx.d_model, width, { activation = "sigmoid" })
    self.norm_weight = ctx:param("norm_weight", { width }, "ones")
    self.output = ctx:linear("output", width, ctx.d_model, { init = "output" })
    return self
  end,
  forward = function(self, x, state)
    local batch, length = x:shape()[1], x:shape()[2]
    local H, d = self.heads, self.head_dim
    local function heads(t) return t:reshape{ batch, length, H, d }:transpose(2, 3) end
    local q, v = heads(self.query(x)), heads(self.value(x))
    local k = heads(self.key(x)) * (1 / math.sqrt(d))
    local i_pre = self.input_gate(x):transpose(2, 3)                  -- ĩ [batch, heads, length]
    local f_pre = (self.forget_gate(x) + self.forget_bias):transpose(2, 3)
    local log_f = self.exp_forget and f_pre or f_pre:logsigmoid()
    -- The stabiliser, without gradient (the outputs do not depend on it), without a loop:
    -- m_t = max(log f_t + m_{t−1}, ĩ_t) is F_t + max(m_0, max_{s≤t}(ĩ_s − F_s)), F = cumsum(log f).
    local m0 = state and state[2] or x:new_zeros{ batch, H }
    local F = log_f:detach():cumsum(3)
    local m_after = F + ms.maximum((i_pre:detach() - F):cummax(3), m0:unsqueeze(3))
    local m_before = ms.cat({ m0:unsqueeze(3), m_after:narrow(3, 1, length - 1) }, 3)
    local m = m_after:select(3, length)
    local alpha = (log_f + m_before - m_after):exp()
    local beta = (i_pre - m_after):exp()
    -- v' = [v, 1]: the state's last row is ñ, the output's last column ñᵀq.
    local ones = x:new_zeros{ batch, H, length, 1 } + 1
    local o, S = ms.ops.delta_rule{ q = q, k = k, v = ms.cat({ v, ones }, 4), beta = beta,
                                    alpha = alpha, state = state and state[1], update = "additive" }
    local denominator = ms.maximum(o:narrow(4, d + 1, 1):abs(), (-m_after):exp():unsqueeze(4))
    local h = (o:narrow(4, 1, d) / denominator):transpose(2, 3)          -- [batch, length, H, d]
    local centred = h - h:mean(4, true)
    local normed = centred / ((centred * centred):mean(4, true) + 1e-5):sqrt()
    normed = normed:reshape{ batch, length, H * d } * self.norm_weight
    return self.output(self.output_gate(x) * normed), { S, m }
  end,
}
