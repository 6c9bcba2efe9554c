// Random option tables and random calls against every constructor and method, as a stranger's
// script could make them: random types, nesting, cycles, huge sizes, NaN. Nothing may crash
// (run under AddressSanitizer by `make test-sanitize`), and every failure must be a Lua error
// whose message is one line in memscript's words: no C++ backtrace, no raw library exception.
//
// The generator is seeded, so a failure names the snippet and reproduces.

#include <catch2/catch.hpp>

#include <random>
#include <sstream>
#include <string_view>

#include "harness.h"
#include "runtime/model/mixer.h"
#include "runtime/optim.h"
#include "runtime/stop_signal.h"
#include "runtime/task.h"

using namespace memscript::test;

namespace {

// Option names the bound functions read, so that random tables reach past "unknown option".
const char* const kKeys[] = {
    "steps",
    "batch",
    "length",
    "seed",
    "eval",
    "lengths",
    "batches",
    "every",
    "out",
    "model",
    "task",
    "optimizer",
    "mixer",
    "layers",
    "d_model",
    "heads",
    "vocab",
    "classes",
    "mlp_ratio",
    "preset",
    "ones",
    "p_one",
    "pairs",
    "max_depth",
    "negative_share",
    "lr",
    "warmup",
    "decay",
    "betas",
    "weight_decay",
    "clip",
    "log_every",
    "checkpoint_every",
    "min",
    "max",
    "n",
    "name",
    "grid",
    "run",
    "seeds",
    "order",
    "head_dim",
    "d_state",
    "expand",
    "positions",
    "impl",
    "runs",
    "file",
    "lines",
    "x",
    "y",
    "label",
    "stop_accuracy",
    "train_length",
    "queries",
    "keys",
    "modulus",
    "on_step",
    "on_eval",
    "scale_embedding",
    "dtype",
};

const char* const kNumbers[] = {
    "0",
    "1",
    "2",
    "3",
    "4",
    "7",
    "8",
    "16",
    "-1",
    "-7",
    "1e9",
    "1e12",
    "2^53",
    "0.5",
    "-0.0",
    "1/0",
    "-1/0",
    "0/0",
    "1e308",
    "math.maxinteger",
    "math.mininteger",
    "1.5",
    "100000",
};

const char* const kStrings[] = {
    "'lstm'",   "'gpt'",       "'mamba'",     "'deltanet'",       "'cpu'",
    "'cuda'",   "'auto'",      "''",          "'../x'",           "'/tmp/memscript-fuzz'",
    "'link/x'", "'a\\0b'",     "'seed-mini'", "'small'",          "'cosine'",
    "'fused'",  "'reference'", "'learned'",   "('x'):rep(10000)", "'x.svg'",
};

const char* const kMethods[] = {
    "tolist",     "item",           "shape",      "sum",        "eq",       "numel",
    "dtype",      "backward",       "to",         "save",       "describe", "config",
    "sample",     "show",           "forward",    "loss",       "train",    "eval",
    "parameters", "num_parameters", "vocab_size", "num_classes"};

// Objects a script holds; each snippet defines them first.
const char* const kObjects[] = {"t", "m", "o", "x", "b", "s", "print", "ms"};

const char* const kPrelude =
    "local t = ms.task.parity{ p_one = 0.5 }\n"
    "local m = ms.model.decoder{ mixer = 'lstm', d_model = 4, heads = 1, layers = 1, task = t }\n"
    "local o = ms.optim.adamw{}\n"
    "local b = t:sample{ batch = 2, length = 4 }\n"
    "local x = b.inputs\n"
    "local _, s = m:forward(x)\n"
    "local cyc = {} cyc.x = cyc cyc[1] = cyc\n";

// Appends the pieces in order (GCC 12 warns falsely on "literal" + std::string&&).
template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::string out;
  (out.append(std::string_view(parts)), ...);
  return out;
}

class Generator {
 public:
  explicit Generator(uint32_t seed) : random_(seed) {}

  size_t below(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(random_); }
  template <typename T, size_t N>
  const T& pick(const T (&items)[N]) {
    return items[below(N)];
  }

  std::string value(int depth) {
    switch (below(depth > 3 ? 6 : 9)) {
      case 0:
        return "nil";
      case 1:
        return below(2) ? "true" : "false";
      case 2:
      case 3:
        return pick(kNumbers);
      case 4:
        return pick(kStrings);
      case 5:
        return pick(kObjects);
      case 6:
        return table(depth + 1);
      case 7:
        return list(depth + 1);
      default:
        return below(4) == 0 ? "cyc" : deep();
    }
  }

  std::string table(int depth) {
    std::string out = "{ ";
    const size_t entries = below(5);
    for (size_t i = 0; i < entries; ++i) {
      if (below(12) == 0) {
        out += cat("[", value(depth), "] = ", value(depth), ", ");
      } else {
        out += cat(pick(kKeys), " = ", value(depth), ", ");
      }
    }
    out += "}";
    return out;
  }

