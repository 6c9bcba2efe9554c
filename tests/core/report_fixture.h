#pragma once

// Fake run folders, written the way ms.train and ms.sweep write them, for report tests that
// need no training.

#include <string>
#include <vector>

#include "../support/process.h"

namespace memscript::test {

struct FakeRun {
  std::string mixer;
  std::string train_length;
  int seed;
  std::string status;  // "" = no folder at all
  double base;         // accuracies are base / length-dependent values
  int shard = -1;
};

inline std::string fake_run_name(const FakeRun& run) {
  return "mixer=" + run.mixer + ",train_length=" + run.train_length +
         ",seed=" + std::to_string(run.seed);
}

// eval accuracy of a fake run at an evaluation length, at the last step (200).
inline double fake_accuracy(const FakeRun& run, int length) { return run.base - length / 1000.0; }

inline void write_fake_run(const TempDir& root, const std::string& sweep, const FakeRun& run) {
  if (run.status.empty()) return;
  const std::string folder = sweep + "/" + fake_run_name(run) + "/";
  root.write(folder + "status", run.status + "\n");
  root.write(folder + "config.json", "{\"model\": {\"mixer\": \"" + run.mixer + "\"}}\n");
  std::string metrics;
  for (int step = 50; step <= 200; step += 50) {
    metrics += "{\"step\": " + std::to_string(step) +
               ", \"loss\": " + std::to_string(1.0 / step + run.base / 10) +
               ", \"accuracy\": 0.5, \"grad_norm\": 1.0, \"lr\": 0.001}\n";
  }
  // ms.train ends the log with its evaluation summary, a line with a step and no loss.
  metrics += "{\"beyond_accuracy\": 0.5, \"eval\": {\"24\": {\"accuracy\": 0.5}}, \"step\": 200}\n";
  root.write(folder + "metrics.jsonl", metrics);
  // An extra column at the end, as the contract allows.
  std::string eval =
      "step,length,accuracy,sequence_accuracy,precision,recall,loss,scored,sequences,extra\n";
  std::string positions = "step,length,position,accuracy\n";
  for (int step : {100, 200}) {
    for (int length : {24, 48}) {
      const double accuracy = step == 200 ? fake_accuracy(run, length) : 0.5;
      eval += std::to_string(step) + "," + std::to_string(length) + "," + std::to_string(accuracy) +
              ",0.1,0.5," + std::to_string(accuracy / 2) + ",0.7,100,10,x\n";
      for (int position = 0; position < length; position += 8)
        positions += std::to_string(step) + "," + std::to_string(length) + "," +
                     std::to_string(position) + "," + std::to_string(accuracy) + "\n";
    }
  }
  root.write(folder + "eval.csv", eval);
  root.write(folder + "eval_positions.csv", positions);
}

inline std::string fake_manifest(const std::string& sweep, const std::vector<FakeRun>& runs,
                                 int shards, const std::string& job_script) {
  std::string entries;
  for (const FakeRun& run : runs) {
    entries += std::string(entries.empty() ? "" : ",") + "{\"name\":\"" + fake_run_name(run) +
               "\",\"labels\":{\"mixer\":\"" + run.mixer + "\",\"train_length\":\"" +
               run.train_length + "\",\"seed\":\"" + std::to_string(run.seed) + "\"}" +
               (run.shard >= 0 ? ",\"shard\":" + std::to_string(run.shard) : "") + "}";
  }
  std::string manifest = "{\"sweep\":\"" + sweep + "\",\"script\":\"exp.lua\",";
  if (shards > 0) manifest += "\"shards\":" + std::to_string(shards) + ",";
  if (!job_script.empty()) manifest += "\"job_script\":\"" + job_script + "\",";
  return manifest +
         "\"keys\":[\"mixer\",\"train_length\"],\"values\":{\"mixer\":[\"qlstm\",\"lru\"],"
         "\"train_length\":[\"16\",\"32\"],\"seed\":[\"1\",\"2\"]},\"runs\":[" +
         entries + "]}\n";
}

}  // namespace memscript::test
