-- qLSTM written in the script: the built-in `qlstm` mixer (runtime/model/mixers/qlstm.cpp)
-- again, on memscript's tensor operations, as a worked example of ms.mixer.define and the
-- check that a Lua mixer computes what a C++ one does (tests/bindings/test_lua_mixer.cpp: the
-- two match to 1e-9 in float64, outputs and every gradient, from the same weights).
--
-- The quasi-LSTM of the study (an LSTM whose gates read only the input, so the cell is a
-- diagonal linear recurrence):
--   (f, i, z, o) = W x_t (+ b),   f_t = σ(f + b_f + 1)   (2σ(·) − 1 with negative_eigenvalues)
--   c_t = f_t ⊙ c_{t−1} + σ(i) ⊙ tanh(z),   h_t = σ(o) ⊙ tanh(c_t),   y_t = W_out h_t + b_out
-- Options: hidden (0: d_model), negative_eigenvalues (false), gate_bias (false). State: { c }.
--
--   require "memscript.mixers.qlstm"
--   local m = ms.model.decoder{ mixer = "qlstm_lua", hidden = 16, task = task }
ms.mixer.define{
  name = "qlstm_lua",
  options = { hidden = 0, negative_eigenvalues = false, gate_bias = false },
  init = function(ctx, opts)
    local H = opts.hidden > 0 and opts.hidden or ctx.d_model
    local self = { H = H, negative = opts.negative_eigenvalues }
    self.gates = ctx:linear("gates", ctx.d_model, 4 * H, { bias = opts.gate_bias })
    self.forget_bias = ctx:param("forget_bias", { H }, "zeros")
    self.output = ctx:linear("output", H, ctx.d_model, { init = "output" })
    return self
  end,
  forward = function(self, x, state)
    local H = self.H
    local pre = self.gates(x)
    local f = (pre:narrow(3, 1, H) + self.forget_bias + 1):sigmoid()
    if self.negative then f = 2 * f - 1 end
    local u = pre:narrow(3, H + 1, H):sigmoid() * pre:narrow(3, 2 * H + 1, H):tanh()
    local c = state and state[1] or x:new_zeros{ x:shape()[1], H }
    local cells = {}
    for t = 1, x:shape()[2] do
      c = f:select(2, t) * c + u:select(2, t)
      cells[t] = c:unsqueeze(2)
    end
    local h = pre:narrow(3, 3 * H + 1, H):sigmoid() * ms.cat(cells, 2):tanh()
    return self.output(h), { c }
  end,
}
