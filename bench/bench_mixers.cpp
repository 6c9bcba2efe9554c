// Training-step speed of every mixer: ms per step (forward + backward + AdamW) with
// impl = "fused" and impl = "reference" side by side; time against length for the recurrent
// mixers; and, when a Python with torch is given, the same step written by hand in PyTorch
// eager (bench/pytorch_reference.py). Run with `make bench`; `--help` lists the options.

#include <ATen/Parallel.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cxxopts.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <tuple>

#include "bench_model.h"
#include "bench_util.h"
#include "runtime/batch.h"
#include "runtime/device.h"
#include "runtime/memory.h"
#include "runtime/optim.h"
#include "runtime/tensor_cache.h"

using namespace memscript;
using namespace memscript::bench;

namespace {

// pytorch_reference.py exits with this when `import torch` fails (CTest's skip code).
constexpr int kTorchMissing = 77;

struct Settings {
  std::vector<std::string> mixers;
  std::vector<std::string> presets;
  std::vector<int64_t> lengths;
  int64_t batch = 32;
  Widths widths;  // the presets' d_model and heads replaced where set
  int threads = 1;
  std::string device = "cpu";  // "cpu" or "cuda": where the models and batches live
  Budget budget;
  bool steps = true;
  bool reference = true;  // the step table's reference column
  bool scaling = true;
  bool pytorch_asked = true;  // the part was asked for
  bool pytorch = true;        // ... and can run
  std::string scaling_preset = "seed-mini";
  std::vector<int64_t> scaling_lengths;
  std::string python;
  std::string script;
  std::string jsonl;
  bool require_pytorch = false;  // exit with kTorchMissing when Python has no torch
};

// One measured case; the key of the cache that lets the tables share measurements.
struct Case {
  std::string mixer;
  std::string preset;
  int64_t length;
  std::string impl;

  auto key() const { return std::tie(mixer, preset, length, impl); }
  bool operator<(const Case& other) const { return key() < other.key(); }
};

struct Measurement {
  double ms = 0;
  int repeats = 0;
  int64_t parameters = 0;
  std::string ran;        // the impl the mixers report having run
  nlohmann::json config;  // the decoder's resolved configuration
};

class Bench {
 public:
  explicit Bench(Settings settings) : settings_(std::move(settings)) {
    if (!settings_.jsonl.empty() && settings_.jsonl != "-") jsonl_.open(settings_.jsonl);
  }

  const Settings& settings() const { return settings_; }

  // Measures once per case; later tables reuse the number.
  const Measurement& measure(const Case& c, int64_t batch) {
    const auto found = cache_.find(c);
    if (found != cache_.end()) return found->second;
    Measurement m = time_training_step(c, batch);
    record({{"kind", "step"},
            {"mixer", c.mixer},
            {"preset", c.preset},
            {"length", c.length},
            {"batch", batch},
            {"threads", settings_.threads},
            {"device", settings_.device},
            {"impl", c.impl},
            {"ran", m.ran},
            {"parameters", m.parameters},
            {"d_model", m.config.at("d_model")},
            {"heads", m.config.at("heads")},
            {"ms", m.ms},
            {"repeats", m.repeats}});
    return cache_.emplace(c, std::move(m)).first->second;
  }

  // One machine-readable line per measurement, to the --jsonl file (or stdout for "-").
  void record(const nlohmann::json& row) {
    if (settings_.jsonl == "-") std::printf("%s\n", row.dump().c_str());
    if (jsonl_.is_open()) jsonl_ << row.dump() << "\n" << std::flush;
  }

  bool failed = false;

 private:
  Measurement time_training_step(const Case& c, int64_t batch_size) {
    BenchModel built = build_model(c.mixer, c.preset, c.impl, c.length, settings_.widths);
    DecoderImpl& model = *built.model;
    const torch::Device device(settings_.device);
    model.to(device);
    model.train();
    auto optimizer = OptimizerSpec{}.make(model.parameters());
    const TensorBatch host =
        to_tensors(sample_host_batch(*built.task, batch_size, {c.length, c.length}, 1));
    const torch::Tensor inputs = host.inputs.to(device), targets = host.targets.to(device),
                        mask = host.mask.to(device);
    const Median median = median_within(settings_.budget, [&] {
      optimizer->zero_grad();
      masked_cross_entropy(model.forward(inputs), targets, mask).backward();
      optimizer->step();
      // A CUDA step is queued, not done, when step() returns: the timer must wait for it.
      if (device.is_cuda()) torch::cuda::synchronize();
    });
    return {median.seconds * 1e3, median.repeats, model.num_parameters(), built.impl,
            model.config()};
  }

