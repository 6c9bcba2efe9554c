#pragma once

// A training checkpoint: one file, `checkpoint.pt` in the run folder, holding the model's
// weights, the optimizer's state, libtorch's CPU random state and the loop's own state (step,
// the sums since the last log line, how many lines each log file had) as JSON. Written
// atomically, so it is always the last complete checkpoint; the logs are flushed before it,
// so they hold at least the lines it counts and a resume cuts them back to that.

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "runtime/model/decoder.h"
#include "runtime/optim.h"
#include "runtime/run_folder.h"
#include "runtime/run_layout.h"

namespace memscript {

inline constexpr const char* kCheckpointFile = run_layout::kCheckpoint;

void write_checkpoint(const RunFolder& folder, DecoderImpl& model, const Optimizer& optimizer,
                      const nlohmann::json& loop_state);

// Restores model, optimizer and random state; returns the loop's state, or nothing when the
// folder has no checkpoint yet.
std::optional<nlohmann::json> read_checkpoint(const RunFolder& folder, DecoderImpl& model,
                                              Optimizer& optimizer);

// The model of the run folder `run` as its last checkpoint holds it, rebuilt from the "model"
// entry of its config.json, on the CPU: what ms.model.load(run folder) returns, so a finished
// run can be evaluated again (other lengths, other batches) without training it again. One
// UserError line when `run` is not a run folder, has no checkpoint yet, or its config.json
// cannot rebuild the model (a mixer defined in a script that the loading script does not
// define, say) or disagrees with the checkpoint.
Decoder load_checkpoint_model(const std::filesystem::path& run);

}  // namespace memscript
