#include "runtime/checkpoint.h"

#include <sstream>

#include "runtime/model/serialize.h"
#include "runtime/stored_run.h"

namespace memscript {

namespace {

constexpr const char* kLoopKey = "loop";
constexpr const char* kRandomKey = "random.cpu";

torch::Generator cpu_generator() { return at::detail::getDefaultCPUGenerator(); }

// config.json's "model": what ms.train stored of the model it trained (decoder_options_from_config
// checks what is inside it).
const nlohmann::json& stored_model_config(const nlohmann::json& config,
                                          const std::filesystem::path& run) {
  if (!config.contains("model") || !config.at("model").is_object()) {
    throw UserError((run / run_layout::kConfig).string() +
                    ": no 'model' object (not the folder of an ms.train run)");
  }
  return config.at("model");
}

// The floating dtype the checkpoint's model was trained in (its embedding's): config.json does not
// record it, and a float64 run must come back in float64.
torch::ScalarType stored_dtype(torch::serialize::InputArchive& model_archive) {
  torch::serialize::InputArchive embedding;
  torch::Tensor weight;
  if (model_archive.try_read("embedding", embedding) && embedding.try_read("weight", weight) &&
      weight.defined() && weight.is_floating_point())
    return weight.scalar_type();
  return torch::kFloat;
}

}  // namespace

void write_checkpoint(const RunFolder& folder, DecoderImpl& model, const Optimizer& optimizer,
                      const nlohmann::json& loop_state) {
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive model_archive;
  model.save(model_archive);
  archive.write("model", model_archive);
  torch::serialize::OutputArchive optimizer_archive;
  optimizer.save(optimizer_archive);
  archive.write("optimizer", optimizer_archive);
  archive.write(kRandomKey, cpu_generator().get_state());
  archive.write(kLoopKey, c10::IValue(loop_state.dump()));
  std::ostringstream bytes;
  archive.save_to(bytes);
  folder.write(kCheckpointFile, bytes.str());
}

std::optional<nlohmann::json> read_checkpoint(const RunFolder& folder, DecoderImpl& model,
                                              Optimizer& optimizer) {
  const std::filesystem::path path = folder.path() / kCheckpointFile;
  if (!std::filesystem::exists(path)) return std::nullopt;
  try {
    // Read onto the model's device: a run folder written on a GPU resumes on a CPU, and the
    // other way round.
    torch::serialize::InputArchive archive;
    archive.load_from(path.string(), model.device());
    torch::serialize::InputArchive model_archive;
    archive.read("model", model_archive);
    load_weights(model, model_archive, path.string());
    torch::serialize::InputArchive optimizer_archive;
    archive.read("optimizer", optimizer_archive);
    optimizer.load(optimizer_archive);
    torch::Tensor random_state;
    archive.read(kRandomKey, random_state);
    // The archive put every tensor on the model's device; the generator reads its state as
    // CPU bytes and does not check where they are.
    cpu_generator().set_state(random_state.cpu());
    c10::IValue loop;
    archive.read(kLoopKey, loop);
    return nlohmann::json::parse(loop.toStringRef());
  } catch (const c10::Error& error) {
    throw UserError("cannot read the checkpoint " + path.string() + ": " +
                    error.what_without_backtrace());
  }
}

Decoder load_checkpoint_model(const std::filesystem::path& run) {
  const nlohmann::json config = read_run_config(run);
  const nlohmann::json& model_config = stored_model_config(config, run);
  const std::filesystem::path path = run / kCheckpointFile;
  if (!std::filesystem::is_regular_file(path)) {
    throw UserError(run.string() + " has no " + kCheckpointFile +
                    " (its training has not written one yet)");
  }
  Decoder model = nullptr;
  try {
    Options options = decoder_options_from_config(model_config);
    model = Decoder(std::make_shared<DecoderImpl>(options, nullptr, 0));
    options.finish();
  } catch (const UserError& error) {
    throw UserError((run / run_layout::kConfig).string() + ": " + error.what());
  }
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path.string(), torch::kCPU);
    torch::serialize::InputArchive model_archive;
    archive.read("model", model_archive);
    model->to(stored_dtype(model_archive));
    load_weights(*model, model_archive, path.string());
  } catch (const c10::Error& error) {
    throw UserError("cannot read the model from " + path.string() + ": " +
                    error.what_without_backtrace());
  }
  return model;
}

}  // namespace memscript
