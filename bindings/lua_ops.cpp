// ms.ops.*: the fused recurrences the built-in mixers run, on Lua tensors, with state in and out
// and gradients through them — the same kernels on the CPU and CUDA and the same fallback to
// the op's reference where the kernels do not take the tensors (runtime/ops/<op>/).
//
//   local o, S = ms.ops.delta_rule{ q =, k =, v =, beta =, alpha =, state =, update = }
//   local o, S, z = ms.ops.linear_attention{ q =, k =, v =, sum =, normaliser =, eps = }
//   local unit = ms.ops.l2_normalize(x)
//   local u, window = ms.ops.causal_conv{ x =, weight =, bias =, window = }
//   local h, last = ms.ops.diagonal_scan{ a =, b =, state = }
//   local h_re, h_im, last_re, last_im = ms.ops.complex_scan{ lambda_re =, lambda_im =, b_re =,
//                                                             b_im =, state_re =, state_im = }
//   local y, h = ms.ops.selective_scan{ u =, delta =, A =, B =, C =, state =,
//                                       negative_eigenvalues = }
//   local o = ms.ops.causal_attention{ q =, k =, v =, slopes = }  (or q_position =, relative =)

#include <lua.hpp>

#include "bindings/convert.h"
#include "bindings/types.h"
#include "runtime/ops/causal_attention/causal_attention.h"
#include "runtime/ops/causal_conv/causal_conv.h"
#include "runtime/ops/complex_scan/complex_scan.h"
#include "runtime/ops/delta_rule/delta_rule.h"
#include "runtime/ops/l2_normalize/l2_normalize.h"
#include "runtime/ops/linear_attention/linear_attention.h"
#include "runtime/ops/selective_scan/selective_scan.h"

