#include "runtime/ops/causal_attention/causal_attention.h"

#include <cmath>

#include "kernels/causal_attention/causal_attention.h"
#include "runtime/ops/common/kernel_args.h"

namespace memscript::ops {

namespace {

using kernels::AttentionShape;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

AttentionShape shape_of(const torch::Tensor& q, const torch::Tensor& k) {
  return {q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
}

// The scores' factor 1/√head_dim.
template <typename T>
T score_scale(const AttentionShape& shape) {
  return static_cast<T>(1.0 / std::sqrt(static_cast<double>(shape.head_dim)));
}

struct Forward {
  torch::Tensor out;          // [batch, queries, heads, head_dim]
  torch::Tensor log_sum_exp;  // [batch, heads, queries]; undefined without a backward to come
};

Forward run_forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                    const torch::Tensor& slopes, bool keep_log_sum_exp) {
  const AttentionShape shape = shape_of(q, k);
  // [batch, queries, heads, head_dim]: merging the heads afterwards is a view.
  Forward result{
      torch::empty({shape.batch, shape.queries, shape.heads, shape.head_dim}, q.options()),
      keep_log_sum_exp ? torch::empty({shape.batch, shape.heads, shape.queries}, q.options())
                       : torch::Tensor()};
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "fused causal attention", [&] {
    const kernels::AttentionForward<scalar_t> args{
        sequence_view<const scalar_t>(q),
        sequence_view<const scalar_t>(k),
        sequence_view<const scalar_t>(v),
        sequence_view<scalar_t>(result.out.transpose(1, 2)),
        data_or_null<scalar_t>(result.log_sum_exp),
        data_or_null<const scalar_t>(slopes),
        score_scale<scalar_t>(shape),
        shape};
    parallel_over(shape.head_count(), shape.queries * shape.keys * shape.head_dim,
                  [&](int64_t begin, int64_t end) {
                    kernels::causal_attention_forward_cpu(args, begin, end);
                  });
  });
  return result;
}

// An empty [batch, heads, positions, head_dim] tensor whose memory is [batch, positions, heads,
// head_dim], the layout the heads were split from: the gradients then flow back through
// split_heads' transpose and unflatten as views instead of one copy each.
torch::Tensor heads_split_layout(const torch::Tensor& like) {
  return torch::empty({like.size(0), like.size(2), like.size(1), like.size(3)}, like.options())
      .transpose(1, 2);
}

class CausalAttentionFunction : public torch::autograd::Function<CausalAttentionFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& slopes_or_empty) {
    const Forward result = run_forward(q, k, v, undefined_if_empty(slopes_or_empty), true);
    ctx->save_for_backward({q, k, v, result.out, result.log_sum_exp, slopes_or_empty});
    return {result.out};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &log_sum_exp = saved[4];
    const torch::Tensor slopes = undefined_if_empty(saved[5]);
    const torch::Tensor out = saved[3].transpose(1, 2);  // as [batch, heads, queries, head_dim]
    const torch::Tensor grad_out = width_contiguous(grads[0]).transpose(1, 2);
    const AttentionShape shape = shape_of(q, k);
    const torch::Tensor grad_q = heads_split_layout(q);
    const torch::Tensor grad_k = heads_split_layout(k);
    const torch::Tensor grad_v = heads_split_layout(v);
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "fused causal attention backward", [&] {
      const kernels::AttentionBackward<scalar_t> args{sequence_view<const scalar_t>(q),
                                                      sequence_view<const scalar_t>(k),
                                                      sequence_view<const scalar_t>(v),
                                                      sequence_view<const scalar_t>(out),
                                                      sequence_view<const scalar_t>(grad_out),
                                                      data_or_null<const scalar_t>(log_sum_exp),
                                                      data_or_null<const scalar_t>(slopes),
                                                      sequence_view<scalar_t>(grad_q),
                                                      sequence_view<scalar_t>(grad_k),
                                                      sequence_view<scalar_t>(grad_v),
                                                      score_scale<scalar_t>(shape),
                                                      shape};
      parallel_over(shape.head_count(), 3 * shape.queries * shape.keys * shape.head_dim,
                    [&](int64_t begin, int64_t end) {
                      kernels::causal_attention_backward_cpu(args, begin, end);
                    });
    });
    return {grad_q, grad_k, grad_v, torch::Tensor()};
  }
};

// B_hij = −slopes_h · (p_i − j) for the causal_attention() layout, [heads, queries, keys] in
// q's dtype; positive past p_i, where the mask applies.
torch::Tensor alibi_bias(const torch::Tensor& slopes, int64_t queries, int64_t keys,
                         const torch::TensorOptions& options) {
  const auto f64 = torch::TensorOptions().dtype(torch::kDouble).device(options.device());
  const torch::Tensor distances = query_key_distances(queries, keys, options.device()).to(f64);
  return (slopes.to(f64).view({-1, 1, 1}) * -distances).to(options.dtype());
}

