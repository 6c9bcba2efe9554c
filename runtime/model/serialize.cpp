#include "runtime/model/serialize.h"

#include <sstream>

#include "runtime/model/show_sizes.h"
#include "runtime/run_folder.h"

namespace memscript {

namespace {

constexpr const char* kConfigKey = "memscript.config";
// The parameters' dtype: the model is converted before loading, so a float64 model comes
// back in float64 rather than through float32.
constexpr const char* kDtypeKey = "memscript.dtype";

OptionValue option_from_json(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::boolean:
      return {value.get<bool>()};
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return {value.get<int64_t>()};
    case nlohmann::json::value_t::number_float:
      return {value.get<double>()};
    case nlohmann::json::value_t::string:
      return {value.get<std::string>()};
    case nlohmann::json::value_t::array: {
      auto list = std::make_shared<OptionList>();
      for (const auto& item : value) list->push_back(option_from_json(item));
      return {list};
    }
    case nlohmann::json::value_t::object: {
      auto table = std::make_shared<Options>("saved model");
      for (const auto& [key, item] : value.items()) table->set(key, option_from_json(item));
      return {table};
    }
    default:
      throw UserError("saved model: unexpected value in its configuration: " + value.dump());
  }
}

void load_tensor(torch::serialize::InputArchive& archive, const std::string& key,
                 const std::string& name, torch::Tensor& target, bool is_buffer,
                 const std::string& source) {
  if (!target.defined()) return;
  torch::Tensor stored;
  if (!archive.try_read(key, stored, is_buffer) || !stored.defined())
    throw UserError(source + ": no tensor '" + name + "' for the model it describes");
  if (stored.sizes() != target.sizes() || stored.scalar_type() != target.scalar_type()) {
    throw UserError(source + ": tensor '" + name + "' is " + show_sizes(stored) +
                    " where the model has " + show_sizes(target));
  }
  torch::NoGradGuard no_grad;
  target.copy_(stored);
}

void load_module(torch::nn::Module& module, torch::serialize::InputArchive& archive,
                 const std::string& prefix, const std::string& source) {
  for (auto& item : module.named_parameters(/*recurse=*/false))
    load_tensor(archive, item.key(), prefix + item.key(), item.value(), false, source);
  for (auto& item : module.named_buffers(/*recurse=*/false))
    load_tensor(archive, item.key(), prefix + item.key(), item.value(), true, source);
  for (const auto& child : module.named_children()) {
    torch::serialize::InputArchive child_archive;
    if (!archive.try_read(child.key(), child_archive))
      throw UserError(source + ": no weights for '" + prefix + child.key() + "'");
    load_module(*child.value(), child_archive, prefix + child.key() + ".", source);
  }
}

}  // namespace

void load_weights(torch::nn::Module& model, torch::serialize::InputArchive& archive,
                  const std::string& source) {
  load_module(model, archive, "", source);
}

Options decoder_options_from_config(const nlohmann::json& config) {
  Options options("saved model");
  for (const char* key : {"vocab", "classes", "d_model", "heads", "mlp_ratio", "mlp_hidden", "mlp",
                          "mlp_bias", "norm", "norm_eps", "scale_embedding", "seed", "head_bias",
                          "residual_positions", "max_length"}) {
    if (config.contains(key)) options.set(key, option_from_json(config.at(key)));
  }
  // Checked before it is read: a configuration comes from a file (a model file, a run folder's
  // config.json) that may have been written by hand.
  if (!config.is_object() || !config.contains("layers") || !config.at("layers").is_array() ||
      config.at("layers").empty())
    throw UserError("saved model: 'layers' must be a non-empty array");
  for (const auto& layer : config.at("layers")) {
    if (!layer.is_object()) throw UserError("saved model: 'layers' holds a non-object");
  }
  auto layers = std::make_shared<OptionList>();
  for (const auto& layer : config.at("layers")) {
    // Every resolved option of the layer, read or not: a mixer reports more than it reads
    // (heads come from the decoder, say).
    auto layer_options = std::make_shared<Options>("saved model layer");
    for (const auto& [key, value] : layer.items())
      layer_options->set_default(key, option_from_json(value));
    layers->push_back({layer_options});
  }
  options.set("layers", {layers});
  return options;
}

void save_decoder(DecoderImpl& model, const std::filesystem::path& path) {
  std::ostringstream bytes;
  try {
    torch::serialize::OutputArchive archive;
    model.save(archive);
    archive.write(kConfigKey, c10::IValue(model.config().dump()));
    archive.write(kDtypeKey,
                  c10::IValue(static_cast<int64_t>(model.parameters().front().scalar_type())));
    archive.save_to(bytes);
  } catch (const c10::Error& error) {
    throw UserError("cannot save the model to " + path.string() + ": " +
                    error.what_without_backtrace());
  }
  write_file_atomic(path, bytes.str());
}

Decoder load_decoder(const std::filesystem::path& path) {
  try {
    torch::serialize::InputArchive archive;
    // Onto the CPU, where the model is built: a model saved on a GPU loads on a machine
    // without one.
    archive.load_from(path.string(), torch::kCPU);
    c10::IValue config;
    if (!archive.try_read(kConfigKey, config)) {
      throw UserError("cannot load " + path.string() +
                      ": not a memscript model (no configuration)");
    }
    Options options = decoder_options_from_config(nlohmann::json::parse(config.toStringRef()));
    Decoder model(std::make_shared<DecoderImpl>(options, nullptr, 0));
    options.finish();
    c10::IValue dtype;
    if (archive.try_read(kDtypeKey, dtype)) {
      const int64_t code = dtype.isInt() ? dtype.toInt() : -1;
      if (code != static_cast<int64_t>(torch::kFloat) &&
          code != static_cast<int64_t>(torch::kDouble))
        throw UserError("cannot load " + path.string() +
                        ": its dtype is neither float32 nor float64");
      model->to(static_cast<torch::ScalarType>(code));
    }
    load_weights(*model, archive, path.string());
    return model;
  } catch (const c10::Error& error) {
    throw UserError("cannot load the model " + path.string() + ": " +
                    error.what_without_backtrace());
  }
}

}  // namespace memscript
