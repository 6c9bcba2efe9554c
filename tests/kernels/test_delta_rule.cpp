// The delta-rule kernels on raw buffers: forward against the recurrence written out as
// matrices, backward against finite differences, checkpoint spacing and row/head ranges that
// must not change a bit, the scalar bodies (the CUDA forward's per block and thread) and the CUDA
// backward's block phases, thread by thread.

#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "kernel_harness.h"
#include "kernels/common/lane_prefetch.h"
#include "kernels/delta_rule/delta_rule.h"
#include "matrix_state_support.h"

using namespace memscript::kernels;
using memscript::kernels::test::check_launch_fails;
using memscript::kernels::test::gpu_present;
using memscript::test::to_double;
using memscript::test::to_storage;
using memscript::test::view;

namespace {

// Inputs in double; each run converts them to the element type under test.
struct Case {
  DeltaRuleShape shape;
  bool decay;
  std::vector<double> q, k, v, beta, alpha, state;  // contiguous, [b, h, t, width]
  std::vector<double> grad_outputs, grad_state;     // the weights of the scalar loss
};

Case random_case(DeltaRuleShape shape, bool decay, unsigned seed) {
  std::mt19937 rng(seed);
  const auto sequence = [&](int64_t width, double low, double high) {
    std::vector<double> x(static_cast<size_t>(shape.batch * shape.heads * shape.length * width));
    memscript::test::fill_uniform(x, rng, low, high);
    return x;
  };
  Case c{shape, decay, {}, {}, {}, {}, {}, {}, {}, {}};
  c.q = sequence(shape.key_dim, -1, 1);
  c.k = sequence(shape.key_dim, -1, 1);
  for (size_t token = 0; token < c.k.size(); token += static_cast<size_t>(shape.key_dim)) {
    double norm = 0;
    for (int64_t j = 0; j < shape.key_dim; ++j) norm += c.k[token + j] * c.k[token + j];
    for (int64_t j = 0; j < shape.key_dim; ++j) c.k[token + j] /= std::sqrt(norm);
  }
  c.v = sequence(shape.value_dim, -2, 2);
  c.beta = sequence(1, 0.1, 1.9);  // both signs of the eigenvalue 1 − β
  c.alpha = sequence(shape.decay_width(), 0.5, 1.0);
  c.grad_outputs = sequence(shape.value_dim, -1, 1);
  c.state.resize(static_cast<size_t>(shape.head_count() * shape.matrix_size()));
  memscript::test::fill_uniform(c.state, rng, -0.5, 0.5);
  c.grad_state.resize(c.state.size());
  memscript::test::fill_uniform(c.grad_state, rng, -1, 1);
  return c;
}

// One case's buffers in element type T, and the kernels' parameters over them.
template <typename T>
struct Buffers {
  using Acc = AccumulatorOf<T>;
  DeltaRuleShape shape;
  bool decay;
  std::vector<T> q, k, v, beta, alpha, grad_outputs;
  std::vector<Acc> state, grad_state;
  std::vector<T> outputs, grad_q, grad_k, grad_v, grad_beta, grad_alpha;
  std::vector<Acc> state_out, checkpoints, grad_state_in, workspace;

  explicit Buffers(const Case& c)
      : shape(c.shape),
        decay(c.decay),
        q(to_storage<T>(c.q)),
        k(to_storage<T>(c.k)),
        v(to_storage<T>(c.v)),
        beta(to_storage<T>(c.beta)),
        alpha(to_storage<T>(c.alpha)),
        grad_outputs(to_storage<T>(c.grad_outputs)),
        state(c.state.begin(), c.state.end()),
        grad_state(c.grad_state.begin(), c.grad_state.end()),
        outputs(v.size()),
        grad_q(q.size()),
        grad_k(k.size()),
        grad_v(v.size()),
        grad_beta(beta.size()),
        grad_alpha(alpha.size()),
        state_out(state.size()),
        checkpoints(static_cast<size_t>(shape.head_count() * shape.checkpoint_count() *
                                        shape.matrix_size())),
        grad_state_in(state.size()),
        workspace(static_cast<size_t>(shape.head_count() * shape.workspace_per_head())) {}

  DeltaRuleForward<T> forward() {
    const int64_t dk = shape.key_dim, dv = shape.value_dim;
    return {view(std::as_const(q), shape.heads, shape.length, dk),
            view(std::as_const(k), shape.heads, shape.length, dk),
            view(std::as_const(v), shape.heads, shape.length, dv),
            view(std::as_const(beta), shape.heads, shape.length, 1),
            decay ? view(std::as_const(alpha), shape.heads, shape.length, shape.decay_width())
                  : SequenceView<const T>{},
            state.data(),
            view(outputs, shape.heads, shape.length, dv),
            state_out.data(),
            checkpoints.data(),
            shape};
  }