// Where query i (row) must not see key j (column): j > p_i.
torch::Tensor future_keys(int64_t queries, int64_t keys, const torch::Device& device) {
  return query_key_distances(queries, keys, device) < 0;
}

}  // namespace

torch::Tensor causal_attention_kernel(const torch::Tensor& q, const torch::Tensor& k,
                                      const torch::Tensor& v, const torch::Tensor& slopes) {
  TORCH_CHECK(on_cpu_kernels(q) && q.dim() == 4 && k.dim() == 4 && k.sizes() == v.sizes() &&
                  k.size(2) >= q.size(2) && k.size(0) == q.size(0) && k.size(1) == q.size(1) &&
                  k.size(3) == q.size(3) && k.scalar_type() == q.scalar_type() &&
                  v.scalar_type() == q.scalar_type() && k.device() == q.device() &&
                  v.device() == q.device(),
              "fused causal attention: CPU float32/float64 q [B, H, Lq, D] and k, v [B, H, Lk, D] "
              "with Lk >= Lq; got ",
              q.sizes(), ", ", k.sizes(), ", ", v.sizes(), " ", q.scalar_type(), " on ",
              q.device());
  TORCH_CHECK(!slopes.defined() || (slopes.dim() == 1 && slopes.size(0) == q.size(1)),
              "fused causal attention: slopes must be [heads] = [", q.size(1), "], got ",
              slopes.sizes());
  const torch::Tensor qc = width_contiguous(q), kc = width_contiguous(k), vc = width_contiguous(v);
  const torch::Tensor sc = slopes.defined()
                               ? slopes.detach().to(q.device(), q.scalar_type()).contiguous()
                               : torch::Tensor();
  const bool needs_grad = torch::GradMode::is_enabled() &&
                          (q.requires_grad() || k.requires_grad() || v.requires_grad());
  if (!needs_grad) return run_forward(qc, kc, vc, sc, false).out.transpose(1, 2);
  return CausalAttentionFunction::apply(qc, kc, vc, present_or_empty(sc, qc))[0].transpose(1, 2);
}

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& slopes) {
  if (on_cpu_kernels(q) && q.size(-1) <= kMaxKernelHeadDim)
    return causal_attention_kernel(q, k, v, slopes);
  const int64_t length = q.size(2);
  const int64_t total = k.size(2);
  if (slopes.defined()) {
    // The bias as a float mask, −inf where the causal mask applies.
    const torch::Tensor bias = alibi_bias(slopes, length, total, q.options())
                                   .masked_fill(future_keys(length, total, q.device()), -INFINITY);
    return torch::scaled_dot_product_attention(q, k, v, bias);
  }
  // Without a cache libtorch's own causal mask applies; with one, the queries sit at the end, so
  // the diagonal is shifted by the cached length.
  if (total == length) return torch::scaled_dot_product_attention(q, k, v, {}, 0.0, true);
  return torch::scaled_dot_product_attention(q, k, v,
                                             future_keys(length, total, q.device()).logical_not());
}

// The reference: the same op composed of libtorch ops. It runs where the kernels do not take
// the tensors (kernels_take) and is what the tests hold the kernels to.
torch::Tensor causal_attention_reference(const torch::Tensor& q, const torch::Tensor& k,
                                         const torch::Tensor& v, const torch::Tensor& slopes) {
  const int64_t length = q.size(2), total = k.size(2);
  torch::Tensor scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(q.size(3));
  if (slopes.defined()) scores = scores + alibi_bias(slopes, length, total, q.options());
  const torch::Tensor masked =
      scores.masked_fill(future_keys(length, total, q.device()), -INFINITY);
  return torch::matmul(torch::softmax(masked, -1), v);
}

torch::Tensor query_key_distances(int64_t queries, int64_t keys, const torch::Device& device) {
  const auto index = torch::TensorOptions().dtype(torch::kLong).device(device);
  return torch::arange(keys - queries, keys, index).unsqueeze(1) -
         torch::arange(keys, index).unsqueeze(0);
}

torch::Tensor alibi_slopes(int64_t heads) {
  TORCH_CHECK(heads >= 1, "alibi_slopes: heads must be at least 1, got ", heads);
  int64_t below = 1;  // the largest power of two ≤ heads
  while (below * 2 <= heads) below *= 2;
  std::vector<double> slopes;
  for (int64_t i = 1; i <= below; ++i) slopes.push_back(std::exp2(-8.0 * i / below));
  // The rest: 2^(−8i/(2·below)) for odd i = 1, 3, 5, ..., every other slope of 2·below heads.
  for (int64_t i = 1; static_cast<int64_t>(slopes.size()) < heads; i += 2)
    slopes.push_back(std::exp2(-4.0 * i / below));
  return torch::tensor(slopes, torch::kDouble);
}

}  // namespace memscript::ops
