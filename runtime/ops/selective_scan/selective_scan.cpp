#include "runtime/ops/selective_scan/selective_scan.h"

#include <cmath>

#include "kernels/selective_scan/selective_scan.h"
#include "runtime/ops/common/launch.h"

namespace memscript::ops {

namespace {

using kernels::SelectiveScanBackward;
using kernels::SelectiveScanForward;
using kernels::SelectiveScanShape;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Channels per backward work item on the CPU: enough items to fill the thread pool at small
// batches, few enough that the per-group partial sums of grad_B and grad_C stay small.
constexpr int64_t kChannelsPerGroup = 16;

// On CUDA a work item is one thread, and sixteen channels to a thread leave a GPU nearly idle
// (batch · channels / 16 threads, each walking its channels one after another). There the
// group is the smallest that keeps the partial sums of grad_B and grad_C under this size.
constexpr int64_t kCudaPartialBytes = int64_t{256} << 20;

int64_t channels_per_group(const torch::Tensor& u, int64_t states) {
  if (!u.is_cuda()) return kChannelsPerGroup;
  const int64_t batch = u.size(0), length = u.size(1), channels = u.size(2);
  int64_t group = 1;
  while (group < kChannelsPerGroup && 2 * batch * ((channels + group - 1) / group) * length *
                                              states * static_cast<int64_t>(u.element_size()) >
                                          kCudaPartialBytes)
    group *= 2;
  return group;
}

// sqrt(L) steps between checkpoints balances the checkpoints (L / segment states) against the
// scratch one segment needs (segment states).
SelectiveScanShape shape_of(const torch::Tensor& u, const torch::Tensor& A) {
  const int64_t length = u.size(1);
  const auto segment =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(length)))));
  return {u.size(0), length, u.size(2), A.size(1), segment, channels_per_group(u, A.size(1))};
}

template <typename T>
SelectiveScanForward<T, T> forward_args(const variable_list& in, const torch::Tensor& y,
                                        const torch::Tensor& h_last,
                                        const torch::Tensor& checkpoints, bool negative) {
  return {data<T>(in[0]), data<T>(in[1]), data<T>(in[2]),  data<T>(in[3]),       data<T>(in[4]),
          data<T>(in[5]), data<T>(y),     data<T>(h_last), data<T>(checkpoints), negative};
}

// saved: u, Δ, A, B, C, checkpoints; grads: of y, h_last; out: grad u, Δ, A (per batch),
// B, C (per group), h0, then the scratch.
template <typename T>
SelectiveScanBackward<T, T> backward_args(const variable_list& saved, const variable_list& grads,
                                          const variable_list& out, bool negative) {
  return {data<T>(saved[0]), data<T>(saved[1]), data<T>(saved[2]), data<T>(saved[3]),
          data<T>(saved[4]), data<T>(saved[5]), data<T>(grads[0]), data<T>(grads[1]),
          data<T>(out[0]),   data<T>(out[1]),   data<T>(out[2]),   data<T>(out[3]),
          data<T>(out[4]),   data<T>(out[5]),   data<T>(out[6]),   negative};
}