namespace memscript::lua {

namespace {

// The tensor `key` of the op's table, undefined when absent and optional.
torch::Tensor tensor_field(Options& options, const char* key, bool required) {
  if (!options.has(key)) {
    if (required) options.fail(key, "is required");
    return {};
  }
  return options.object_value<torch::Tensor>(key, "a tensor");
}

// Throws naming `key` unless `t` has `sizes` and q's dtype and device.
void check_field(Options& options, const char* key, const torch::Tensor& t,
                 std::vector<int64_t> sizes, const torch::Tensor& q, const std::string& layout) {
  if (!t.defined()) return;
  if (t.sizes() != at::IntArrayRef(sizes)) {
    options.fail(
        key, "must be " + layout + " = " + shape_text(sizes) + ", got " + shape_text(t.sizes()));
  }
  if (t.scalar_type() != q.scalar_type() || t.device() != q.device()) {
    options.fail(key, "must have q's dtype and device (" +
                          std::string(c10::toString(q.scalar_type())) + " on " + q.device().str() +
                          ")");
  }
}

void check_q(Options& options, const torch::Tensor& q) {
  if (q.dim() != 4) {
    options.fail("q", "must be [batch, heads, length, dk], got " + shape_text(q.sizes()));
  }
  if (!q.is_floating_point()) options.fail("q", "must be a floating tensor");
}

// The inputs every matrix-state op takes: q, k [batch, heads, length, dk] and v [.., dv].
struct QkvArgs {
  torch::Tensor q, k, v;
  int64_t batch, heads, length, dk, dv;
};

QkvArgs read_qkv(Options& options) {
  QkvArgs in;
  in.q = tensor_field(options, "q", true);
  check_q(options, in.q);
  in.batch = in.q.size(0), in.heads = in.q.size(1), in.length = in.q.size(2);
  in.dk = in.q.size(3);
  in.k = tensor_field(options, "k", true);
  check_field(options, "k", in.k, {in.batch, in.heads, in.length, in.dk}, in.q, "q's shape");
  in.v = tensor_field(options, "v", true);
  if (in.v.dim() != 4)
    options.fail("v", "must be [batch, heads, length, dv], got " + shape_text(in.v.sizes()));
  in.dv = in.v.size(3);
  check_field(options, "v", in.v, {in.batch, in.heads, in.length, in.dv}, in.q,
              "[batch, heads, length, dv]");
  return in;
}

// ms.ops.delta_rule{ q, k, v, beta [, alpha] [, state] [, update = "delta" | "additive"] }
//   S_t = α_t S_{t-1} (I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ (delta), α_t S_{t-1} + β_t v_t k_tᵀ
//   (additive); o_t = S_t q_t; α [B, H, L], or [B, H, L, dk] for S_{t-1} diag(α_t). Returns
//   o [B, H, L, dv] and S [B, H, dv, dk].
int delta_rule_op(lua_State* L) {
  Options options = read_options(L, 1, "ms.ops.delta_rule");
  const QkvArgs in = read_qkv(options);
  const int64_t b = in.batch, h = in.heads, l = in.length;
  const torch::Tensor beta = tensor_field(options, "beta", true);
  check_field(options, "beta", beta, {b, h, l}, in.q, "[batch, heads, length]");
  // α one number per head and token, or one per key column (gated linear attention).
  const torch::Tensor alpha = tensor_field(options, "alpha", false);
  if (alpha.defined() && alpha.dim() == 4) {
    check_field(options, "alpha", alpha, {b, h, l, in.dk}, in.q, "[batch, heads, length, dk]");
  } else {
    check_field(options, "alpha", alpha, {b, h, l}, in.q,
                "[batch, heads, length] or [batch, heads, length, dk]");
  }
  const torch::Tensor state = tensor_field(options, "state", false);
  check_field(options, "state", state, {b, h, in.dv, in.dk}, in.q, "[batch, heads, dv, dk]");
  const std::string update = options.string("update", "delta", {"delta", "additive"});
  options.finish();
  const ops::DeltaRuleResult out =
      ops::delta_rule(in.q, in.k, in.v, beta, alpha, state,
                      update == "additive" ? ops::StateUpdate::additive : ops::StateUpdate::delta);
  push_object<torch::Tensor>(L, out.outputs);
  push_object<torch::Tensor>(L, out.state);
  return 2;
}

// ms.ops.linear_attention{ q, k, v [, sum] [, normaliser] [, eps = 1e-6] } on features already
// mapped (q, k ≥ 0): S_t = S_{t-1} + k_t v_tᵀ, z_t = z_{t-1} + k_t, o_t = S_tᵀ q_t / (z_tᵀ q_t +
// eps). Returns o [B, H, L, dv], S [B, H, dk, dv] and z [B, H, dk].
int linear_attention_op(lua_State* L) {
  Options options = read_options(L, 1, "ms.ops.linear_attention");
  const QkvArgs in = read_qkv(options);
  const torch::Tensor sum = tensor_field(options, "sum", false);
  check_field(options, "sum", sum, {in.batch, in.heads, in.dk, in.dv}, in.q,
              "[batch, heads, dk, dv]");
  const torch::Tensor normaliser = tensor_field(options, "normaliser", false);
  check_field(options, "normaliser", normaliser, {in.batch, in.heads, in.dk}, in.q,
              "[batch, heads, dk]");
  if (sum.defined() != normaliser.defined())
    options.fail(sum.defined() ? "normaliser" : "sum", "must come with the other state tensor");
  const double eps = options.number("eps", 1e-6, 0.0);
  if (!(eps > 0)) options.fail("eps", "must be > 0, got 0");
  options.finish();
  const ops::LinearAttentionResult out =
      ops::linear_attention(in.q, in.k, in.v, sum, normaliser, eps);
  push_object<torch::Tensor>(L, out.outputs);
  push_object<torch::Tensor>(L, out.sum);
  push_object<torch::Tensor>(L, out.normaliser);
  return 3;
}

// The required floating tensor `key` of `dims` dimensions, laid out as `layout` (its sizes are
// the caller's to check): the first tensor of an op, whose dtype and device the others share.
torch::Tensor leading_field(Options& options, const char* key, int64_t dims,
                            const std::string& layout) {
  const torch::Tensor t = tensor_field(options, key, true);
  if (t.dim() != dims || !t.is_floating_point())
    options.fail(key, "must be a floating " + layout + ", got " + shape_text(t.sizes()));
  return t;
}

// ms.ops.diagonal_scan{ a, b [, state] }: h_t = a_t ⊙ h_{t−1} + b_t, elementwise, for a, b
// [batch, length, channels] and state h_0 [batch, channels] (nil: zeros); a may take any real
// value (negative: the sign flips). Returns h [batch, length, channels] and h_L [batch, channels].
// The delta-rule kernels' additive update with a 1 x 1 state per channel runs it, so it is fused
// on the CPU and CUDA with its backward.
int diagonal_scan_op(lua_State* L) {
  Options options = read_options(L, 1, "ms.ops.diagonal_scan");
  const torch::Tensor a = leading_field(options, "a", 3, "[batch, length, channels]");
  const int64_t batch = a.size(0), length = a.size(1), channels = a.size(2);
  const torch::Tensor b = tensor_field(options, "b", true);
  check_field(options, "b", b, {batch, length, channels}, a, "a's shape");
  const torch::Tensor state = tensor_field(options, "state", false);
  check_field(options, "state", state, {batch, channels}, a, "[batch, channels]");
  options.finish();
  // Channels as heads of a 1 x 1 state: S_t = a_t S_{t−1} + 1 · b_t · 1, read with q = 1.
  const torch::Tensor ones = torch::ones({batch, channels, length, 1}, a.options());
  const ops::DeltaRuleResult out = ops::delta_rule(
      ones, ones, b.transpose(1, 2).unsqueeze(-1), ones.squeeze(-1), a.transpose(1, 2),
      state.defined() ? state.view({batch, channels, 1, 1}) : torch::Tensor(),
      ops::StateUpdate::additive);
  push_object<torch::Tensor>(L, out.outputs.squeeze(-1).transpose(1, 2));
  push_object<torch::Tensor>(L, out.state.view({batch, channels}));
  return 2;
}

// ms.ops.complex_scan{ lambda_re, lambda_im, b_re, b_im [, state_re, state_im] }: the LRU's
// h_t = λ ⊙ h_{t−1} + b_t in complex numbers as (re, im) pairs; λ [channels] fixed over time,
// b [batch, length, channels], state [batch, channels] (nil: zeros). Returns h_re, h_im
// [batch, length, channels] and the last state's re, im [batch, channels].
int complex_scan_op(lua_State* L) {
  Options options = read_options(L, 1, "ms.ops.complex_scan");
  const torch::Tensor b_re = leading_field(options, "b_re", 3, "[batch, length, channels]");
  const int64_t batch = b_re.size(0), length = b_re.size(1), channels = b_re.size(2);
  const torch::Tensor b_im = tensor_field(options, "b_im", true);
  check_field(options, "b_im", b_im, {batch, length, channels}, b_re, "b_re's shape");
  torch::Tensor lambda[2], state[2];
  const char* lambda_keys[2] = {"lambda_re", "lambda_im"};
  const char* state_keys[2] = {"state_re", "state_im"};
  for (int part = 0; part < 2; ++part) {
    lambda[part] = tensor_field(options, lambda_keys[part], true);
    check_field(options, lambda_keys[part], lambda[part], {channels}, b_re, "[channels]");
    state[part] = tensor_field(options, state_keys[part], false);
    check_field(options, state_keys[part], state[part], {batch, channels}, b_re,
                "[batch, channels]");
  }
  if (state[0].defined() != state[1].defined())
    options.fail(state[0].defined() ? "state_im" : "state_re", "must come with the other part");
  options.finish();
  for (torch::Tensor& part : state)
    if (!part.defined()) part = torch::zeros({batch, channels}, b_re.options());
  const ops::ComplexScanResult out =
      ops::complex_scan(lambda[0], lambda[1], b_re, b_im, state[0], state[1]);
  for (const torch::Tensor& t : {out.h_re, out.h_im, out.last_re, out.last_im})
    push_object<torch::Tensor>(L, t);
  return 4;
}

// ms.ops.selective_scan{ u, delta, A, B, C [, state] [, negative_eigenvalues = false] }: Mamba's
// h_t = a(Δ_t A) ⊙ h_{t−1} + (Δ_t u_t) B_tᵀ, y_t = h_t C_t (without the D skip), a = exp, or
// 2·exp − 1 with negative eigenvalues; u, delta [batch, length, channels], A [channels, states],
// B, C [batch, length, states], state [batch, channels, states] (nil: zeros). Returns y
// [batch, length, channels] and the last state.
int selective_scan_op(lua_State* L) {
  Options options = read_options(L, 1, "ms.ops.selective_scan");
  const torch::Tensor u = leading_field(options, "u", 3, "[batch, length, channels]");
  const int64_t batch = u.size(0), length = u.size(1), channels = u.size(2);
  const torch::Tensor delta = tensor_field(options, "delta", true);
  check_field(options, "delta", delta, {batch, length, channels}, u, "u's shape");
  const torch::Tensor A = tensor_field(options, "A", true);
  if (A.dim() != 2 || A.size(0) != channels) {
    options.fail("A", "must be [channels, states] = [" + std::to_string(channels) +
                          ", states], got " + shape_text(A.sizes()));
  }
  const int64_t states = A.size(1);
  check_field(options, "A", A, {channels, states}, u, "[channels, states]");
  const torch::Tensor B = tensor_field(options, "B", true);
  check_field(options, "B", B, {batch, length, states}, u, "[batch, length, states]");
  const torch::Tensor C = tensor_field(options, "C", true);
  check_field(options, "C", C, {batch, length, states}, u, "[batch, length, states]");
  torch::Tensor state = tensor_field(options, "state", false);
  check_field(options, "state", state, {batch, channels, states}, u, "[batch, channels, states]");
  const bool negative = options.boolean("negative_eigenvalues", false);
  options.finish();
  if (!state.defined()) state = torch::zeros({batch, channels, states}, u.options());
  const ops::SelectiveScanResult out = ops::selective_scan(u, delta, A, B, C, state, negative);
  push_object<torch::Tensor>(L, out.y);
  push_object<torch::Tensor>(L, out.h_last);
  return 2;
}

// ms.ops.causal_attention{ q, k, v [, slopes] [, q_position, relative] }: softmax(q kᵀ /
// √head_dim + B + causal mask) v for q [batch, heads, queries, head_dim] and k, v [batch, heads,
// keys, head_dim], keys ≥ queries (the queries are the last of the keys' positions: earlier keys
// are a cache). With slopes [heads], B = −slope · (query position − key position), ALiBi's bias;
// with q_position (q's shape) and relative [heads, keys, head_dim], B_ij = q_position_i ·
// relative[p_i − j] / √head_dim, Transformer-XL's relative positions. The gpt mixer's attention.
int causal_attention_op(lua_State* L) {
  Options options = read_options(L, 1, "ms.ops.causal_attention");
  const torch::Tensor q = leading_field(options, "q", 4, "[batch, heads, queries, head_dim]");
  const torch::Tensor k = tensor_field(options, "k", true);
  if (k.dim() != 4 || k.size(2) < q.size(2)) {
    options.fail("k", "must be [batch, heads, keys, head_dim] with keys ≥ the " +
                          std::to_string(q.size(2)) + " queries, got " + shape_text(k.sizes()));
  }
  check_field(options, "k", k, {q.size(0), q.size(1), k.size(2), q.size(3)}, q,
              "[batch, heads, keys, head_dim]");
  const torch::Tensor v = tensor_field(options, "v", true);
  check_field(options, "v", v, k.sizes().vec(), q, "k's shape");
  const torch::Tensor slopes = tensor_field(options, "slopes", false);
  check_field(options, "slopes", slopes, {q.size(1)}, q, "[heads]");
  const torch::Tensor q_position = tensor_field(options, "q_position", false);
  check_field(options, "q_position", q_position, q.sizes().vec(), q, "q's shape");
  const torch::Tensor relative = tensor_field(options, "relative", false);
  check_field(options, "relative", relative, {q.size(1), k.size(2), q.size(3)}, q,
              "[heads, keys, head_dim]");
  if (q_position.defined() != relative.defined())
    options.fail(q_position.defined() ? "relative" : "q_position",
                 "must come with the other of q_position and relative");
  if (relative.defined() && slopes.defined())
    options.fail("slopes", "and relative positions do not combine: give one of them");
  options.finish();
  push_object<torch::Tensor>(L, relative.defined()
                                    ? ops::causal_attention_relative(q, k, v, q_position, relative)
                                    : ops::causal_attention(q, k, v, slopes));
  return 1;
}

// ms.ops.causal_conv{ x, weight, bias [, window] }: u = silu(causal depthwise convolution of x
// [batch, length, channels] with weight [channels, 1, K] and bias [channels], after `window`
// [batch, channels, K − 1] (the previous chunk's last inputs; nil: zeros)). Returns u and the
// next chunk's window: Mamba's conv and the short convolution before q, k, v.
int causal_conv_op(lua_State* L) {
  Options options = read_options(L, 1, "ms.ops.causal_conv");
  const torch::Tensor x = leading_field(options, "x", 3, "[batch, length, channels]");
  const int64_t channels = x.size(2);
  const torch::Tensor weight = tensor_field(options, "weight", true);
  if (weight.dim() != 3 || weight.size(0) != channels || weight.size(1) != 1 || weight.size(2) < 1)
    options.fail("weight", "must be [" + std::to_string(channels) + ", 1, K], got " +
                               shape_text(weight.sizes()));
  const torch::Tensor bias = tensor_field(options, "bias", true);
  check_field(options, "bias", bias, {channels}, x, "[channels]");
  // Its shape is checked above; this checks its dtype and device against x's.
  check_field(options, "weight", weight,
              std::vector<int64_t>(weight.sizes().begin(), weight.sizes().end()), x,
              "[channels, 1, K]");
  const torch::Tensor window = tensor_field(options, "window", false);
  check_field(options, "window", window, {x.size(0), channels, weight.size(2) - 1}, x,
              "[batch, channels, K - 1]");
  options.finish();
  const ops::CausalConvResult out = ops::causal_conv_silu(x, window, weight, bias);
  push_object<torch::Tensor>(L, out.u);
  push_object<torch::Tensor>(L, out.window_after);
  return 2;
}

// ms.ops.l2_normalize(x): x / ‖x‖ along the last dimension, as one node (the delta-rule mixers'
// q and k normalisation; kernels/l2_normalize/ on the CPU).
int l2_normalize_op(lua_State* L) {
  const torch::Tensor* x = test_object<torch::Tensor>(L, 1);
  if (!x || !x->is_floating_point() || x->dim() < 1)
    argument_error(L, 1, "a floating tensor expected");
  push_object<torch::Tensor>(L, ops::l2_normalize(*x));
  return 1;
}

}  // namespace

void push_op_functions(lua_State* L) {
  static const luaL_Reg functions[] = {{"delta_rule", protect<delta_rule_op>},
                                       {"l2_normalize", protect<l2_normalize_op>},
                                       {"causal_conv", protect<causal_conv_op>},
                                       {"linear_attention", protect<linear_attention_op>},
                                       {"diagonal_scan", protect<diagonal_scan_op>},
                                       {"complex_scan", protect<complex_scan_op>},
                                       {"selective_scan", protect<selective_scan_op>},
                                       {"causal_attention", protect<causal_attention_op>},
                                       {nullptr, nullptr}};
  lua_newtable(L);
  luaL_setfuncs(L, functions, 0);
}

}  // namespace memscript::lua
