-- DeltaProduct written in the script: n_h delta-rule steps per token on the fused kernel
-- (ms.ops.delta_rule), by interleaving them into a sequence of length · n_h steps and keeping the
-- output of every token's last one.
--
-- Siems et al., "DeltaProduct: Improving State-Tracking in Linear RNNs via Householder
-- Products", 2025. Per head, token t and sub-step j = 1 .. n_h (each with its own projections):
--   k_{t,j} = L2-normalised W_k^j x_t,   v_{t,j} = W_v^j x_t,   β_{t,j} = σ(w_β^jᵀ x_t + b_β^j)
--   (2σ(·) with negative_eigenvalues: each factor I − β k kᵀ then has eigenvalues in (−1, 1])
--   S_{t,j} = S_{t,j−1} (I − β_{t,j} k_{t,j} k_{t,j}ᵀ) + β_{t,j} v_{t,j} k_{t,j}ᵀ
--   (S_{t,0} = S_{t−1,n_h})
--   o_t = S_{t,n_h} q_t  (q_t = L2-normalised W_q x_t),   y_t = W_out [o_t per head]
-- so the state's transition per token is a product of n_h generalised Householder matrices
-- (n_h = 1: DeltaNet, as deltanet_lua). The projections' layout is the reference code's: the
-- sub-steps of one token side by side ([n_h, heads, head_dim] in W_k x_t). No short conv, no
-- output norm or gate, no forget gate (Gated DeltaProduct), as deltanet_lua.
-- Options: householder n_h (2), head_dim (0: d_model / heads), negative_eigenvalues (false),
-- qkv_bias (false). State: { S [batch, heads, head_dim, head_dim] }.
--
--   require "memscript.mixers.deltaproduct"
--   local m = ms.model.decoder{ mixer = "deltaproduct_lua", householder = 3, task = task }
ms.mixer.define{
  name = "deltaproduct_lua",
  options = { householder = 2, head_dim = 0, negative_eigenvalues = false, qkv_bias = false },
  init = function(ctx, opts)
    assert(opts.householder >= 1, "deltaproduct_lua: householder must be >= 1")
    local head_dim = opts.head_dim > 0 and opts.head_dim or ctx.d_model // ctx.heads
    local width, n = ctx.heads * head_dim, opts.householder
    local self = { heads = ctx.heads, head_dim = head_dim, n = n,
                   negative = opts.negative_eigenvalues }
    local qkv = { bias = opts.qkv_bias }
    self.query = ctx:linear("query", ctx.d_model, width, qkv)
    self.key = ctx:linear("key", ctx.d_model, n * width, qkv)
    self.value = ctx:linear("value", ctx.d_model, n * width, qkv)
    self.beta = ctx:linear("beta", ctx.d_model, n * ctx.heads, { activation = "sigmoid" })
    self.output = ctx:linear("output", width, ctx.d_model, { init = "output" })
    return self
  end,
  forward = function(self, x, state)
    local batch, length = x:shape()[1], x:shape()[2]
    local H, d, n = self.heads, self.head_dim, self.n
    -- [batch, length, n · H · d] -> [batch, H, length · n, d]: token t's sub-steps in a row.
    local function steps(t) return t:reshape{ batch, length * n, H, d }:transpose(2, 3) end
    local k = ms.ops.l2_normalize(steps(self.key(x)))
    local v = steps(self.value(x))
    local beta = self.beta(x):reshape{ batch, length * n, H }:transpose(2, 3)
    if self.negative then beta = 2 * beta end
    -- q read at each token's last sub-step (zeros before it: those outputs are dropped).
    local q = ms.ops.l2_normalize(self.query(x):reshape{ batch, length, 1, H, d })
    if n > 1 then q = ms.cat({ q:new_zeros{ batch, length, n - 1, H, d }, q }, 3) end
    q = q:reshape{ batch, length * n, H, d }:transpose(2, 3)
    local o, S = ms.ops.delta_rule{ q = q, k = k, v = v, beta = beta, state = state and state[1] }
    local last = o:reshape{ batch, H, length, n, d }:select(4, n)             -- [batch, H, L, d]
    return self.output(last:transpose(2, 3):reshape{ batch, length, H * d }), { S }
  end,
}