  DeltaRuleBackward<T> backward() {
    const int64_t dk = shape.key_dim, dv = shape.value_dim;
    return {view(std::as_const(q), shape.heads, shape.length, dk),
            view(std::as_const(k), shape.heads, shape.length, dk),
            view(std::as_const(v), shape.heads, shape.length, dv),
            view(std::as_const(beta), shape.heads, shape.length, 1),
            decay ? view(std::as_const(alpha), shape.heads, shape.length, shape.decay_width())
                  : SequenceView<const T>{},
            checkpoints.data(),
            view(std::as_const(grad_outputs), shape.heads, shape.length, dv),
            grad_state.data(),
            view(grad_q, shape.heads, shape.length, dk),
            view(grad_k, shape.heads, shape.length, dk),
            view(grad_v, shape.heads, shape.length, dv),
            view(grad_beta, shape.heads, shape.length, 1),
            decay ? view(grad_alpha, shape.heads, shape.length, shape.decay_width())
                  : SequenceView<T>{},
            grad_state_in.data(),
            workspace.data(),
            shape};
  }

  void run_cpu() {
    delta_rule_forward_cpu(forward(), 0, shape.head_count());
    delta_rule_backward_cpu(backward(), 0, shape.head_count());
  }

  // The CUDA forward's per-thread body over every block and thread, with the key size compiled
  // in where the kernel has it.
  template <bool Erase, bool KeyDecay>
  void emulate_forward() {
    const DeltaRuleForward<T> f = forward();
    memscript::test::emulate_launch(
        delta_rule_blocks(shape.row_count()), kDeltaRuleThreadsPerBlock,
        [&](int64_t block, int64_t thread) {
          with_fixed_dim(shape.key_dim, [&](auto size) {
            delta_rule_forward_thread<Erase, KeyDecay, T, decltype(size)::value>(
                f, block, thread, kDeltaRuleThreadsPerBlock);
          });
        });
  }

  // The scalar bodies: the CUDA forward's, and the backward one head at a time.
  void run_emulated() {
    const DeltaRuleBackward<T> b = backward();
    with_update(shape, [&]<bool Erase, bool KeyDecay>() {
      emulate_forward<Erase, KeyDecay>();
      for (int64_t head = 0; head < shape.head_count(); ++head)
        delta_rule_backward_head<Erase, KeyDecay>(b, head);
    });
  }

  // The CUDA forward as above; the CUDA backward's block phases (delta_rule.h) for every head,
  // each phase on `threads` threads one after the other, as the kernel's barriers order them.
  void run_block_emulated(int64_t threads) {
    using Acc = AccumulatorOf<T>;
    const DeltaRuleBackward<T> b = backward();
    std::vector<Acc> shared(static_cast<size_t>(DeltaRuleBlockShared(shape).size(shape)));
    const auto each_thread = [&](const auto& body) {
      for (int64_t thread = 0; thread < threads; ++thread) body(thread);
    };
    with_update(shape, [&]<bool Erase, bool KeyDecay>() {
      emulate_forward<Erase, KeyDecay>();
      for (int64_t head = 0; head < shape.head_count(); ++head) {
        // Poisoned: a term the rows phase did not write would show in the sums.
        std::fill(shared.begin(), shared.end(), Acc(1e6));
        each_thread([&](int64_t n) { delta_rule_block_start(b, head, n, threads); });
        for (int64_t segment = shape.checkpoint_count() - 1; segment >= 0; --segment) {
          const int64_t start = segment * shape.checkpoint_every;
          each_thread([&](int64_t n) {
            delta_rule_block_recompute<Erase, KeyDecay>(b, head, segment, n, threads);
          });
          for (int64_t t = shape.segment_end(start) - 1; t >= start; --t) {
            each_thread([&](int64_t n) {
              delta_rule_block_rows<Erase, KeyDecay>(b, head, start, t, n, threads, shared.data());
            });
            each_thread([&](int64_t n) {
              delta_rule_block_columns<KeyDecay>(b, head, t, n, threads, shared.data());
            });
          }
        }
        each_thread([&](int64_t n) { delta_rule_block_finish(b, head, n, threads); });
      }
    });
  }

