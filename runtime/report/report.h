#pragma once

// A sweep's report: SVG plots, report.md (tables) and index.html (both), written from the
// run folders alone, so that every shard's runs are merged and the report can be rebuilt at
// any time. Deterministic: the same run folders give the same bytes.

#include <filesystem>
#include <string>
#include <vector>

namespace memscript::report {

struct ReportOptions {
  std::filesystem::path sweep_folder;
  std::filesystem::path out_folder;  // empty: sweep_folder / "report"
  std::string line_key;              // grid key drawn as one line per value; "": mixer if it varies
  std::string title;                 // "": the sweep's name
};

struct ReportSummary {
  std::filesystem::path folder;
  std::vector<std::string> files;  // written, relative to folder
  int runs = 0;
  int completed = 0;
  std::vector<std::string> incomplete;  // names of runs not completed (failed, missing, ...)
  std::vector<int> shards_to_rerun;     // shard (array task) indices holding those runs
  std::vector<std::string> rerun;       // commands that rerun only the incomplete runs
  std::vector<std::string> skipped;     // "name: why" of runs whose files could not be read
};

ReportSummary write_report(const ReportOptions& options);

}  // namespace memscript::report
