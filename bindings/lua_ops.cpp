// ms.ops.*: the fused recurrences the built-in mixers run, on Lua tensors, with state in and out
// and gradients through them — the same kernels on the CPU and CUDA and the same fallback to
// the op's reference where the kernels do not take the tensors (runtime/ops/<op>/).
//
//   local o, S = ms.ops.delta_rule{ q =, k =, v =, beta =, alpha =, state =, update = }
//   local o, S, z = ms.ops.linear_attention{ q =, k =, v =, sum =, normaliser =, eps = }
//   local unit = ms.ops.l2_normalize(x)
//   local u, window = ms.ops.causal_conv{ x =, weight =, bias =, window = }

#include <lua.hpp>

#include "bindings/convert.h"
#include "bindings/types.h"
#include "runtime/ops/causal_conv/causal_conv.h"
#include "runtime/ops/delta_rule/delta_rule.h"
#include "runtime/ops/l2_normalize/l2_normalize.h"
#include "runtime/ops/linear_attention/linear_attention.h"

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

}  // namespace

// ms.ops.causal_conv{ x, weight, bias [, window] }: u = silu(causal depthwise convolution of x
// [batch, length, channels] with weight [channels, 1, K] and bias [channels], after `window`
// [batch, channels, K − 1] (the previous chunk's last inputs; nil: zeros)). Returns u and the
// next chunk's window: Mamba's conv and the short convolution before q, k, v.
int causal_conv_op(lua_State* L) {
  Options options = read_options(L, 1, "ms.ops.causal_conv");
  const torch::Tensor x = tensor_field(options, "x", true);
  if (x.dim() != 3 || !x.is_floating_point())
    options.fail("x", "must be a floating [batch, length, channels], got " + shape_text(x.sizes()));
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

void push_op_functions(lua_State* L) {
  static const luaL_Reg functions[] = {{"delta_rule", protect<delta_rule_op>},
                                       {"l2_normalize", protect<l2_normalize_op>},
                                       {"causal_conv", protect<causal_conv_op>},
                                       {"linear_attention", protect<linear_attention_op>},
                                       {nullptr, nullptr}};
  lua_newtable(L);
  luaL_setfuncs(L, functions, 0);
}

}  // namespace memscript::lua