  // Every output and gradient, in double.
  std::vector<std::vector<double>> results() const {
    return {to_double(outputs),    to_double(state_out),    to_double(grad_q),
            to_double(grad_k),     to_double(grad_v),       to_double(grad_beta),
            to_double(grad_alpha), to_double(grad_state_in)};
  }
};

// The recurrence as matrices, S_t = α_t S_{t-1} (I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ (without
// erase: α_t S_{t-1} + β_t v_t k_tᵀ; with a key decay S_{t-1} diag(α_t) in place of α_t S_{t-1}),
// and the scalar loss Σ w_o·o + Σ w_S·S_L whose gradients the
// backward computes.
struct Written {
  std::vector<double> outputs, state;
  double loss;
};

Written written_out(const Case& c) {
  const DeltaRuleShape& s = c.shape;
  const int64_t dk = s.key_dim, dv = s.value_dim;
  Written w{std::vector<double>(c.v.size()), c.state, 0};
  for (int64_t head = 0; head < s.head_count(); ++head) {
    double* S = w.state.data() + head * s.matrix_size();
    for (int64_t t = 0; t < s.length; ++t) {
      const size_t token = static_cast<size_t>(head * s.length + t);
      const double* k = &c.k[token * dk];
      const double beta = c.beta[token];
      const auto alpha = [&](int64_t m) {  // α_m: one per token, or one per key column
        if (!c.decay) return 1.0;
        return s.key_decay ? c.alpha[token * dk + m] : c.alpha[token];
      };
      std::vector<double> next(static_cast<size_t>(s.matrix_size()));
      for (int64_t i = 0; i < dv; ++i) {
        for (int64_t j = 0; j < dk; ++j) {
          double x = 0;  // (S diag(α) (I − β k kᵀ))_ij, or (S diag(α))_ij
          for (int64_t m = 0; m < dk; ++m) {
            x += S[i * dk + m] * alpha(m) *
                 ((m == j ? 1.0 : 0.0) - (s.erase ? beta * k[m] * k[j] : 0.0));
          }
          next[i * dk + j] = x + beta * c.v[token * dv + i] * k[j];
        }
      }
      std::copy(next.begin(), next.end(), S);
      for (int64_t i = 0; i < dv; ++i) {
        double o = 0;
        for (int64_t j = 0; j < dk; ++j) o += S[i * dk + j] * c.q[token * dk + j];
        w.outputs[token * dv + i] = o;
        w.loss += c.grad_outputs[token * dv + i] * o;
      }
    }
  }
  for (size_t n = 0; n < w.state.size(); ++n) w.loss += c.grad_state[n] * w.state[n];
  return w;
}

void check_gradient(const Case& c, std::vector<double> Case::*input,
                    const std::vector<double>& grad, const std::string& name) {
  memscript::test::check_finite_differences(c, input, grad, name,
                                            [](const Case& x) { return written_out(x).loss; });
}

// The CPU kernels against the scalar bodies (the CUDA forward's per thread, the backward per
// head) on one case: the same bits.
template <typename T>
void check_cpu_gives_scalar_bits(const Case& c) {
  Buffers<T> cpu(c), emulated(c);
  cpu.run_cpu();
  emulated.run_emulated();
  CHECK(emulated.results() == cpu.results());
}

const DeltaRuleShape kShapes[] = {
    {1, 1, 1, 3, 2, 1},   // one token
    {2, 3, 7, 4, 3, 3},   // segments of 3, the last one short
    {1, 2, 9, 2, 5, 9},   // one segment
    {3, 1, 5, 3, 3, 1},   // a checkpoint per token
    {1, 2, 6, 6, 19, 4},  // a large state: rows side by side, the last group of rows partial
};

}  // namespace

TEST_CASE("delta-rule kernel forward matches the recurrence written out as matrices") {
  const bool erase = GENERATE(true, false);
  for (DeltaRuleShape shape : kShapes) {
    shape.erase = erase;
    for (const int decay_kind : {0, 1, 2}) {  // none, one per token, one per key column
      const bool decay = decay_kind > 0;
      shape.key_decay = decay_kind == 2;
      INFO("length " << shape.length << ", decay " << decay_kind << ", erase " << erase);
      const Case c = random_case(shape, decay, 1);
      Buffers<double> run(c);
      run.run_cpu();
      const Written expected = written_out(c);
      for (size_t n = 0; n < expected.outputs.size(); ++n)
        REQUIRE(run.outputs[n] == Approx(expected.outputs[n]).margin(1e-12));
      for (size_t n = 0; n < expected.state.size(); ++n)
        REQUIRE(run.state_out[n] == Approx(expected.state[n]).margin(1e-12));
    }
  }
}

