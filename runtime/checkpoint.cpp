#include "runtime/checkpoint.h"

#include <sstream>

namespace memscript {

namespace {

constexpr const char* kLoopKey = "loop";
constexpr const char* kRandomKey = "random.cpu";

torch::Generator cpu_generator() { return at::detail::getDefaultCPUGenerator(); }

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
    model.load(model_archive);
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

}  // namespace memscript
