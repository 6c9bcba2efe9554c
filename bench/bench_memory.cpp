// Peak resident memory of a long evaluation: every recurrent mixer at preset small, one
// evaluation batch of 8 sequences of length 16384 in one pass, no gradients, impl = "fused"
// and "reference", each in a process of its own so that one peak does not hide another.
// Run with `make bench`; `--help` lists the options.
//
// Without --mixer this is the driver: it re-runs itself once per (mixer, impl) and prints the
// table. With --mixer it measures that one case and prints one JSON line.

#include <ATen/Parallel.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cxxopts.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "bench_model.h"
#include "runtime/evaluate.h"
#include "runtime/memory.h"
#include "runtime/tensor_cache.h"

using namespace memscript;
using namespace memscript::bench;

namespace {

struct Settings {
  std::vector<std::string> mixers;
  std::vector<std::string> impls;
  std::string preset;
  int64_t length = 16384;
  int64_t batch = 8;
  int threads = 1;
  double limit_gib = 8;  // address space a single case may add; beyond it, "does not fit"
  std::string jsonl;
};

// Virtual memory of this process now (VmSize), in bytes.
uint64_t virtual_bytes() {
  std::ifstream status("/proc/self/status");
  std::string word;
  while (status >> word) {
    if (word == "VmSize:") {
      uint64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
  }
  return 0;
}

// Caps what this process may still allocate, so a case that does not fit fails with an
// allocation error instead of pushing a shared machine into swap or the OOM killer.
void limit_growth(double gib) {
  const rlim_t limit = virtual_bytes() + static_cast<rlim_t>(gib * 1024 * 1024 * 1024);
  const rlimit bound{limit, limit};
  setrlimit(RLIMIT_AS, &bound);
}

// One case, in this process: one JSON line on stdout.
int measure_one(const Settings& s, const std::string& mixer, const std::string& impl) {
  nlohmann::json row = {{"kind", "memory"},   {"mixer", mixer},     {"impl", impl},
                        {"preset", s.preset}, {"length", s.length}, {"batch", s.batch}};
  try {
    BenchModel built = build_model(mixer, s.preset, impl, s.length);
    row["ran"] = built.impl;
    row["parameters"] = built.model->num_parameters();
    row["model_rss_mib"] = peak_rss_mib();
    limit_growth(s.limit_gib);
    EvalSpec spec;
    spec.lengths = {s.length};
    spec.batches = 1;
    spec.batch = s.batch;
    const auto start = std::chrono::steady_clock::now();
    const std::vector<LengthScores> scores = evaluate(*built.model, *built.task, spec);
    row["seconds"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    row["accuracy"] = scores.at(0).accuracy;
    row["peak_rss_mib"] = peak_rss_mib();
  } catch (const std::exception& error) {
    std::string message = error.what();
    row["error"] = message.substr(0, message.find('\n'));
  }
  std::printf("%s\n", row.dump().c_str());
  return 0;
}

// The last line that is a JSON object: libtorch may have warned on the lines before it.
std::optional<std::string> last_json_line(const std::string& output) {
  std::stringstream lines(output);
  std::string line;
  std::optional<std::string> found;
  while (std::getline(lines, line))
    if (!line.empty() && line.front() == '{') found = line;
  return found;
}

// Runs `self --mixer ... --impl ...` and parses the JSON line it prints.
nlohmann::json measure_in_child(const std::string& self, const Settings& s,
                                const std::string& mixer, const std::string& impl) {
  std::string command = shell_quote(self);
  command += " --mixer " + shell_quote(mixer);
  command += " --impls " + shell_quote(impl);
  command += " --preset " + shell_quote(s.preset);
  command += " --length " + std::to_string(s.length);
  command += " --batch " + std::to_string(s.batch);
  command += " --threads " + std::to_string(s.threads);
  command += " --limit-gib " + std::to_string(s.limit_gib);
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run " + command);
  std::string output;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
  const int status = pclose(pipe);
  const std::optional<std::string> line = last_json_line(output);
  if (!line) {
    return {{"mixer", mixer},
            {"impl", impl},
            {"error", "the measuring process died (status " + std::to_string(status) + ")"}};
  }
  return nlohmann::json::parse(*line);
}

std::string cell(const nlohmann::json& row) {
  if (row.contains("error")) return "n/a";
  char text[32];
  std::snprintf(text, sizeof text, "%.0f", row["peak_rss_mib"].get<double>());
  return text;
}

int drive(const std::string& self, const Settings& s) {
  std::printf(
      "\n# peak resident memory (getrusage ru_maxrss), evaluation without gradients: preset %s,\n"
      "# batch %lld, length %lld in one pass, %d thread(s), one process per case; MiB\n",
      s.preset.c_str(), static_cast<long long>(s.batch), static_cast<long long>(s.length),
      s.threads);
  std::printf("%-17s %10s %10s", "mixer", "params", "model");
  for (const std::string& impl : s.impls) std::printf(" %12s %9s", (impl + " MiB").c_str(), "s");
  std::printf("\n");
  std::ofstream jsonl;
  if (!s.jsonl.empty()) jsonl.open(s.jsonl);
  std::vector<std::string> notes;
  for (const std::string& mixer : s.mixers) {
    std::vector<nlohmann::json> rows;
    for (const std::string& impl : s.impls) {
      rows.push_back(measure_in_child(self, s, mixer, impl));
      if (jsonl.is_open()) jsonl << rows.back().dump() << "\n" << std::flush;
      if (rows.back().contains("error")) {
        notes.push_back(mixer + " " + impl + ": " + rows.back()["error"].get<std::string>());
      } else if (rows.back()["ran"] != impl) {
        notes.push_back(mixer + " " + impl + ": the mixer ran " +
                        rows.back()["ran"].get<std::string>() +
                        " (this build does not implement impl = \"" + impl + "\")");
      }
    }
    const nlohmann::json& first = rows.front();
    std::printf("%-17s %10lld %10.0f", mixer.c_str(),
                static_cast<long long>(first.value("parameters", int64_t{0})),
                first.value("model_rss_mib", 0.0));
    for (const nlohmann::json& row : rows)
      std::printf(" %12s %9.2f", cell(row).c_str(), row.value("seconds", 0.0));
    std::printf("\n");
    std::fflush(stdout);
  }
  std::printf("# model = resident memory after building the model, before evaluating\n");
  for (const std::string& note : notes) std::printf("# %s\n", note.c_str());
  if (!s.jsonl.empty()) std::printf("# results, one JSON object a line: %s\n", s.jsonl.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  memscript::keep_freed_memory();  // as the memscript binary does
  memscript::cache_tensor_memory();
  cxxopts::Options cli("memscript_bench_memory",
                       "peak resident memory of a long evaluation, one process per mixer");
  // clang-format off
  cli.add_options()
      ("mixers", "comma-separated mixers (env MEMSCRIPT_BENCH_MIXERS; gpt is skipped)",
       cxxopts::value<std::string>()->default_value(env_or("MEMSCRIPT_BENCH_MIXERS",
           "lstm,qlstm,mingru,lru,linear_attention,deltanet,gated_deltanet,mamba")))
      ("impls", "comma-separated implementations",
       cxxopts::value<std::string>()->default_value("fused,reference"))
      ("mixer", "measure this one mixer (with the first of --impls) and print a JSON line",
       cxxopts::value<std::string>()->default_value(""))
      ("preset", "model preset", cxxopts::value<std::string>()->default_value("small"))
      ("length", "evaluation length (env MEMSCRIPT_BENCH_MEMORY_LENGTH)",
       cxxopts::value<int64_t>()->default_value(env_or("MEMSCRIPT_BENCH_MEMORY_LENGTH", "16384")))
      ("batch", "evaluation batch", cxxopts::value<int64_t>()->default_value("8"))
      ("threads", "intra-op threads (env MEMSCRIPT_BENCH_THREADS)",
       cxxopts::value<int>()->default_value(env_or("MEMSCRIPT_BENCH_THREADS", "1")))
      ("limit-gib", "most memory one case may add before it counts as not fitting",
       cxxopts::value<double>()->default_value("8"))
      ("jsonl", "write one JSON object per case here",
       cxxopts::value<std::string>()->default_value("bench_memory.jsonl"))
      ("h,help", "this help");
  // clang-format on
  try {
    const auto parsed = cli.parse(argc, argv);
    if (parsed.count("help")) {
      std::printf("%s\n", cli.help().c_str());
      return 0;
    }
    Settings s;
    for (const std::string& mixer : split_list(parsed["mixers"].as<std::string>()))
      if (mixer != "gpt") s.mixers.push_back(mixer);
    s.impls = split_list(parsed["impls"].as<std::string>());
    s.preset = parsed["preset"].as<std::string>();
    s.length = parsed["length"].as<int64_t>();
    s.batch = parsed["batch"].as<int64_t>();
    s.threads = parsed["threads"].as<int>();
    s.limit_gib = parsed["limit-gib"].as<double>();
    s.jsonl = parsed["jsonl"].as<std::string>();
    at::set_num_threads(s.threads);
    const std::string mixer = parsed["mixer"].as<std::string>();
    if (!mixer.empty()) return measure_one(s, mixer, s.impls.at(0));
    return drive(std::filesystem::read_symlink("/proc/self/exe").string(), s);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "memscript_bench_memory: %s\n", error.what());
    return 1;
  }
}
