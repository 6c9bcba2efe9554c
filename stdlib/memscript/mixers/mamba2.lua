-- Mamba-2's SSD layer written in the script: the causal conv on ms.ops.causal_conv, the scan
-- on the fused delta-rule kernel's additive update (ms.ops.delta_rule{ update = "additive" }),
-- whose scalar decay per head and step is exactly SSD's.
--
-- Dao & Gu, "Transformers are SSMs: Generalized Models and Efficient Algorithms Through
-- Structured State Space Duality", 2024 (the Mamba-2 block, one group: B and C shared by the
-- heads). With d_inner = expand · d_model split into heads of size P:
--   (z, xBC, dt) = W_in u_t;   (x_t, B_t, C_t) = silu(causal depthwise conv(xBC))_t  (P·H, N, N)
--   Δ_t = softplus(dt_t + dt_bias_h),   a_t = exp(Δ_t A_h),   A_h = −exp(A_log_h)
--   S_t = a_t S_{t−1} + Δ_t x_t B_tᵀ  ([P, N] per head),   y_t = S_t C_t + D_h x_t
--   out_t = W_out RMSNorm(y_t ⊙ silu(z_t))   (the norm over all of d_inner, learned scale)
-- negative_eigenvalues = true carries 2 a_t − 1 ∈ (−1, 1) instead of a_t (Grazzi et al. 2025, as
-- the built-in mamba). No biases on the projections; the conv's bias starts at zero.
-- Initial values as the reference code's, drawn evenly instead of at random (ctx draws normals
-- only): A_h spread over [1, 16] across heads, the initial Δ log-spread over [0.001, 0.1]
-- (dt_bias its softplus⁻¹), D = 1, the conv's weights normal with std 1/√(3·d_conv) (PyTorch's
-- default uniform's spread).
-- Options: expand (2), d_state N (16), d_conv (4), head_dim P (0: d_inner / heads),
-- negative_eigenvalues (false).
-- State: { S [batch, heads, P, N], conv window [batch, d_inner + 2N, d_conv − 1] }.
--
--   require "memscript.mixers.mamba2"
--   local m = ms.model.decoder{ mixer = "mamba2_lua", d_state = 16, task = task }
ms.mixer.define{
  name = "mamba2_lua",
  options = { expand = 2, d_state = 16, d_conv = 4, head_dim = 0, negative_eigenvalues = false },
  init = function(ctx, opts)
    local inner = opts.expand * ctx.d_model
    local P = opts.head_dim > 0 and opts.head_dim or inner // ctx.heads
    assert(inner % P == 0, "mamba2_lua: head_dim " .. P .. " does not divide d_inner " .. inner)
    local H, N, K = inner // P, opts.d_state, opts.d_conv
    local self = { inner = inner, H = H, P = P, N = N, negative = opts.negative_eigenvalues }
    self.in_proj = ctx:linear("in_proj", ctx.d_model, 2 * inner + 2 * N + H, { bias = false })
    self.conv_weight = ctx:param("conv_weight", { inner + 2 * N, 1, K }, 1 / math.sqrt(3 * K))
    self.conv_bias = ctx:param("conv_bias", { inner + 2 * N }, "zeros")
    local A_log, dt_bias = {}, {}
    for h = 1, H do
      local spread = H > 1 and (h - 1) / (H - 1) or 0
      A_log[h] = math.log(1 + 15 * spread)
      local dt = math.exp(math.log(1e-3) + spread * (math.log(0.1) - math.log(1e-3)))
      dt_bias[h] = math.log(math.exp(dt) - 1)
    end
    self.A_log = ctx:param("A_log", ms.tensor(A_log))
    self.dt_bias = ctx:param("dt_bias", ms.tensor(dt_bias))
    self.D = ctx:param("D", { H }, "ones")
    self.norm = ctx:rms_norm("norm", inner)
    self.out_proj = ctx:linear("out_proj", inner, ctx.d_model, { bias = false, init = "output" })
    return self
  end,
  forward = function(self, x, state)
    local batch, length = x:shape()[1], x:shape()[2]
    local E, H, P, N = self.inner, self.H, self.P, self.N
    local projected = self.in_proj(x)
    local z = projected:narrow(3, 1, E)
    local u, window = ms.ops.causal_conv{ x = projected:narrow(3, E + 1, E + 2 * N),
                                          weight = self.conv_weight, bias = self.conv_bias,
                                          window = state and state[2] }
    local xs = u:narrow(3, 1, E):reshape{ batch, length, H, P }:transpose(2, 3)  -- [b, H, L, P]
    -- B and C, one group: the same [batch, length, N] for every head.
    local function shared(t) return t:unsqueeze(2):expand{ batch, H, length, N } end
    local B, C = shared(u:narrow(3, E + 1, N)), shared(u:narrow(3, E + N + 1, N))
    local dt = projected:narrow(3, 2 * E + 2 * N + 1, H)
    local delta = (dt + self.dt_bias):softplus():transpose(2, 3)                -- Δ [batch, H, L]
    local a = (delta * (-self.A_log:exp()):reshape{ 1, H, 1 }):exp()            -- [batch, H, L]
    if self.negative then a = 2 * a - 1 end
    local o, S = ms.ops.delta_rule{ q = C, k = B, v = xs, beta = delta, alpha = a,
                                    state = state and state[1], update = "additive" }
    local y = (o + xs * self.D:reshape{ 1, H, 1, 1 }):transpose(2, 3):reshape{ batch, length, E }
    return self.out_proj(self.norm(y * z:silu())), { S, window }
  end,
}
