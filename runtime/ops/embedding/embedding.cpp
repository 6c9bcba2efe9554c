#include "runtime/ops/embedding/embedding.h"

#include "kernels/common/block_sum.h"
#include "kernels/embedding/embedding.h"
#include "runtime/ops/common/launch.h"

namespace memscript::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class EmbeddingFunction : public torch::autograd::Function<EmbeddingFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& tokens_in,
                               const torch::Tensor& weight) {
    const torch::Tensor tokens = tokens_in.contiguous();
    // index_select checks that every token lies in [0, vocab).
    torch::Tensor rows = weight.index_select(0, tokens.reshape({-1}));
    ctx->save_for_backward({tokens});
    ctx->saved_data["vocab"] = weight.size(0);
    std::vector<int64_t> shape(tokens.sizes().begin(), tokens.sizes().end());
    shape.push_back(weight.size(1));
    return {rows.view(shape)};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const torch::Tensor tokens = ctx->get_saved_variables()[0];
    const torch::Tensor grad = grads[0].contiguous();
    const kernels::EmbeddingShape shape{tokens.numel(), ctx->saved_data["vocab"].toInt(),
                                        grad.size(-1)};
    const int64_t blocks = kernels::embedding_blocks(shape);
    const torch::Tensor partials = torch::empty({blocks, shape.vocab, shape.width}, grad.options());
    const torch::Tensor grad_weight = torch::empty({shape.vocab, shape.width}, grad.options());
    AT_DISPATCH_FLOATING_TYPES(grad.scalar_type(), "fused embedding backward", [&] {
      parallel_over(blocks, kernels::embedding_rows_per_block(shape) * shape.width,
                    [&](int64_t begin, int64_t end) {
                      kernels::embedding_backward_cpu(data<int64_t>(tokens), data<scalar_t>(grad),
                                                      data<scalar_t>(partials), shape, begin, end);
                    });
      kernels::sum_blocks_cpu(data<scalar_t>(partials), blocks, shape.vocab * shape.width,
                              data<scalar_t>(grad_weight));
    });
    return {torch::Tensor(), grad_weight};
  }
};

}  // namespace

torch::Tensor embedding(const torch::Tensor& tokens, const torch::Tensor& weight) {
  TORCH_CHECK(tokens.scalar_type() == torch::kInt64 && weight.dim() == 2, "embedding: int64 ",
              "tokens and a [vocab, width] weight, got ", tokens.scalar_type(), " and ",
              weight.sizes());
  if (!on_cpu_kernels(weight) || !tokens.is_cpu()) return torch::embedding(weight, tokens);
  return EmbeddingFunction::apply(tokens, weight)[0];
}

}  // namespace memscript::ops
