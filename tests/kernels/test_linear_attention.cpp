// The linear-attention kernels on raw buffers: forward against its formula summed out
// explicitly, backward against finite differences, head ranges that must not change a bit,
// and the scalar per-head bodies in float and bf16 (the CUDA kernels run on a GPU in tests/gpu).

#include <catch2/catch.hpp>

#include <string>
#include <utility>

#include "kernel_harness.h"
#include "kernels/linear_attention/linear_attention.h"
#include "matrix_state_support.h"

using namespace memscript::kernels;
using memscript::kernels::test::check_launch_fails;
using memscript::kernels::test::gpu_present;
using memscript::test::to_double;
using memscript::test::to_storage;
using memscript::test::view;

namespace {

struct Case {
  LinearAttentionShape shape;
  double eps;
  std::vector<double> phi_q, phi_k, v, sum, normaliser;         // contiguous, [b, h, t, width]
  std::vector<double> grad_outputs, grad_sum, grad_normaliser;  // weights of the scalar loss
};

Case random_case(LinearAttentionShape shape, unsigned seed) {
  std::mt19937 rng(seed);
  const auto buffer = [&](int64_t size, double low, double high) {
    std::vector<double> x(static_cast<size_t>(size));
    memscript::test::fill_uniform(x, rng, low, high);
    return x;
  };
  const int64_t tokens = shape.head_count() * shape.length;
  Case c{shape, 1e-3, {}, {}, {}, {}, {}, {}, {}, {}};
  c.phi_q = buffer(tokens * shape.key_dim, 0, 1);  // features are ≥ 0
  c.phi_k = buffer(tokens * shape.key_dim, 0, 1);
  c.v = buffer(tokens * shape.value_dim, -2, 2);
  c.sum = buffer(shape.head_count() * shape.matrix_size(), -0.5, 0.5);
  c.normaliser = buffer(shape.head_count() * shape.key_dim, 0, 1);
  c.grad_outputs = buffer(tokens * shape.value_dim, -1, 1);
  c.grad_sum = buffer(shape.head_count() * shape.matrix_size(), -1, 1);
  c.grad_normaliser = buffer(shape.head_count() * shape.key_dim, -1, 1);
  return c;
}

template <typename T>
struct Buffers {
  using Acc = AccumulatorOf<T>;
  LinearAttentionShape shape;
  double eps;
  std::vector<T> phi_q, phi_k, v, grad_outputs;
  std::vector<Acc> sum, normaliser, grad_sum, grad_normaliser;
  std::vector<T> outputs, grad_phi_q, grad_phi_k, grad_v;
  std::vector<Acc> sum_out, normaliser_out, denominators, grad_sum_in, grad_normaliser_in,
      workspace;

  explicit Buffers(const Case& c)
      : shape(c.shape),
        eps(c.eps),
        phi_q(to_storage<T>(c.phi_q)),
        phi_k(to_storage<T>(c.phi_k)),
        v(to_storage<T>(c.v)),
        grad_outputs(to_storage<T>(c.grad_outputs)),
        sum(c.sum.begin(), c.sum.end()),
        normaliser(c.normaliser.begin(), c.normaliser.end()),
        grad_sum(c.grad_sum.begin(), c.grad_sum.end()),
        grad_normaliser(c.grad_normaliser.begin(), c.grad_normaliser.end()),
        outputs(v.size()),
        grad_phi_q(phi_q.size()),
        grad_phi_k(phi_k.size()),
        grad_v(v.size()),
        sum_out(sum.size()),
        normaliser_out(normaliser.size()),
        denominators(static_cast<size_t>(shape.head_count() * shape.length)),
        grad_sum_in(sum.size()),
        grad_normaliser_in(normaliser.size()),
        workspace(static_cast<size_t>(shape.head_count() * shape.workspace_per_head())) {}

  LinearAttentionForward<T> forward() {
    const int64_t h = shape.heads, l = shape.length;
    return {view(std::as_const(phi_q), h, l, shape.key_dim),
            view(std::as_const(phi_k), h, l, shape.key_dim),
            view(std::as_const(v), h, l, shape.value_dim),
            sum.data(),
            normaliser.data(),
            view(outputs, h, l, shape.value_dim),
            sum_out.data(),
            normaliser_out.data(),
            denominators.data(),
            static_cast<Acc>(eps),
            shape};
  }

  LinearAttentionBackward<T> backward() {
    const int64_t h = shape.heads, l = shape.length;
    return {view(std::as_const(phi_q), h, l, shape.key_dim),
            view(std::as_const(phi_k), h, l, shape.key_dim),
            view(std::as_const(v), h, l, shape.value_dim),
            view(std::as_const(outputs), h, l, shape.value_dim),
            sum.data(),
            normaliser.data(),
            denominators.data(),
            view(std::as_const(grad_outputs), h, l, shape.value_dim),
            grad_sum.data(),
            grad_normaliser.data(),
            view(grad_phi_q, h, l, shape.key_dim),
            view(grad_phi_k, h, l, shape.key_dim),
            view(grad_v, h, l, shape.value_dim),
            grad_sum_in.data(),
            grad_normaliser_in.data(),
            workspace.data(),
            shape};
  }