TEST_CASE("delta-rule kernel backward matches finite differences of every input") {
  const bool erase = GENERATE(true, false);
  for (DeltaRuleShape shape : kShapes) {
    shape.erase = erase;
    for (const int decay_kind : {0, 1, 2}) {  // none, one per token, one per key column
      const bool decay = decay_kind > 0;
      shape.key_decay = decay_kind == 2;
      INFO("length " << shape.length << ", decay " << decay_kind << ", erase " << erase);
      const Case c = random_case(shape, decay, 2);
      Buffers<double> run(c);
      run.run_cpu();
      check_gradient(c, &Case::q, run.grad_q, "q");
      check_gradient(c, &Case::k, run.grad_k, "k");
      check_gradient(c, &Case::v, run.grad_v, "v");
      check_gradient(c, &Case::beta, run.grad_beta, "beta");
      if (decay) check_gradient(c, &Case::alpha, run.grad_alpha, "alpha");
      check_gradient(c, &Case::state, run.grad_state_in, "initial state");
    }
  }
}

TEST_CASE("delta-rule kernels at lengths where they prefetch match the written-out recurrence") {
  // kPrefetchMinLength and beyond: 20 heads (a full group and a partial one) forward; the
  // backward through finite differences of β and v on two heads.
  REQUIRE(600 >= memscript::kernels::kPrefetchMinLength);
  const bool key_decay = GENERATE(false, true);
  const Case c = random_case({5, 4, 600, 3, 4, 25, true, key_decay}, true, 5);
  Buffers<double> run(c);
  run.run_cpu();
  const Written expected = written_out(c);
  for (size_t n = 0; n < expected.outputs.size(); ++n)
    REQUIRE(run.outputs[n] == Approx(expected.outputs[n]).margin(1e-12));
  const Case small = random_case({1, 2, 600, 3, 2, 25, true, key_decay}, true, 6);
  Buffers<double> grads(small);
  grads.run_cpu();
  check_gradient(small, &Case::beta, grads.grad_beta, "beta");
  check_gradient(small, &Case::v, grads.grad_v, "v");
  check_gradient(small, &Case::alpha, grads.grad_alpha, "alpha");
}

TEST_CASE("delta-rule gradients do not depend on the checkpoint spacing, to the bit") {
  const bool key_decay = GENERATE(false, true);
  const Case base = random_case({2, 2, 11, 3, 4, 1, true, key_decay}, true, 3);
  Buffers<double> every_token(base);
  every_token.run_cpu();
  for (const int64_t every : {2, 3, 4, 10, 11, 20}) {
    INFO("checkpoint every " << every);
    Case c = base;
    c.shape.checkpoint_every = every;
    Buffers<double> run(c);
    run.run_cpu();
    CHECK(run.results() == every_token.results());
  }
}

TEST_CASE("delta-rule kernels split into head ranges give the same bits as one range") {
  // 20 heads: a full group of heads stepped side by side and a partial one, split every 3 heads.
  const bool key_decay = GENERATE(false, true);
  const Case c = random_case({5, 4, 6, 3, 4, 2, true, key_decay}, true, 4);
  Buffers<double> whole(c), split(c);
  whole.run_cpu();
  const DeltaRuleForward<double> f = split.forward();
  for (int64_t begin = 0; begin < c.shape.head_count(); begin += 3)
    delta_rule_forward_cpu(f, begin, std::min(begin + 3, c.shape.head_count()));
  const DeltaRuleBackward<double> b = split.backward();
  for (int64_t head = c.shape.head_count() - 1; head >= 0; --head)
    delta_rule_backward_cpu(b, head, head + 1);
  CHECK(split.results() == whole.results());
}

TEST_CASE("delta-rule scalar bodies (the CUDA forward's over blocks x threads) match the CPU") {
  // More rows than a block holds and a partial last block, to exercise the guards.
  const bool erase = GENERATE(true, false), key_decay = GENERATE(false, true);
  Case c = random_case({5, 3, 9, 4, 10, 4, erase, key_decay}, true, 5);
  REQUIRE(c.shape.row_count() > kDeltaRuleThreadsPerBlock);
  check_cpu_gives_scalar_bits<float>(c);
}

TEST_CASE(
    "delta-rule kernels with head sizes fixed at compile time give the run-time loop's bits") {
  // The CPU takes its compiled paths for these sizes; the scalar bodies loop over sizes
  // read at run time. Same arithmetic in the same order: the same bits.
  for (const int64_t d : {4, 8, 16, 32, 64}) {
    INFO("head size " << d);
    // both updates and both decays, small and large states
    Case c = random_case({2, 3, 11, d, d, 4, d != 8, d != 4}, true, 7);
    check_cpu_gives_scalar_bits<float>(c);
  }
}

