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

// What the scores add besides q · k, each undefined where absent: ALiBi's slopes [heads], and
// relative positions' q' [batch, heads, queries, head_dim] and r [heads, keys, head_dim].
struct ScoreTerms {
  torch::Tensor slopes, q_position, relative;
};

Forward run_forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                    const ScoreTerms& terms, bool keep_log_sum_exp) {
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
        data_or_null<const scalar_t>(terms.slopes),
        score_scale<scalar_t>(shape),
        shape,
        sequence_view<const scalar_t>(terms.q_position),
        data_or_null<const scalar_t>(terms.relative)};
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
  // The score terms as tensors, each empty where absent (autograd takes no undefined input).
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& slopes_or_empty,
                               const torch::Tensor& q_position_or_empty,
                               const torch::Tensor& relative_or_empty) {
    const ScoreTerms terms{undefined_if_empty(slopes_or_empty),
                           undefined_if_empty(q_position_or_empty),
                           undefined_if_empty(relative_or_empty)};
    const Forward result = run_forward(q, k, v, terms, true);
    ctx->save_for_backward({q, k, v, result.out, result.log_sum_exp, slopes_or_empty,
                            q_position_or_empty, relative_or_empty});
    return {result.out};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &log_sum_exp = saved[4];
    const ScoreTerms terms{undefined_if_empty(saved[5]), undefined_if_empty(saved[6]),
                           undefined_if_empty(saved[7])};
    const torch::Tensor out = saved[3].transpose(1, 2);  // as [batch, heads, queries, head_dim]
    const torch::Tensor grad_out = width_contiguous(grads[0]).transpose(1, 2);
    const AttentionShape shape = shape_of(q, k);
    const torch::Tensor grad_q = heads_split_layout(q);
    const torch::Tensor grad_k = heads_split_layout(k);
    const torch::Tensor grad_v = heads_split_layout(v);
    const bool relative = terms.relative.defined();
    const torch::Tensor grad_q_position =
        relative ? heads_split_layout(terms.q_position) : torch::Tensor();
    // Each batch element's share, summed below: one head per work item, whatever the threads.
    const torch::Tensor grad_relative =
        relative ? torch::empty({shape.batch, shape.heads, shape.keys, shape.head_dim}, q.options())
                 : torch::Tensor();
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "fused causal attention backward", [&] {
      const kernels::AttentionBackward<scalar_t> args{
          sequence_view<const scalar_t>(q),
          sequence_view<const scalar_t>(k),
          sequence_view<const scalar_t>(v),
          sequence_view<const scalar_t>(out),
          sequence_view<const scalar_t>(grad_out),
          data_or_null<const scalar_t>(log_sum_exp),
          data_or_null<const scalar_t>(terms.slopes),
          sequence_view<scalar_t>(grad_q),
          sequence_view<scalar_t>(grad_k),
          sequence_view<scalar_t>(grad_v),
          score_scale<scalar_t>(shape),
          shape,
          sequence_view<const scalar_t>(terms.q_position),
          data_or_null<const scalar_t>(terms.relative),
          sequence_view<scalar_t>(grad_q_position),
          data_or_null<scalar_t>(grad_relative)};
      parallel_over(shape.head_count(), 3 * shape.queries * shape.keys * shape.head_dim,
                    [&](int64_t begin, int64_t end) {
                      kernels::causal_attention_backward_cpu(args, begin, end);
                    });
    });
    return {grad_q,          grad_k,          grad_v,
            torch::Tensor(), grad_q_position, relative ? grad_relative.sum(0) : torch::Tensor()};
  }
};

// The kernel as one autograd node; the inputs as causal_attention_kernel checked them.
torch::Tensor run_kernel(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                         const ScoreTerms& terms) {
  const torch::Tensor qc = width_contiguous(q), kc = width_contiguous(k), vc = width_contiguous(v);
  const ScoreTerms contiguous{
      terms.slopes.defined() ? terms.slopes.detach().to(q.device(), q.scalar_type()).contiguous()
                             : torch::Tensor(),
      terms.q_position.defined() ? width_contiguous(terms.q_position) : torch::Tensor(),
      terms.relative.defined() ? terms.relative.contiguous() : torch::Tensor()};
  const bool needs_grad = torch::GradMode::is_enabled() &&
                          (q.requires_grad() || k.requires_grad() || v.requires_grad() ||
                           (terms.q_position.defined() && terms.q_position.requires_grad()) ||
                           (terms.relative.defined() && terms.relative.requires_grad()));
  if (!needs_grad) return run_forward(qc, kc, vc, contiguous, false).out.transpose(1, 2);
  return CausalAttentionFunction::apply(qc, kc, vc, present_or_empty(contiguous.slopes, qc),
                                        present_or_empty(contiguous.q_position, qc),
                                        present_or_empty(contiguous.relative, qc))[0]
      .transpose(1, 2);
}

