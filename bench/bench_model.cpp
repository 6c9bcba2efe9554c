#include "bench_model.h"

#include <sys/resource.h>

#include <cstdlib>
#include <sstream>

#include "runtime/model/mixer.h"
#include "runtime/options.h"

namespace memscript::bench {

const std::vector<std::string>& all_mixers() {
  static const std::vector<std::string> names = mixer_names();
  return names;
}

const std::vector<std::string>& recurrent_mixers() {
  static const std::vector<std::string> names =
      mixer_names_where([](const MixerEntry& entry) { return entry.recurrent; });
  return names;
}

namespace {

// The implementation the first layer's mixer reports (every mixer puts `impl` in config()).
std::string reported_impl(const DecoderImpl& model) {
  const nlohmann::json layers = model.config().at("layers");
  if (layers.empty() || !layers[0].contains("impl")) return "reference";
  return layers[0].at("impl").get<std::string>();
}

}  // namespace

BenchModel build_model(const std::string& mixer, const std::string& preset, const std::string& impl,
                       int64_t length, const Widths& widths) {
  Options task_options("parity");
  BenchModel built{make_task("parity", task_options), nullptr, ""};
  auto make_options = [&] {
    Options options("bench " + mixer);
    options.set("mixer", {mixer});
    options.set("preset", {preset});
    options.set("impl", {impl});
    if (widths.d_model > 0) options.set("d_model", {widths.d_model});
    if (widths.heads > 0) options.set("heads", {widths.heads});
    return options;
  };
  Options options = make_options();
  built.model = Decoder(std::make_shared<DecoderImpl>(options, built.task.get(), 41));
  if (built.model->config().contains("max_length") && length > 1024) {
    options = make_options();
    options.set("max_length", {length});
    built.model = Decoder(std::make_shared<DecoderImpl>(options, built.task.get(), 41));
  }
  built.impl = reported_impl(*built.model);
  return built;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ','))
    if (!item.empty()) items.push_back(item);
  return items;
}

std::vector<int64_t> split_integers(const std::string& text) {
  std::vector<int64_t> numbers;
  for (const std::string& item : split_list(text)) numbers.push_back(std::stoll(item));
  return numbers;
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::string(value) : fallback;
}

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) {
    if (c == '\'')
      quoted += "'\\''";
    else
      quoted += c;
  }
  quoted += "'";
  return quoted;
}

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

}  // namespace memscript::bench