TEST_CASE("delta-rule kernels on large states (rows side by side) give the scalar bodies' bits") {
  // States over kLanesMaxMatrix numbers: the CPU steps a head's rows sixteen at a time, one row
  // per lane, and adds the sums over rows lane after lane. Value sizes below, at and past a
  // group of sixteen, keys below, at and past whole blocks of the eight columns those sums
  // transpose at a time, checkpoints short of the length; every update and decay, float and
  // double.
  const bool erase = GENERATE(true, false);
  const int decay_kind = GENERATE(0, 1, 2);  // none, one per token, one per key column
  struct Size {
    int64_t dk, dv, every;
  };
  for (const Size size : {Size{9, 12, 4}, Size{24, 16, 3}, Size{5, 37, 2}, Size{33, 20, 5}}) {
    INFO("dk " << size.dk << ", dv " << size.dv << ", decay " << decay_kind << ", erase " << erase);
    const DeltaRuleShape shape{2, 2, 10, size.dk, size.dv, size.every, erase, decay_kind == 2};
    REQUIRE(shape.matrix_size() > 64);
    const Case c = random_case(shape, decay_kind > 0, 8);
    check_cpu_gives_scalar_bits<float>(c);
    check_cpu_gives_scalar_bits<double>(c);
  }
}

TEST_CASE("the CUDA backward's block phases give the CPU's gradients on any block size") {
  // The kernel's rows interleaved in the workspace and its padded terms in shared memory, run
  // thread after thread: blocks of one thread, of fewer threads than rows (a thread takes rows
  // i, i + threads, …) and of more. Every sum runs in the CPU's order, so the bits are the
  // CPU's, except a uniform decay's ∂α: the block adds each row's terms first, then the rows,
  // where the CPU keeps one running sum.
  const bool erase = GENERATE(true, false);
  const int decay_kind = GENERATE(0, 1, 2);  // none, one per token, one per key column
  struct Size {
    int64_t dk, dv, every;
  };
  for (const Size size : {Size{3, 2, 1}, Size{4, 10, 4}, Size{9, 12, 3}, Size{16, 5, 20}}) {
    const DeltaRuleShape shape{2, 3, 10, size.dk, size.dv, size.every, erase, decay_kind == 2};
    const Case c = random_case(shape, decay_kind > 0, 9);
    for (const int64_t threads : {1, 3, 32}) {
      INFO("dk " << size.dk << ", dv " << size.dv << ", decay " << decay_kind << ", erase " << erase
                 << ", " << threads << " threads");
      Buffers<float> cpu(c), block(c);
      cpu.run_cpu();
      block.run_block_emulated(threads);
      if (decay_kind == 1) {
        memscript::test::check_all_close({to_double(block.grad_alpha)}, {to_double(cpu.grad_alpha)},
                                         1e-5);
        block.grad_alpha = cpu.grad_alpha;
      }
      CHECK(block.results() == cpu.results());
    }
  }
}

TEST_CASE("delta-rule scalar bodies in bf16 keep a float state and follow the float kernels") {
  const bool key_decay = GENERATE(false, true);
  Case c = random_case({2, 2, 8, 4, 3, 3, true, key_decay}, true, 6);
  Buffers<Bf16> bf16(c);
  bf16.run_emulated();
  // The float run sees the same bf16-rounded inputs, so only rounding of results differs.
  for (auto input : {&Case::q, &Case::k, &Case::v, &Case::beta, &Case::alpha, &Case::grad_outputs})
    (c.*input) = to_double(to_storage<Bf16>(c.*input));
  Buffers<float> reference(c);
  reference.run_cpu();
  memscript::test::check_all_close(bf16.results(), reference.results(), 1e-2);
  // The state itself is float in both: only the inputs' rounding separates them.
  CHECK(bf16.state_out == reference.state_out);
}

TEST_CASE("without a GPU the delta-rule CUDA launchers fail with a message") {
  if (gpu_present()) return;
  Buffers<float> run(random_case({1, 1, 2, 2, 2, 1}, false, 7));
  check_launch_fails([&](const char** message) {
    return delta_rule_forward_cuda(run.forward(), nullptr, message);
  });
  check_launch_fails([&](const char** message) {
    return delta_rule_backward_cuda(run.backward(), nullptr, message);
  });
}
