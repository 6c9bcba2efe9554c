#include "runtime/ops/cross_entropy/cross_entropy.h"

#include <vector>

#include "kernels/cross_entropy/cross_entropy.h"
#include "runtime/ops/common/launch.h"

namespace memscript::ops {

namespace {

using kernels::CrossEntropyBlock;
using kernels::CrossEntropyShape;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

CrossEntropyShape shape_of(const torch::Tensor& logits) {
  return {logits.numel() / logits.size(-1), logits.size(-1)};
}

template <typename T>
kernels::CrossEntropyArgs<T> args_of(const torch::Tensor& logits, const torch::Tensor& targets,
                                     const torch::Tensor& mask,
                                     const torch::Tensor& log_normalizer) {
  return {data<T>(logits), data<int64_t>(targets), data<bool>(mask), data<T>(log_normalizer)};
}

// The blocks' sums added in order; the first bad target is an error.
CrossEntropyBlock combine(const std::vector<CrossEntropyBlock>& blocks,
                          const torch::Tensor& targets, int64_t classes) {
  CrossEntropyBlock total;
  for (const CrossEntropyBlock& block : blocks) {
    TORCH_CHECK(block.bad_row < 0, "masked_cross_entropy: the target at position ", block.bad_row,
                " is ", targets.data_ptr<int64_t>()[block.bad_row], ", outside [0, ", classes,
                ") (the model's classes)");
    total.loss_sum += block.loss_sum;
    total.scored += block.scored;
  }
  return total;
}

class CrossEntropyFunction : public torch::autograd::Function<CrossEntropyFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& logits_in,
                               const torch::Tensor& targets_in, const torch::Tensor& mask_in,
                               bool mean) {
    const torch::Tensor logits = logits_in.contiguous();
    const torch::Tensor targets = targets_in.contiguous(), mask = mask_in.contiguous();
    const CrossEntropyShape shape = shape_of(logits);
    const torch::Tensor log_normalizer = torch::empty({shape.rows}, logits.options());
    std::vector<CrossEntropyBlock> blocks(
        static_cast<size_t>(kernels::cross_entropy_blocks(shape)));
    AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "fused cross_entropy", [&] {
      const auto args = args_of<scalar_t>(logits, targets, mask, log_normalizer);
      parallel_over(static_cast<int64_t>(blocks.size()),
                    kernels::kCrossEntropyRowsPerBlock * 4 * shape.classes,
                    [&](int64_t begin, int64_t end) {
                      kernels::cross_entropy_forward_cpu(args, shape, blocks.data(), begin, end);
                    });
    });
    const CrossEntropyBlock total = combine(blocks, targets, shape.classes);
    const double scale = mean ? 1.0 / static_cast<double>(std::max<int64_t>(1, total.scored)) : 1.0;
    ctx->save_for_backward({logits, targets, mask, log_normalizer});
    ctx->saved_data["scale"] = scale;
    return {torch::full({}, total.loss_sum * scale, logits.options())};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &logits = saved[0], &targets = saved[1], &mask = saved[2],
                        &log_normalizer = saved[3];
    const double scale = ctx->saved_data["scale"].toDouble() * grads[0].item<double>();
    const CrossEntropyShape shape = shape_of(logits);
    const torch::Tensor grad_logits = torch::empty_like(logits);
    AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "fused cross_entropy backward", [&] {
      const auto args = args_of<scalar_t>(logits, targets, mask, log_normalizer);
      parallel_over(shape.rows, 4 * shape.classes, [&](int64_t begin, int64_t end) {
        kernels::cross_entropy_backward_cpu(args, shape, scale, data<scalar_t>(grad_logits), begin,
                                            end);
      });
    });
    return {grad_logits, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

bool runs_on_kernels(const torch::Tensor& logits, const torch::Tensor& targets,
                     const torch::Tensor& mask) {
  const int64_t rows = logits.numel() / std::max<int64_t>(1, logits.size(-1));
  return on_cpu_kernels(logits) && logits.numel() > 0 && targets.scalar_type() == torch::kInt64 &&
         mask.scalar_type() == torch::kBool && targets.numel() == rows && mask.numel() == rows &&
         targets.is_cpu() && mask.is_cpu();
}

}  // namespace

torch::Tensor masked_cross_entropy_reference(const torch::Tensor& logits,
                                             const torch::Tensor& targets,
                                             const torch::Tensor& mask, LossReduction reduction) {
  const torch::Tensor losses = torch::nn::functional::cross_entropy(
      logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  const torch::Tensor sum = (losses * mask.reshape({-1}).to(losses.scalar_type())).sum();
  if (reduction == LossReduction::sum) return sum;
  return sum / mask.sum().to(logits.scalar_type()).clamp_min(1.0);
}

torch::Tensor masked_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets,
                                   const torch::Tensor& mask, LossReduction reduction) {
  if (!runs_on_kernels(logits, targets, mask))
    return masked_cross_entropy_reference(logits, targets, mask, reduction);
  return CrossEntropyFunction::apply(logits, targets, mask, reduction == LossReduction::mean)[0];
}

}  // namespace memscript::ops