class SelectiveScanFunction : public torch::autograd::Function<SelectiveScanFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& u,
                               const torch::Tensor& delta, const torch::Tensor& A,
                               const torch::Tensor& B, const torch::Tensor& C,
                               const torch::Tensor& h0, bool negative, bool wants_grad) {
    check_inputs("selective_scan", {u, delta, A, B, C, h0});
    variable_list in;
    for (const torch::Tensor& t : {u, delta, A, B, C, h0}) in.push_back(t.contiguous());
    const SelectiveScanShape s = shape_of(u, A);
    const torch::Tensor y = torch::empty_like(in[0]);
    const torch::Tensor h_last = torch::empty({s.batch, s.channels, s.states}, in[5].options());
    torch::Tensor checkpoints;
    if (wants_grad) {
      checkpoints = torch::empty({s.batch, s.segments(), s.channels, s.states}, in[5].options());
    }
    if (u.is_cuda()) {
      const char* message = nullptr;
      check_launch(kernels::selective_scan_forward_cuda(
                       forward_args<float>(in, y, h_last, checkpoints, negative), s,
                       cuda_stream_of(u), &message),
                   message, "selective_scan forward");
    } else {
      AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "selective_scan forward", [&] {
        const auto f = forward_args<scalar_t>(in, y, h_last, checkpoints, negative);
        parallel_over(s.batch * s.channels, s.length * s.states, [&](int64_t begin, int64_t end) {
          kernels::selective_scan_forward_cpu(f, s, begin, end);
        });
      });
    }
    ctx->saved_data["negative"] = negative;
    ctx->save_for_backward({in[0], in[1], in[2], in[3], in[4], checkpoints});
    return {y, h_last};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const bool negative = ctx->saved_data["negative"].toBool();
    const torch::Tensor& u = saved[0];
    TORCH_CHECK(saved[5].defined(), "selective_scan: backward without the forward's checkpoints");
    for (torch::Tensor& g : grads) g = g.contiguous();
    const SelectiveScanShape s = shape_of(u, saved[2]);
    const auto options = u.options();
    const variable_list out = {
        torch::empty_like(u),
        torch::empty_like(u),
        torch::empty({s.batch, s.channels, s.states}, options),
        torch::empty({s.batch, s.groups(), s.length, s.states}, options),
        torch::empty({s.batch, s.groups(), s.length, s.states}, options),
        torch::empty({s.batch, s.channels, s.states}, options),
        torch::empty({s.batch * s.groups(), kernels::segment_scratch_size(s)}, options)};
    if (u.is_cuda()) {
      const char* message = nullptr;
      check_launch(
          kernels::selective_scan_backward_cuda(backward_args<float>(saved, grads, out, negative),
                                                s, cuda_stream_of(u), &message),
          message, "selective_scan backward");
    } else {
      AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "selective_scan backward", [&] {
        const auto g = backward_args<scalar_t>(saved, grads, out, negative);
        parallel_over(s.batch * s.groups(), s.group * s.length * s.states * 3,
                      [&](int64_t begin, int64_t end) {
                        kernels::selective_scan_backward_cpu(g, s, begin, end);
                      });
      });
    }
    // The partial sums, reduced here in a fixed order: A over the batch, B and C over groups.
    return {out[0], out[1], out[2].sum(0), out[3].sum(1), out[4].sum(1), out[5], {}, {}};
  }
};

}  // namespace

SelectiveScanResult selective_scan(const torch::Tensor& u, const torch::Tensor& delta,
                                   const torch::Tensor& A, const torch::Tensor& B,
                                   const torch::Tensor& C, const torch::Tensor& h0,
                                   bool negative_eigenvalues) {
  if (!kernels_take(u))
    return selective_scan_reference(u, delta, A, B, C, h0, negative_eigenvalues);
  bool wants_grad = false;
  if (torch::GradMode::is_enabled()) {
    for (const torch::Tensor& t : {u, delta, A, B, C, h0}) wants_grad |= t.requires_grad();
  }
  const variable_list out =
      SelectiveScanFunction::apply(u, delta, A, B, C, h0, negative_eigenvalues, wants_grad);
  return {out[0], out[1]};
}

// The reference: the same op composed of libtorch ops. It runs where the kernels do not take
// the tensors (kernels_take) and is what the tests hold the kernels to.
torch::Tensor mamba_transition(const torch::Tensor& delta_A, bool negative_eigenvalues) {
  const torch::Tensor decay = torch::exp(delta_A);
  return negative_eigenvalues ? 2.0 * decay - 1.0 : decay;
}

SelectiveScanResult selective_scan_reference(const torch::Tensor& u, const torch::Tensor& delta,
                                             const torch::Tensor& A, const torch::Tensor& B,
                                             const torch::Tensor& C, const torch::Tensor& h0,
                                             bool negative_eigenvalues) {
  // Transitions and inputs for every step at once, [B, L, d_inner, d_state]; only the
  // recurrence itself has to walk the sequence.
  const torch::Tensor a = mamba_transition(delta.unsqueeze(-1) * A, negative_eigenvalues);
  const torch::Tensor b = (delta * u).unsqueeze(-1) * B.unsqueeze(2);
  torch::Tensor h = h0;
  std::vector<torch::Tensor> states;
  states.reserve(static_cast<size_t>(u.size(1)));
  for (int64_t t = 0; t < u.size(1); ++t) {
    h = a.select(1, t) * h + b.select(1, t);
    states.push_back(h);
  }
  const torch::Tensor y = (torch::stack(states, 1) * C.unsqueeze(2)).sum(-1);
  return {y, h};
}

}  // namespace memscript::ops