  // The CPU kernels; the backward's parameters from backward(), or given (some inputs left out),
  // as for run_emulated.
  void run_cpu() { run_cpu(backward()); }
  void run_cpu(const LinearAttentionBackward<T>& b) {
    linear_attention_forward_cpu(forward(), 0, shape.head_count());
    linear_attention_backward_cpu(b, 0, shape.head_count());
  }

  // The scalar bodies, one head at a time (whose bits the CPU gives; the CUDA kernels spread
  // a head's rows and columns over a block, checked on a GPU by tests/gpu).
  void run_emulated() { run_emulated(backward()); }
  void run_emulated(const LinearAttentionBackward<T>& b) {
    const LinearAttentionForward<T> f = forward();
    for (int64_t head = 0; head < shape.head_count(); ++head) {
      linear_attention_forward_head(f, head);
      linear_attention_backward_head(b, head);
    }
  }

  // Every output and gradient, in double.
  std::vector<std::vector<double>> results() const {
    return {to_double(outputs),     to_double(sum_out),           to_double(normaliser_out),
            to_double(grad_phi_q),  to_double(grad_phi_k),        to_double(grad_v),
            to_double(grad_sum_in), to_double(grad_normaliser_in)};
  }
};

// o_t = S_tᵀ φq_t / (z_tᵀ φq_t + eps) with S_t, z_t summed from scratch for every t, and the
// loss Σ w_o·o + Σ w_S·S_L + Σ w_z·z_L.
struct Written {
  std::vector<double> outputs, sum, normaliser;
  double loss;
};

Written written_out(const Case& c) {
  const LinearAttentionShape& s = c.shape;
  const int64_t dk = s.key_dim, dv = s.value_dim;
  Written w{std::vector<double>(c.v.size()), c.sum, c.normaliser, 0};
  for (int64_t head = 0; head < s.head_count(); ++head) {
    for (int64_t t = 0; t < s.length; ++t) {
      const size_t token = static_cast<size_t>(head * s.length + t);
      std::vector<double> S(c.sum.begin() + head * s.matrix_size(),
                            c.sum.begin() + (head + 1) * s.matrix_size());
      std::vector<double> z(c.normaliser.begin() + head * dk,
                            c.normaliser.begin() + (head + 1) * dk);
      for (int64_t tau = 0; tau <= t; ++tau) {
        const size_t past = static_cast<size_t>(head * s.length + tau);
        for (int64_t a = 0; a < dk; ++a) {
          z[a] += c.phi_k[past * dk + a];
          for (int64_t j = 0; j < dv; ++j)
            S[a * dv + j] += c.phi_k[past * dk + a] * c.v[past * dv + j];
        }
      }
      double denominator = c.eps;
      for (int64_t a = 0; a < dk; ++a) denominator += z[a] * c.phi_q[token * dk + a];
      for (int64_t j = 0; j < dv; ++j) {
        double numerator = 0;
        for (int64_t a = 0; a < dk; ++a) numerator += S[a * dv + j] * c.phi_q[token * dk + a];
        w.outputs[token * dv + j] = numerator / denominator;
        w.loss += c.grad_outputs[token * dv + j] * numerator / denominator;
      }
      if (t == s.length - 1) {
        std::copy(S.begin(), S.end(), w.sum.begin() + head * s.matrix_size());
        std::copy(z.begin(), z.end(), w.normaliser.begin() + head * dk);
      }
    }
  }
  for (size_t n = 0; n < w.sum.size(); ++n) w.loss += c.grad_sum[n] * w.sum[n];
  for (size_t n = 0; n < w.normaliser.size(); ++n) w.loss += c.grad_normaliser[n] * w.normaliser[n];
  return w;
}

void check_gradient(const Case& c, std::vector<double> Case::*input,
                    const std::vector<double>& grad, const std::string& name) {
  memscript::test::check_finite_differences(c, input, grad, name,
                                            [](const Case& x) { return written_out(x).loss; });
}

const LinearAttentionShape kShapes[] = {{1, 1, 1, 3, 2}, {2, 3, 7, 4, 3}, {1, 2, 9, 2, 5}};

}  // namespace

TEST_CASE("linear-attention kernel forward matches its formula summed out per token") {
  for (const LinearAttentionShape& shape : kShapes) {
    const Case c = random_case(shape, 1);
    Buffers<double> run(c);
    run.run_cpu();
    const Written expected = written_out(c);
    for (size_t n = 0; n < expected.outputs.size(); ++n)
      REQUIRE(run.outputs[n] == Approx(expected.outputs[n]).margin(1e-12));
    for (size_t n = 0; n < expected.sum.size(); ++n)
      REQUIRE(run.sum_out[n] == Approx(expected.sum[n]).margin(1e-12));
    for (size_t n = 0; n < expected.normaliser.size(); ++n)
      REQUIRE(run.normaliser_out[n] == Approx(expected.normaliser[n]).margin(1e-12));
  }
}