void check_kernel_inputs(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  TORCH_CHECK(on_cpu_kernels(q) && q.dim() == 4 && k.dim() == 4 && k.sizes() == v.sizes() &&
                  k.size(2) >= q.size(2) && k.size(0) == q.size(0) && k.size(1) == q.size(1) &&
                  k.size(3) == q.size(3) && k.scalar_type() == q.scalar_type() &&
                  v.scalar_type() == q.scalar_type() && k.device() == q.device() &&
                  v.device() == q.device(),
              "fused causal attention: CPU float32/float64 q [B, H, Lq, D] and k, v [B, H, Lk, D] "
              "with Lk >= Lq; got ",
              q.sizes(), ", ", k.sizes(), ", ", v.sizes(), " ", q.scalar_type(), " on ",
              q.device());
}

void check_relative_inputs(const torch::Tensor& q, const torch::Tensor& k,
                           const torch::Tensor& q_position, const torch::Tensor& relative) {
  TORCH_CHECK(q_position.sizes() == q.sizes() && q_position.scalar_type() == q.scalar_type() &&
                  q_position.device() == q.device(),
              "relative attention: q_position must be like q, ", q.sizes(), " ", q.scalar_type(),
              "; got ", q_position.sizes(), " ", q_position.scalar_type());
  TORCH_CHECK(relative.dim() == 3 && relative.size(0) == q.size(1) &&
                  relative.size(1) == k.size(2) && relative.size(2) == q.size(3) &&
                  relative.scalar_type() == q.scalar_type() && relative.device() == q.device(),
              "relative attention: relative must be [heads, keys, head_dim] = [", q.size(1), ", ",
              k.size(2), ", ", q.size(3), "] in q's dtype; got ", relative.sizes(), " ",
              relative.scalar_type());
}

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
  check_kernel_inputs(q, k, v);
  TORCH_CHECK(!slopes.defined() || (slopes.dim() == 1 && slopes.size(0) == q.size(1)),
              "fused causal attention: slopes must be [heads] = [", q.size(1), "], got ",
              slopes.sizes());
  return run_kernel(q, k, v, {slopes, {}, {}});
}

torch::Tensor causal_attention_relative_kernel(const torch::Tensor& q, const torch::Tensor& k,
                                               const torch::Tensor& v,
                                               const torch::Tensor& q_position,
                                               const torch::Tensor& relative) {
  check_kernel_inputs(q, k, v);
  check_relative_inputs(q, k, q_position, relative);
  return run_kernel(q, k, v, {{}, q_position, relative});
}

torch::Tensor causal_attention_relative(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v, const torch::Tensor& q_position,
                                        const torch::Tensor& relative) {
  if (on_cpu_kernels(q)) return causal_attention_relative_kernel(q, k, v, q_position, relative);
  return causal_attention_relative_reference(q, k, v, q_position, relative);
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

// Scores by distance first, one column per distance 0 .. keys − 1, then gathered to each (query,
// key) pair: the table is keys long, not queries × keys.
torch::Tensor causal_attention_relative_reference(const torch::Tensor& q, const torch::Tensor& k,
                                                  const torch::Tensor& v,
                                                  const torch::Tensor& q_position,
                                                  const torch::Tensor& relative) {
  const int64_t queries = q.size(2), keys = k.size(2);
  const torch::Tensor by_distance = torch::matmul(q_position, relative.transpose(-1, -2));
  const torch::Tensor distance = query_key_distances(queries, keys, q.device());
  // In place from here: at the Chomsky tasks' 500 positions these are the largest tensors of the
  // model, and neither the products nor the sum are needed by the backward.
  torch::Tensor scores = torch::matmul(q, k.transpose(-1, -2));
  scores.add_(by_distance.gather(-1, distance.clamp_min(0).expand(scores.sizes())));
  scores.mul_(1.0 / std::sqrt(static_cast<double>(q.size(3))));
  scores.masked_fill_(distance < 0, -INFINITY);
  return torch::matmul(torch::softmax(scores, -1), v);
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
