#pragma once

// A run folder's layout: every name memscript writes into one, here and nowhere else.
// run_start.h creates the folder (lock, config.json, script copies), train.cpp writes what a
// run produces, checkpoint.h its checkpoint; stored_run.h and report/run_data.h read them back.
//
//   <out>/<run>/
//     config.json         how the run was called and what it is (written first)
//     script/<name>.lua   the script and its own modules, as they ran
//     status              "completed", or why not (interrupted, failed: ...)
//     metrics.jsonl       one line per logged step
//     timing.jsonl        steps per second as training went
//     eval.csv            accuracy per evaluation and length
//     eval_positions.csv  accuracy per position
//     checkpoint.pt       model, optimizer, data position: what --resume continues from
//     .lock               held while a process trains it
//     replay/, replay-1/  --replay's fresh runs of it, each a run folder of its own

namespace memscript::run_layout {

inline constexpr const char* kConfig = "config.json";
inline constexpr const char* kScripts = "script";
inline constexpr const char* kStatus = "status";
inline constexpr const char* kMetrics = "metrics.jsonl";
inline constexpr const char* kTiming = "timing.jsonl";
inline constexpr const char* kEval = "eval.csv";
inline constexpr const char* kEvalPositions = "eval_positions.csv";
inline constexpr const char* kCheckpoint = "checkpoint.pt";
inline constexpr const char* kLock = ".lock";
inline constexpr const char* kReplay = "replay";

// The files whose numbers a replay must reproduce line for line.
inline constexpr const char* kReplayed[] = {kMetrics, kEval, kEvalPositions};

}  // namespace memscript::run_layout