  std::string list(int depth) {
    std::string out = "{ ";
    const size_t entries = below(5);
    for (size_t i = 0; i < entries; ++i) out += value(depth) + ", ";
    out += "}";
    return out;
  }

  // A table nested deeper than anything reads: n levels built by a loop.
  std::string deep() {
    const char* sizes[] = {"15", "16", "17", "40", "1000", "100000"};
    return cat("(function() local d = ", below(2) ? "1" : "{}", " for i = 1, ", pick(sizes),
               " do d = { ", below(2) ? "x = d" : "d", " } end return d end)()");
  }

  std::string argument() { return below(3) == 0 ? value(0) : table(0); }

  // One call: a constructor, a bound function or a method, with random arguments.
  std::string call(const std::vector<std::string>& tasks, const std::vector<std::string>& mixers,
                   const std::vector<std::string>& optimizers) {
    switch (below(17)) {
      case 0:
        return cat("ms.task.", tasks[below(tasks.size())], "(", argument(), ")");
      case 1:
        return cat(
            "ms.model.decoder(",
            with(cat("mixer = '", mixers[below(mixers.size())], "', vocab = 4, classes = 2")), ")");
      case 2:
        return cat("ms.optim.", optimizers[below(optimizers.size())], "(", argument(), ")");
      case 3:
        return cat("ms.train(", with("model = m, task = t, steps = 2, batch = 2, length = 4"), ")");
      case 4:
        return cat("ms.evaluate(m, t, ", with("lengths = { 4 }, batches = 1, batch = 2"), ")");
      case 5:
        return cat("ms.tensor(", value(0), ")");
      case 6:
        return cat("t:sample(", with("batch = 2, length = 4"), ")");
      case 7:
        return cat("t:show(", with("length = 4, n = 1"), ")");
      case 8:
        return cat("m:forward(", value(0), ", ", value(0), ")");
      case 9:
        return cat("m:loss(",
                   below(2) ? cat("{ inputs = x, targets = ", value(0), ", mask = ", value(0), " }")
                            : value(0),
                   ")");
      case 10:
        return "m:forward(x, s)";
      case 11:
        return cat("(", pick(kObjects), "):", pick(kMethods), "(", value(0), ")");
      case 12:
        return cat("ms.report(", argument(), ")");
      case 13:
        return cat("ms.plot(", argument(), ")");
      case 14:
        return cat("ms.param(", value(0), ", ", value(0), ")");
      case 15:
        return cat("ms.sweep(",
                   with("name = 'fz', grid = { k = { 1, 2 } }, run = function(p) return p end"),
                   ")");
      default:
        return cat("ms.model.load(", value(0), ")");
    }
  }

 private:
  // A table of sensible options with one to three random ones added or replaced.
  std::string with(const std::string& base) {
    std::string out = cat("{ ", base);
    const size_t changes = 1 + below(3);
    for (size_t i = 0; i < changes; ++i) out += cat(", ", pick(kKeys), " = ", value(1));
    return out + " }";
  }

  std::mt19937 random_;
};

// The message of an error, without the traceback the interpreter appends.
std::string message_of(const std::string& error) {
  return error.substr(0, error.find("\nstack traceback:"));
}

}  // namespace

TEST_CASE("fuzz: random calls and option tables never crash and fail with one clear line") {
  const std::vector<std::string> tasks = memscript::task_names();
  const std::vector<std::string> mixers = memscript::mixer_names();
  const std::vector<std::string>& optimizers = memscript::optimizer_kinds();
  Generator generate(20261125);
  // Each snippet gets 5 s; the deadline is lifted again however the test ends.
  struct LiftDeadline {
    ~LiftDeadline() { memscript::set_deadline(1e9); }
  } lift;
  int failures = 0;
  int successes = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string code = kPrelude;
    const size_t calls = 1 + generate.below(3);
    for (size_t c = 0; c < calls; ++c)
      code +=
          cat("local r", std::to_string(c), " = ", generate.call(tasks, mixers, optimizers), "\n");
    INFO("snippet " << i << ":\n" << code);
    memscript::set_deadline(5);  // a valid ms.train may run; it ends with a clear error
    TempDir out;
    memscript::lua::Settings settings = test_settings(out);
    memscript::lua::Interpreter interpreter(settings);
    const int status = interpreter.run_code(code, "=fuzz");
    const std::string message = message_of(interpreter.last_error());
    INFO(message);
    REQUIRE((status == 0 || status == 1 || status == 2));
    if (status == 0) {
      ++successes;
      continue;
    }
    ++failures;
    CHECK(message.find('\n') == std::string::npos);
    CHECK(message.find("Exception raised from") == std::string::npos);
    CHECK(message.find("json.exception") == std::string::npos);
    CHECK(message.find("bad_alloc") == std::string::npos);
    CHECK(message.find("unknown C++ exception") == std::string::npos);
    CHECK(message.rfind("fuzz:", 0) == 0);  // the script position comes first
  }
  // The generator must reach both outcomes, or it is testing nothing.
  CHECK(failures > 100);
  CHECK(successes > 100);
}