TEST_CASE("linear-attention kernel backward matches finite differences of every input") {
  for (const LinearAttentionShape& shape : kShapes) {
    INFO("length " << shape.length);
    const Case c = random_case(shape, 2);
    Buffers<double> run(c);
    run.run_cpu();
    check_gradient(c, &Case::phi_q, run.grad_phi_q, "phi_q");
    check_gradient(c, &Case::phi_k, run.grad_phi_k, "phi_k");
    check_gradient(c, &Case::v, run.grad_v, "v");
    check_gradient(c, &Case::sum, run.grad_sum_in, "initial sum");
    check_gradient(c, &Case::normaliser, run.grad_normaliser_in, "initial normaliser");
  }
}

TEST_CASE("linear-attention kernels split into head ranges give the same bits as one range") {
  const Case c = random_case({3, 2, 6, 3, 4}, 3);
  Buffers<double> whole(c), split(c);
  whole.run_cpu();
  for (int64_t head = split.shape.head_count() - 1; head >= 0; --head) {
    linear_attention_forward_cpu(split.forward(), head, head + 1);
    linear_attention_backward_cpu(split.backward(), head, head + 1);
  }
  CHECK(split.results() == whole.results());
}

namespace {

// The CPU kernels and the scalar bodies on the same case, the backward's parameters passed
// through `edit` first (to leave out inputs), give the same bits.
template <typename T, typename Edit>
void check_cpu_gives_scalar_bits(const Case& c, Edit edit) {
  Buffers<T> cpu(c), scalar(c);
  LinearAttentionBackward<T> on_cpu = cpu.backward(), on_scalar = scalar.backward();
  edit(on_cpu);
  edit(on_scalar);
  cpu.run_cpu(on_cpu);
  scalar.run_emulated(on_scalar);
  CHECK(scalar.results() == cpu.results());
}
template <typename T>
void check_cpu_gives_scalar_bits(const Case& c) {
  check_cpu_gives_scalar_bits<T>(c, [](LinearAttentionBackward<T>&) {});
}

}  // namespace

TEST_CASE("linear-attention scalar bodies, one head at a time, match the CPU in float") {
  check_cpu_gives_scalar_bits<float>(random_case({7, 11, 5, 3, 4}, 4));
}

TEST_CASE("linear-attention kernels with head sizes fixed at compile time give the run-time bits") {
  // The CPU takes its compiled paths for these sizes; the scalar bodies loop over sizes
  // read at run time. Same arithmetic in the same order: the same bits.
  for (const int64_t d : {4, 8, 16}) {
    INFO("head size " << d);
    check_cpu_gives_scalar_bits<float>(random_case({2, 3, 11, d, d}, 8));
  }
}

TEST_CASE("linear-attention CPU kernels give the scalar bodies' bits at wide and uneven heads") {
  // The CPU loops over outputs in vector lanes; Zoology's one head of 128 is not a compiled
  // size, and uneven sizes leave vector tails.
  for (const auto& [dk, dv] : {std::pair<int64_t, int64_t>{128, 128}, {33, 20}, {5, 64}}) {
    INFO("head " << dk << " x " << dv);
    const Case c = random_case({2, 1, 9, dk, dv}, 10);
    check_cpu_gives_scalar_bits<float>(c);
    check_cpu_gives_scalar_bits<double>(c);
  }
}

TEST_CASE("linear-attention CPU kernels give the scalar bodies' bits when gradients are left out") {
  const Case c = random_case({2, 2, 7, 9, 12}, 11);
  check_cpu_gives_scalar_bits<float>(c, [](LinearAttentionBackward<float>& p) {
    p.grad_outputs = {};  // only the final state was used
  });
  check_cpu_gives_scalar_bits<float>(c, [](LinearAttentionBackward<float>& p) {
    p.grad_sum_out = nullptr;  // only the outputs were used
    p.grad_normaliser_out = nullptr;
  });
}

TEST_CASE(
    "linear-attention scalar bodies in bf16 keep a float state and follow the float kernels") {
  Case c = random_case({2, 2, 8, 4, 3}, 5);
  Buffers<Bf16> bf16(c);
  bf16.run_emulated();
  for (auto input : {&Case::phi_q, &Case::phi_k, &Case::v, &Case::grad_outputs})
    (c.*input) = to_double(to_storage<Bf16>(c.*input));
  Buffers<float> reference(c);
  reference.run_cpu();
  memscript::test::check_all_close(bf16.results(), reference.results(), 2e-2);
  CHECK(bf16.sum_out == reference.sum_out);
}

TEST_CASE("without a GPU the linear-attention CUDA launchers fail with a message") {
  if (gpu_present()) return;
  Buffers<float> run(random_case({1, 1, 2, 2, 2}, 6));
  check_launch_fails([&](const char** message) {
    return linear_attention_forward_cuda(run.forward(), nullptr, message);
  });
  check_launch_fails([&](const char** message) {
    return linear_attention_backward_cuda(run.backward(), nullptr, message);
  });
}