  Settings settings_;
  std::map<Case, Measurement> cache_;
  std::ofstream jsonl_;
};

// "fused" when the mixers ran what was asked for; marked when they fell back.
std::string impl_note(const Measurement& m, const std::string& asked) {
  return m.ran == asked ? "" : "*";
}

void print_step_table(Bench& bench) {
  const Settings& s = bench.settings();
  std::printf(
      "\n# ms per training step (forward + backward + AdamW) on %s, batch %lld, %d thread(s)\n",
      s.device.c_str(), static_cast<long long>(s.batch), s.threads);
  std::printf("# median of %d..%d timed steps after %d warm-up steps\n", s.budget.min_repeats,
              s.budget.max_repeats, s.budget.warmup);
  if (s.widths.any()) {
    std::string replaced;
    if (s.widths.d_model > 0) replaced += " d_model " + std::to_string(s.widths.d_model);
    if (s.widths.heads > 0) replaced += " heads " + std::to_string(s.widths.heads);
    std::printf("# presets with%s\n", replaced.c_str());
  }
  std::printf("%-17s %-10s %6s %9s %11s %14s %9s\n", "mixer", "preset", "L", "params", "fused ms",
              "reference ms", "ref/fused");
  bool fell_back = false;
  for (const std::string& preset : s.presets) {
    for (const int64_t length : s.lengths) {
      for (const std::string& mixer : s.mixers) {
        const Measurement& fused = bench.measure({mixer, preset, length, "fused"}, s.batch);
        fell_back = fell_back || fused.ran != "fused";
        std::printf("%-17s %-10s %6lld %9lld %10.3f%1s", mixer.c_str(), preset.c_str(),
                    static_cast<long long>(length), static_cast<long long>(fused.parameters),
                    fused.ms, impl_note(fused, "fused").c_str());
        if (s.reference) {
          const Measurement& reference =
              bench.measure({mixer, preset, length, "reference"}, s.batch);
          std::printf(" %14.3f %8.2fx\n", reference.ms, reference.ms / fused.ms);
        } else {
          std::printf(" %14s %9s\n", "-", "-");
        }
        std::fflush(stdout);
      }
    }
  }
  if (fell_back) {
    std::printf(
        "* this build's mixers do not implement impl = \"fused\" (their config() reports no "
        "impl): the column ran the reference\n");
  }
}

void print_scaling_table(Bench& bench) {
  const Settings& s = bench.settings();
  std::printf("\n# time against length (impl = \"fused\"), preset %s, batch %lld: ms per step\n",
              s.scaling_preset.c_str(), static_cast<long long>(s.batch));
  std::printf("%-17s", "mixer");
  for (const int64_t length : s.scaling_lengths)
    std::printf(" %9s", ("L=" + std::to_string(length)).c_str());
  std::printf(" %12s\n", "last/first");
  for (const std::string& mixer : s.mixers) {
    const auto& recurrent = recurrent_mixers();
    if (std::find(recurrent.begin(), recurrent.end(), mixer) == recurrent.end()) continue;
    std::printf("%-17s", mixer.c_str());
    std::vector<double> ms;
    for (const int64_t length : s.scaling_lengths) {
      const Measurement& m = bench.measure({mixer, s.scaling_preset, length, "fused"}, s.batch);
      ms.push_back(m.ms);
      std::printf(" %8.2f%1s", m.ms, impl_note(m, "fused").c_str());
      std::fflush(stdout);
    }
    const double growth = ms.back() / ms.front();
    std::printf(" %11.2fx\n", growth);
    bench.record({{"kind", "scaling"},
                  {"mixer", mixer},
                  {"preset", s.scaling_preset},
                  {"batch", s.batch},
                  {"first_length", s.scaling_lengths.front()},
                  {"last_length", s.scaling_lengths.back()},
                  {"growth", growth}});
  }
  std::printf("# last/first = time(L=%lld) / time(L=%lld); linear in length means %.0fx\n",
              static_cast<long long>(s.scaling_lengths.back()),
              static_cast<long long>(s.scaling_lengths.front()),
              static_cast<double>(s.scaling_lengths.back()) /
                  static_cast<double>(s.scaling_lengths.front()));
}

// The cases pytorch_reference.py should time: each recurrent mixer at each preset and length,
// with memscript's resolved configuration so that both sides build the same model.
nlohmann::json pytorch_cases(Bench& bench) {
  const Settings& s = bench.settings();
  nlohmann::json cases = nlohmann::json::array();
  for (const std::string& preset : s.presets) {
    for (const int64_t length : s.lengths) {
      for (const std::string& mixer : s.mixers) {
        const auto& recurrent = recurrent_mixers();
        if (std::find(recurrent.begin(), recurrent.end(), mixer) == recurrent.end()) continue;
        const Measurement& fused = bench.measure({mixer, preset, length, "fused"}, s.batch);
        cases.push_back({{"mixer", mixer},
                         {"preset", preset},
                         {"length", length},
                         {"batch", s.batch},
                         {"config", fused.config}});
      }
    }
  }
  return cases;
}

// Runs pytorch_reference.py on `cases`; nullopt when Python has no torch.
std::optional<nlohmann::json> run_pytorch(const Settings& s, const nlohmann::json& cases) {
  const auto folder = std::filesystem::temp_directory_path();
  const std::string stem = "memscript-bench-" + std::to_string(::getpid());
  const std::filesystem::path in = folder / (stem + "-cases.json");
  const std::filesystem::path out = folder / (stem + "-pytorch.json");
  std::ofstream(in) << cases.dump();
  std::string command = shell_quote(s.python);
  command += " " + shell_quote(s.script);
  command += " --cases " + shell_quote(in.string());
  command += " --out " + shell_quote(out.string());
  command += " --threads " + std::to_string(s.threads);
  command += " --device " + s.device;
  command += " --warmup " + std::to_string(s.budget.warmup);
  command += " --min-repeats " + std::to_string(s.budget.min_repeats);
  command += " --max-repeats " + std::to_string(s.budget.max_repeats);
  command += " --budget " + std::to_string(s.budget.budget_seconds);
  std::fflush(stdout);
  const int status = std::system(command.c_str());
  std::filesystem::remove(in);
  if (WIFEXITED(status) && WEXITSTATUS(status) == kTorchMissing) return std::nullopt;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("pytorch_reference.py failed: " + command);
  nlohmann::json results = nlohmann::json::parse(std::ifstream(out));
  std::filesystem::remove(out);
  return results;
}

// Returns false when Python has no torch (the comparison is then skipped, loudly).
bool print_pytorch_table(Bench& bench) {
  const Settings& s = bench.settings();
  const nlohmann::json cases = pytorch_cases(bench);
  if (cases.empty()) return true;
  std::printf("\n# memscript (impl = \"fused\") against PyTorch eager (%s), same decoder,\n",
              s.script.c_str());
  std::printf("# same shapes, AdamW, %d thread(s): ms per training step\n", s.threads);
  std::fflush(stdout);
  const std::optional<nlohmann::json> results = run_pytorch(s, cases);
  if (!results) {
    std::printf("SKIPPED: %s cannot import torch; no PyTorch comparison\n", s.python.c_str());
    return false;
  }
  std::printf("%-17s %-10s %6s %10s %10s %11s %12s %9s\n", "mixer", "preset", "L", "params",
              "py params", "memscript", "pytorch ms", "speed-up");
  for (size_t i = 0; i < cases.size(); ++i) {
    const nlohmann::json& c = cases[i];
    const nlohmann::json& r = (*results)[i];
    const Measurement& fused =
        bench.measure({c["mixer"].get<std::string>(), c["preset"].get<std::string>(),
                       c["length"].get<int64_t>(), "fused"},
                      s.batch);
    const int64_t py_parameters = r["parameters"];
    const double py_ms = r["ms"];
    const bool same = py_parameters == fused.parameters;
    bench.failed = bench.failed || !same;
    std::printf("%-17s %-10s %6lld %10lld %10lld %10.3f%1s %12.3f %8.2fx%s\n",
                c["mixer"].get<std::string>().c_str(), c["preset"].get<std::string>().c_str(),
                static_cast<long long>(c["length"].get<int64_t>()),
                static_cast<long long>(fused.parameters), static_cast<long long>(py_parameters),
                fused.ms, impl_note(fused, "fused").c_str(), py_ms, py_ms / fused.ms,
                same ? "" : "  PARAMETER COUNTS DIFFER");
    bench.record({{"kind", "pytorch"},
                  {"mixer", c["mixer"]},
                  {"preset", c["preset"]},
                  {"length", c["length"]},
                  {"batch", s.batch},
                  {"threads", s.threads},
                  {"parameters", py_parameters},
                  {"memscript_parameters", fused.parameters},
                  {"ms", py_ms},
                  {"repeats", r["repeats"]},
                  {"memscript_ms", fused.ms},
                  {"speedup", py_ms / fused.ms}});
  }
  return true;
}

Settings parse(int argc, char** argv) {
  cxxopts::Options cli("memscript_bench_mixers",
                       "ms per training step of every mixer, fused against reference; defaults "
                       "come from MEMSCRIPT_BENCH_* environment variables when set");
  // clang-format off
  cli.add_options()
      ("mixers", "comma-separated mixers (env MEMSCRIPT_BENCH_MIXERS)",
       cxxopts::value<std::string>()->default_value(env_or("MEMSCRIPT_BENCH_MIXERS",
           join(all_mixers(), ","))))
      ("presets", "comma-separated presets (env MEMSCRIPT_BENCH_PRESETS)",
       cxxopts::value<std::string>()->default_value(env_or("MEMSCRIPT_BENCH_PRESETS", "seed-mini,small")))
      ("lengths", "comma-separated training lengths (env MEMSCRIPT_BENCH_LENGTHS)",
       cxxopts::value<std::string>()->default_value(env_or("MEMSCRIPT_BENCH_LENGTHS", "32,256")))
      ("batch", "batch size", cxxopts::value<int64_t>()->default_value("32"))
      ("d-model", "every preset's d_model replaced (0: the preset's)",
       cxxopts::value<int64_t>()->default_value("0"))
      ("heads", "every preset's heads replaced (0: the preset's; --heads 1 --d-model 128 is Zoology's)",
       cxxopts::value<int64_t>()->default_value("0"))
      ("threads", "intra-op threads (env MEMSCRIPT_BENCH_THREADS)",
       cxxopts::value<int>()->default_value(env_or("MEMSCRIPT_BENCH_THREADS", "1")))
      ("device", "auto, cpu or cuda, as memscript's --device (env MEMSCRIPT_BENCH_DEVICE)",
       cxxopts::value<std::string>()->default_value(env_or("MEMSCRIPT_BENCH_DEVICE", "cpu")))
      ("warmup", "untimed steps before timing", cxxopts::value<int>()->default_value("1"))
      ("min-repeats", "fewest timed steps", cxxopts::value<int>()->default_value("3"))
      ("max-repeats", "most timed steps", cxxopts::value<int>()->default_value("50"))
      ("budget", "seconds of timed steps per case beyond the fewest (env MEMSCRIPT_BENCH_BUDGET)",
       cxxopts::value<double>()->default_value(env_or("MEMSCRIPT_BENCH_BUDGET", "0.3")))
      ("fused-only", "time impl = \"fused\" alone: no reference column in the step table")
      ("parts", "comma-separated parts: steps, scaling, pytorch (env MEMSCRIPT_BENCH_PARTS)",
       cxxopts::value<std::string>()->default_value(env_or("MEMSCRIPT_BENCH_PARTS", "steps,scaling,pytorch")))
      ("scaling-preset", "preset of the time-against-length table",
       cxxopts::value<std::string>()->default_value("seed-mini"))
      ("scaling-lengths", "lengths of the time-against-length table (env MEMSCRIPT_BENCH_SCALING_LENGTHS)",
       cxxopts::value<std::string>()->default_value(env_or("MEMSCRIPT_BENCH_SCALING_LENGTHS", "256,512,1024,2048,4096")))
      ("python", "Python with torch for the PyTorch comparison (none: skipped)",
       cxxopts::value<std::string>()->default_value(""))
      ("script", "path of pytorch_reference.py", cxxopts::value<std::string>()->default_value(""))
      ("require-pytorch", "exit with 77 (a skip for CTest) when Python cannot import torch")
      ("jsonl", "write one JSON object per measurement here ('-': stdout)",
       cxxopts::value<std::string>()->default_value("bench_mixers.jsonl"))
      ("h,help", "this help");
  // clang-format on
  const auto parsed = cli.parse(argc, argv);
  if (parsed.count("help")) {
    std::printf("%s\n", cli.help().c_str());
    std::exit(0);
  }
  Settings s;
  s.mixers = split_list(parsed["mixers"].as<std::string>());
  s.presets = split_list(parsed["presets"].as<std::string>());
  s.lengths = split_integers(parsed["lengths"].as<std::string>());
  s.batch = parsed["batch"].as<int64_t>();
  s.widths = {parsed["d-model"].as<int64_t>(), parsed["heads"].as<int64_t>()};
  if (s.widths.d_model < 0 || s.widths.heads < 0)
    throw std::invalid_argument("--d-model and --heads take a positive number (0: the preset's)");
  s.threads = parsed["threads"].as<int>();
  s.device = resolve_device(parsed["device"].as<std::string>());  // as memscript --device
  s.budget = {parsed["warmup"].as<int>(), parsed["min-repeats"].as<int>(),
              parsed["max-repeats"].as<int>(), parsed["budget"].as<double>()};
  const std::vector<std::string> parts = split_list(parsed["parts"].as<std::string>());
  const auto wants = [&](const char* part) {
    return std::find(parts.begin(), parts.end(), part) != parts.end();
  };
  s.steps = wants("steps");
  s.reference = parsed.count("fused-only") == 0;
  s.scaling = wants("scaling");
  s.python = parsed["python"].as<std::string>();
  s.script = parsed["script"].as<std::string>();
  s.pytorch_asked = wants("pytorch");
  s.pytorch = s.pytorch_asked && !s.python.empty() && !s.script.empty();
  if (s.pytorch && s.widths.any()) {
    throw std::invalid_argument(
        "--d-model and --heads apply to the steps and scaling tables; the PyTorch comparison "
        "builds the presets as they are (leave out --python, or --parts steps,scaling)");
  }
  s.scaling_preset = parsed["scaling-preset"].as<std::string>();
  s.scaling_lengths = split_integers(parsed["scaling-lengths"].as<std::string>());
  s.jsonl = parsed["jsonl"].as<std::string>();
  s.require_pytorch = parsed.count("require-pytorch") > 0;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  memscript::keep_freed_memory();  // as the memscript binary does
  memscript::cache_tensor_memory();
  memscript::use_full_float32();
  try {
    Bench bench(parse(argc, argv));
    const Settings& s = bench.settings();
    at::set_num_threads(s.threads);
    if (s.steps) print_step_table(bench);
    if (s.scaling && !s.scaling_lengths.empty()) print_scaling_table(bench);
    bool torch_found = s.pytorch;
    if (s.pytorch) {
      torch_found = print_pytorch_table(bench);
    } else if (s.pytorch_asked) {
      std::printf(
          "\nSKIPPED: no --python (a Python with torch) and --script "
          "(pytorch_reference.py) given; no PyTorch comparison\n");
    }
    if (!s.jsonl.empty() && s.jsonl != "-")
      std::printf("\n# results, one JSON object a line: %s\n", s.jsonl.c_str());
    if (bench.failed) return 1;
    return torch_found || !s.require_pytorch ? 0 : kTorchMissing;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "memscript_bench_mixers: %s\n", error.what());
    return 1;
  }
}
