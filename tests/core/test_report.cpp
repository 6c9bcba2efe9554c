#include <catch2/catch.hpp>

#include <cmath>
#include <regex>

#include "../support/process.h"
#include "report_fixture.h"
#include "runtime/options.h"
#include "runtime/report/report.h"
#include "runtime/report/run_data.h"
#include "runtime/report/seed_stats.h"
#include "runtime/report/svg_chart.h"

using namespace memscript::report;
using namespace memscript::test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// Checks that every tag is closed in order (enough to catch broken SVG/HTML generation);
// returns the first problem, or "" when the document is well formed.
std::string xml_problem(const std::string& text) {
  std::vector<std::string> open;
  const std::regex tag("<(/?)([a-zA-Z][a-zA-Z0-9]*)[^>]*?(/?)>");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), tag); it != std::sregex_iterator();
       ++it) {
    const std::smatch& m = *it;
    if (m[3] == "/") continue;  // self-closing
    if (m[1] == "/") {
      if (open.empty() || open.back() != m[2]) return "unexpected </" + m[2].str() + ">";
      open.pop_back();
    } else {
      open.push_back(m[2]);
    }
  }
  return open.empty() ? "" : "unclosed <" + open.back() + ">";
}

Figure two_panel_figure() {
  Figure figure;
  figure.title = "accuracy <by> length & mixer";
  figure.x_label = "evaluation length";
  figure.y_label = "accuracy";
  figure.log_x = true;
  figure.y_range = std::make_pair(0.0, 1.0);
  figure.legend = {"lstm", "gpt"};
  figure.panels = {
      {"train 16", {{"lstm", {{24, 1.0}, {48, 0.9}}, {}}, {"gpt", {{24, 0.8}, {48, 0.5}}, {}}}},
      {"train 32", {{"lstm", {{48, 1.0}, {96, NAN}}, {}}}}};
  return figure;
}

std::vector<FakeRun> fake_runs() {
  std::vector<FakeRun> runs;
  int shard = 0;
  for (const char* mixer : {"qlstm", "lru"})
    for (const char* length : {"16", "32"})
      for (int seed : {1, 2}) runs.push_back({mixer, length, seed, "completed", 0.9, shard++ % 3});
  return runs;
}

void write_sweep(const TempDir& root, std::vector<FakeRun> runs, int shards = 0,
                 const std::string& job_script = "") {
  for (const FakeRun& run : runs) write_fake_run(root, "s", run);
  root.write("s/sweep.json", fake_manifest("s", runs, shards, job_script));
}

ReportSummary report_of(const TempDir& root) {
  ReportOptions options;
  options.sweep_folder = root / "s";
  return write_report(options);
}

std::vector<std::string> files_in(const fs::path& folder) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("nice ticks are 1, 2 or 5 times a power of ten apart and cover the range") {
  CHECK(nice_ticks(0, 1) == std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1});
  const std::vector<double> ticks = nice_ticks(0, 2000);
  CHECK(ticks.front() == 0);
  CHECK(ticks.back() >= 2000);
  CHECK(ticks[1] - ticks[0] == 500);
  CHECK(nice_ticks(2, 4, 5, 1) == std::vector<double>{2, 3, 4});  // steps: whole numbers only
  CHECK(format_number(0.6000000000000001) == "0.6");
  CHECK(format_number(128) == "128");
  CHECK(format_number(15000) == "15000");  // a step count, not 1.5e+04
  CHECK(format_number(2.5e7) == "2.5e+07");
  CHECK(format_number(12345.5) == "1.235e+04");
  CHECK(format_number(-0.0) == "0");
}

TEST_CASE("an SVG chart is well formed, names its axes, panels and legend, and escapes text") {
  const std::string svg = render_svg(two_panel_figure());
  CHECK(xml_problem(svg) == "");
  CHECK_THAT(svg, Contains("<svg xmlns=\"http://www.w3.org/2000/svg\"") &&
                      Contains("accuracy &lt;by&gt; length &amp; mixer") &&
                      Contains(">evaluation length</text>") && Contains(">accuracy</text>") &&
                      Contains(">train 16</text>") && Contains(">train 32</text>") &&
                      Contains(">lstm</text>") && Contains(">gpt</text>") &&
                      Contains(">24</text>") && Contains(">0.6</text>"));
  // Three series with points: the NaN point of the last one is left out, not drawn.
  CHECK(std::count(svg.begin(), svg.end(), '\n') > 20);
  CHECK(svg.find("nan") == std::string::npos);
  CHECK(svg.find("inf") == std::string::npos);
}

TEST_CASE("an SVG chart is the same byte for byte every time") {
  CHECK(render_svg(two_panel_figure()) == render_svg(two_panel_figure()));
}

TEST_CASE("a CSV reader keeps columns by name and tolerates extra columns and short rows") {
  TempDir root;
  root.write("t.csv", "step,length,accuracy,extra\n1,8,0.5,x\n2,8\n3,16,0.75,y,z\n");
  const auto rows = read_csv(root / "t.csv");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].at("accuracy") == "0.5");
  CHECK(rows[1].at("length") == "16");
}

TEST_CASE("a sweep folder is read back: manifest order, labels, status, last evaluation") {
  TempDir root;
  std::vector<FakeRun> runs = fake_runs();
  runs[1].status = "failed: out of memory";
  runs[2].status = "";  // never started
  write_sweep(root, runs);
  const SweepData sweep = read_sweep(root / "s");
  REQUIRE(sweep.runs.size() == runs.size());
  CHECK(sweep.keys == std::vector<std::string>{"mixer", "train_length"});
  CHECK(sweep.runs[0].name == fake_run_name(runs[0]));
  CHECK(sweep.runs[0].labels.at("mixer") == "qlstm");
  CHECK(sweep.runs[0].complete());
  CHECK(sweep.runs[1].state() == "failed");
  CHECK(sweep.runs[2].state() == "missing");
  const auto finals = sweep.runs[0].final_evals();
  REQUIRE(finals.size() == 2);
  CHECK(finals[0].step == 200);
  CHECK(finals[0].length == 24);
  CHECK(finals[0].accuracy == Approx(fake_accuracy(runs[0], 24)));
  CHECK(sweep.runs[0].positions.size() == 2 * (3 + 6));
}

TEST_CASE("a report writes plots, report.md and an index.html that shows every plot") {
  TempDir root;
  write_sweep(root, fake_runs());
  const ReportSummary summary = report_of(root);
  CHECK(summary.folder == root / "s" / "report");
  CHECK(summary.runs == 8);
  CHECK(summary.completed == 8);
  CHECK(summary.incomplete.empty());
  const std::vector<std::string> expected = {"accuracy_by_position__train_length-16.svg",
                                             "accuracy_by_position__train_length-32.svg",
                                             "accuracy_vs_length.svg",
                                             "accuracy_vs_step__train_length-16.svg",
                                             "accuracy_vs_step__train_length-32.svg",
                                             "index.html",
                                             "loss_vs_step.svg",
                                             "recall_vs_length.svg",
                                             "recall_vs_step__train_length-16.svg",
                                             "recall_vs_step__train_length-32.svg",
                                             "report.md"};
  CHECK(files_in(summary.folder) == expected);
  const std::string html = read_file(summary.folder / "index.html");
  CHECK(xml_problem(html.substr(html.find("<html"))) == "");
  for (const std::string& file : expected) {
    if (file.size() < 4 || file.substr(file.size() - 4) != ".svg") continue;
    INFO(file);
    CHECK_THAT(html, Contains("<img src=\"" + file + "\""));
    CHECK(xml_problem(read_file(summary.folder / file)) == "");
  }
  // Recall during training: one panel per evaluation length, recall on the y axis.
  const std::string recall_by_step =
      read_file(summary.folder / "recall_vs_step__train_length-16.svg");
  CHECK_THAT(recall_by_step, Contains("recall against training step") &&
                                 Contains(">length 24</text>") && Contains(">recall</text>"));
  // One line per mixer, one panel per training length.
  const std::string by_length = read_file(summary.folder / "accuracy_vs_length.svg");
  CHECK_THAT(by_length, Contains(">qlstm</text>") && Contains(">lru</text>") &&
                            Contains(">train_length = 16</text>") &&
                            Contains(">train_length = 32</text>"));
}

TEST_CASE("report tables hold each run's last evaluation and the mean over seeds") {
  TempDir root;
  std::vector<FakeRun> runs = fake_runs();
  runs[1].base = 0.7;  // qlstm, 16, seed 2: mean with seed 1 (0.9) is 0.8
  write_sweep(root, runs);
  report_of(root);
  const std::string md = read_file(root / "s/report/report.md");
  CHECK_THAT(md, Contains("| train_length | mixer | 24 | 48 |"));
  CHECK_THAT(md, Contains("| 16 | qlstm | 0.7760 | 0.7520 |"));  // mean of 0.876 and 0.676
  CHECK_THAT(md, Contains("| 32 | lru | 0.8760 | 0.8520 |"));
  // One row per run, values as in its eval.csv.
  CHECK_THAT(md, Contains("| mixer=qlstm,train_length=16,seed=2 | qlstm | 16 | 2 | completed | "
                          "200 | 0.0750 | 0.6760 | 0.6520 | 0.3380 | 0.3260 |"));
  int rows = 0;
  for (const FakeRun& run : runs)
    rows += md.find("| " + fake_run_name(run) + " |") != std::string::npos;
  CHECK(rows == 8);
}

TEST_CASE("a report is the same byte for byte when written twice") {
  TempDir root;
  write_sweep(root, fake_runs());
  const ReportSummary first = report_of(root);
  std::map<std::string, std::string> before;
  for (const std::string& file : first.files) before[file] = read_file(first.folder / file);
  const ReportSummary second = report_of(root);
  for (const std::string& file : second.files) {
    INFO(file);
    CHECK(read_file(second.folder / file) == before[file]);
  }
}

TEST_CASE("a report lists runs not completed with the command that reruns only their shards") {
  TempDir root;
  std::vector<FakeRun> runs = fake_runs();  // shards 0,1,2,0,1,2,0,1
  runs[2].status = "failed: boom";          // shard 2
  runs[7].status = "";                      // shard 1, never ran
  write_sweep(root, runs, 3, "/jobs/exp.sbatch");
  std::string manifest = read_file(root / "s/sweep.json");
  manifest.insert(
      1,
      "\"command_line\":[\"/bin/memscript\",\"--shard\",\"0/3\",\"--set\",\"a=b c\",\"exp.lua\"],");
  root.write("s/sweep.json", manifest);
  const ReportSummary summary = report_of(root);
  CHECK(summary.completed == 6);
  CHECK(summary.incomplete ==
        std::vector<std::string>{fake_run_name(runs[2]), fake_run_name(runs[7])});
  CHECK(summary.shards_to_rerun == std::vector<int>{1, 2});
  REQUIRE_FALSE(summary.rerun.empty());
  CHECK(summary.rerun ==
        std::vector<std::string>{"sbatch --array=1,2 /jobs/exp.sbatch",
                                 "/bin/memscript --shard 1/3 --set 'a=b c' exp.lua",
                                 "/bin/memscript --shard 2/3 --set 'a=b c' exp.lua"});
  const std::string md = read_file(summary.folder / "report.md");
  CHECK_THAT(md, Contains("failed: boom (shard 2)") && Contains("missing (shard 1)") &&
                     Contains("sbatch --array=1,2 /jobs/exp.sbatch"));
}

TEST_CASE("a report reads run folders without a manifest, labelled by mixer") {
  TempDir root;
  write_fake_run(root, "plain", {"lstm", "8", 1, "completed", 0.9});
  write_fake_run(root, "plain", {"gpt", "8", 1, "completed", 0.8});
  fs::remove(root / "plain" / fake_run_name({"gpt", "8", 1, "", 0}) / "eval_positions.csv");
  ReportOptions options;
  options.sweep_folder = root / "plain";
  const ReportSummary summary = write_report(options);
  CHECK(summary.runs == 2);
  CHECK_THAT(read_file(summary.folder / "accuracy_vs_length.svg"),
             Contains(">lstm</text>") && Contains(">gpt</text>"));
}

TEST_CASE("a report of a folder that does not exist is a clear error") {
  TempDir root;
  ReportOptions options;
  options.sweep_folder = root / "nothing";
  CHECK_THROWS_WITH(write_report(options), Contains("no sweep folder"));
  options.sweep_folder = root.path();
  options.line_key = "colour";
  root.write("r/status", "completed\n");
  CHECK_THROWS_WITH(write_report(options), Contains("option 'line' = \"colour\""));
}

TEST_CASE("a report skips runs whose files are damaged, says why, and plots no phantom length") {
  TempDir root;
  std::vector<FakeRun> runs = fake_runs();
  write_sweep(root, runs);
  const std::string truncated = fake_run_name(runs[0]);
  const std::string garbage = fake_run_name(runs[1]);
  const std::string metrics = read_file(root / ("s/" + truncated + "/metrics.jsonl"));
  root.write("s/" + truncated + "/metrics.jsonl", metrics.substr(0, metrics.size() / 2));
  root.write("s/" + garbage + "/eval.csv", "step,length,accuracy\n200,-1,0.9\nnot,a,row\n");
  const ReportSummary summary = report_of(root);
  REQUIRE(summary.skipped.size() == 2);
  CHECK_THAT(summary.skipped[0],
             Contains(truncated + ": metrics.jsonl line ") && Contains(": not a JSON object"));
  CHECK_THAT(summary.skipped[1], Contains(garbage + ": eval.csv line 2: 'length' is not a whole "
                                                    "number >= 1"));
  CHECK(summary.completed == 6);
  const std::string md = read_file(summary.folder / "report.md");
  CHECK_THAT(md, Contains("skipped, its files are damaged"));
  CHECK(md.find("| -1 |") == std::string::npos);
  CHECK(read_file(summary.folder / "accuracy_vs_length.svg").find(">-1<") == std::string::npos);
}

TEST_CASE(
    "a manifest with values of the wrong type or run names that are paths is refused or skipped") {
  TempDir root;
  write_sweep(root, fake_runs());
  root.write("s/sweep.json", "{\"sweep\": 5, \"runs\": []}");
  CHECK_THROWS_WITH(report_of(root), Contains("sweep.json is not a sweep manifest"));
  root.write(
      "s/sweep.json",
      "{\"sweep\": \"s\", \"runs\": [{\"name\": \"../../etc\"}, 7, {\"name\": \".hidden\"}]}");
  const ReportSummary summary = report_of(root);
  CHECK(summary.runs == 8);  // the run folders found by listing, none of the manifest's names
}

TEST_CASE("seed statistics: the mean, a Student-t 95% interval, the worst and the best seed") {
  const SeedStats three = seed_stats({0.8, 0.9, 1.0, std::nan("")});
  CHECK(three.n == 3);
  CHECK(three.mean == Approx(0.9));
  // s = 0.1, t(0.975, 2) = 4.3027: half width 4.3027 * 0.1 / sqrt(3)
  CHECK(three.high - three.mean == Approx(4.3027 * 0.1 / std::sqrt(3.0)).epsilon(1e-6));
  CHECK(three.mean - three.low == Approx(three.high - three.mean));
  CHECK(three.min == 0.8);
  CHECK(three.max == 1.0);
  const SeedStats one = seed_stats({0.5});
  CHECK(one.n == 1);
  CHECK(one.mean == 0.5);
  CHECK(std::isnan(one.low));
  CHECK(std::isnan(one.high));
  CHECK(seed_stats({}).n == 0);
  CHECK(std::isnan(seed_stats({}).mean));
  // The table's values and the expansion beyond it (exact: 2.0395 at 31, 1.9840 at 100).
  CHECK(student_t_975(1) == Approx(12.7062));
  CHECK(student_t_975(30) == Approx(2.0423));
  CHECK(student_t_975(31) == Approx(2.0395).epsilon(1e-4));
  CHECK(student_t_975(100) == Approx(1.9840).epsilon(1e-4));
}

TEST_CASE("a report of several seeds gives each cell's interval and best seed, and draws bands") {
  TempDir root;
  std::vector<FakeRun> runs = fake_runs();
  runs[1].base = 0.7;  // qlstm, 16, seed 2: 0.676 at 24 against seed 1's 0.876
  write_sweep(root, runs);
  const ReportSummary summary = report_of(root);
  const std::string md = read_file(summary.folder / "report.md");
  CHECK_THAT(md, Contains("Accuracy over seeds: the mean, its 95% interval (Student t"));
  CHECK_THAT(md, Contains("| train_length | mixer | length | seeds | mean | 95% interval (t) | "
                          "min | best of seeds |"));
  // mean 0.776, s = 0.1414, t(0.975, 1) = 12.7062: half width 1.2706, [-0.4946, 2.0466] clipped
  // to the range of an accuracy.
  CHECK_THAT(md, Contains("| 16 | qlstm | 24 | 2 | 0.7760 | [0.0000, 1.0000] | 0.6760 | 0.8760 |"));
  CHECK_THAT(md, Contains("clipped to [0, 1]"));
  CHECK_THAT(md, Contains("| 32 | lru | 48 | 2 | 0.8520 | [0.8520, 0.8520] | 0.8520 | 0.8520 |"));
  const std::string svg = read_file(summary.folder / "accuracy_vs_length.svg");
  CHECK_THAT(svg, Contains("fill-opacity=\"0.15\""));
  CHECK_THAT(read_file(summary.folder / "index.html"), Contains("best of seeds"));
}

TEST_CASE("a report of one seed draws no band and gives no interval table") {
  TempDir root;
  std::vector<FakeRun> runs;
  for (const FakeRun& run : fake_runs())
    if (run.seed == 1) runs.push_back(run);
  write_sweep(root, runs);
  const ReportSummary summary = report_of(root);
  CHECK(read_file(summary.folder / "report.md").find("best of seeds") == std::string::npos);
  CHECK(read_file(summary.folder / "accuracy_vs_length.svg").find("fill-opacity") ==
        std::string::npos);
}

TEST_CASE("an SVG chart's legend entries are as wide as their longest label") {
  // Read back each legend label's x: entries in one row must be at least that label apart.
  const auto label_xs = [](const Figure& figure) {
    const std::string svg = render_svg(figure);
    std::vector<double> xs;
    for (const std::string& label : figure.legend) {
      const size_t end = svg.find(">" + label + "</text>");
      REQUIRE(end != std::string::npos);
      const size_t at = svg.rfind("<text x=\"", end);
      xs.push_back(std::stod(svg.substr(at + 9)));
    }
    return xs;
  };
  Figure figure;
  figure.panels = {{"", {{"a", {{1, 0.5}, {2, 0.7}}, {}}}}};
  figure.legend = {"lstm", "gpt", "mamba"};
  std::vector<double> xs = label_xs(figure);
  CHECK(xs[1] - xs[0] == Approx(150));  // short labels: the usual 150 px apart
  figure.legend = {"width 64, lr 0.0001", "width 128, lr 0.00046", "width 64, lr 0.01"};
  xs = label_xs(figure);
  // The next entry's swatch (28 px) after 21 characters of Helvetica 12 (6.67 px a digit).
  CHECK(xs[1] - xs[0] >= 28 + 21 * 6.67);
  CHECK(xs[2] - xs[1] >= 28 + 21 * 6.67);  // three fit one row of the 608 px chart
}

TEST_CASE("an SVG chart draws no y tick outside its plot when the range is widened to ticks") {
  Figure figure;
  figure.legend = {"a"};
  // 0.49 .. 0.74 widens to 0.45 .. 0.75, whose own ticks would step 0.1 from 0.4 to 0.8.
  figure.panels = {{"", {{"a", {{1, 0.49}, {2, 0.74}}, {}}}}};
  const std::string svg = render_svg(figure);
  CHECK_THAT(svg, Contains(">0.5</text>") && Contains(">0.7</text>"));
  CHECK(svg.find(">0.4</text>") == std::string::npos);
  CHECK(svg.find(">0.8</text>") == std::string::npos);
}

TEST_CASE("damaged numbers and command lines in a sweep's files neither crash nor mislead") {
  TempDir root;
  std::vector<FakeRun> runs = fake_runs();
  runs[2].status = "failed: boom";
  write_sweep(root, runs, 3);
  // A manifest whose command line is only a shard option.
  std::string manifest = read_file(root / "s/sweep.json");
  manifest.insert(1, "\"command_line\":[\"--shard\",\"0/3\"],");
  root.write("s/sweep.json", manifest);
  // A step too large for an integer.
  const std::string run = fake_run_name(runs[0]);
  root.write("s/" + run + "/metrics.jsonl", "{\"step\": 1e300, \"loss\": 0.5}\n");
  const ReportSummary summary = report_of(root);
  REQUIRE_FALSE(summary.rerun.empty());
  INFO(summary.rerun[0]);
  CHECK(summary.rerun.back().rfind("memscript --shard", 0) == 0);
  REQUIRE(summary.skipped.size() == 1);
  CHECK_THAT(summary.skipped[0], Contains("no step number"));
}

TEST_CASE("a report sums up evaluated ranges: one mean per range and seed, then over seeds") {
  TempDir root;
  std::vector<FakeRun> runs = fake_runs();
  runs[1].base = 0.7;  // qlstm, 16, seed 2
  write_sweep(root, runs);
  // Length 24 lies in the range 20..30; 48 was asked for by itself.
  for (const FakeRun& run : runs) {
    root.write("s/" + fake_run_name(run) + "/config.json",
               "{\"model\": {\"mixer\": \"" + run.mixer +
                   "\"}, \"train\": {\"eval\": {\"ranges\": [{\"min\": 20, \"max\": 30}]}}}\n");
  }
  const ReportSummary summary = report_of(root);
  REQUIRE(summary.ranges.size() == 4);  // (train_length, mixer) cells
  const RangeSummary& first = summary.ranges[0];
  CHECK(first.line == "qlstm");
  CHECK(first.labels.at("train_length") == "16");
  CHECK(first.labels.at("mixer") == "qlstm");
  CHECK((first.min == 20 && first.max == 30));
  CHECK(first.accuracy.n == 2);
  CHECK(first.accuracy.mean == Approx(0.776));
  CHECK(first.accuracy.max == Approx(0.876));
  CHECK(first.scaled_accuracy.n == 0);  // eval.csv without scaled_accuracy: not measured
  const std::string md = read_file(root / "s/report/report.md");
  CHECK_THAT(md, Contains("## Mean over each evaluated range"));
  CHECK_THAT(md, Contains("| 16 | qlstm | 20–30 | 2 | 0.7760 | ["));
  // The by-length tables keep only the length outside the range.
  CHECK_THAT(md, Contains("| train_length | mixer | 48 |"));
  CHECK_THAT(md, Contains("| acc 20–30 | scaled 20–30 |"));
  CHECK(md.find("| 24 |") == std::string::npos);
  // Nor do the plots with one panel per length draw a length of the range.
  int by_step = 0;
  for (const std::string& name : files_in(root / "s/report")) {
    if (name.rfind("accuracy_vs_step", 0) != 0 && name.rfind("accuracy_by_position", 0) != 0)
      continue;
    ++by_step;
    const std::string svg = read_file(root / "s/report" / name);
    CHECK(svg.find("length 48") != std::string::npos);
    CHECK(svg.find("length 24") == std::string::npos);
  }
  CHECK(by_step > 0);
}

TEST_CASE("runs of an earlier grid of the sweep keep the labels their names give") {
  // The sweep ran mixer = gpt first, then (same folder) the grid of qlstm and lru: today's
  // manifest lists the latter alone, and the report must take both, each with its labels.
  TempDir root;
  const std::vector<FakeRun> listed = fake_runs();
  const std::vector<FakeRun> earlier = {{"gpt", "16", 1, "completed", 0.6},
                                        {"gpt", "16", 2, "completed", 0.6}};
  write_sweep(root, listed);
  for (const FakeRun& run : earlier) write_fake_run(root, "s", run);
  for (const std::vector<FakeRun>* runs : {&listed, &earlier}) {
    for (const FakeRun& run : *runs) {
      root.write("s/" + fake_run_name(run) + "/config.json",
                 "{\"model\": {\"mixer\": \"" + run.mixer +
                     "\"}, \"train\": {\"eval\": {\"ranges\": [{\"min\": 20, \"max\": 30}]}}}\n");
    }
  }
  // And a run under another kind of name, labelled by its mixer as before (the table's cell of
  // a key it lacks is "-").
  const FakeRun by_hand = {"lstm", "8", 1, "completed", 0.5};
  write_fake_run(root, "s", by_hand);
  fs::rename(root / "s" / fake_run_name(by_hand), root / "s/by-hand");
  root.write("s/by-hand/config.json",
             "{\"model\": {\"mixer\": \"lstm\"}, \"train\": {\"eval\": {\"ranges\": "
             "[{\"min\": 20, \"max\": 30}]}}}\n");
  const ReportSummary summary = report_of(root);
  CHECK(summary.runs == 11);
  const auto gpt = std::find_if(summary.ranges.begin(), summary.ranges.end(),
                                [](const RangeSummary& r) { return r.line == "gpt"; });
  REQUIRE(gpt != summary.ranges.end());
  CHECK(gpt->labels.at("train_length") == "16");
  CHECK(gpt->accuracy.n == 2);
  const std::string md = read_file(root / "s/report/report.md");
  CHECK_THAT(md, Contains("| 16 | gpt | 20–30 | 2 |"));
  CHECK_THAT(md, Contains("| - | lstm |"));
}

namespace {

// A manifest that lists `listed` alone, its grid being the values those runs take: the way a
// sweep run with part of its grid (`--set mixers=gpt`) writes it into a folder holding more.
std::string partial_manifest(const std::vector<FakeRun>& listed) {
  std::vector<std::string> mixers, lengths;
  for (const FakeRun& run : listed) {
    if (!std::count(mixers.begin(), mixers.end(), run.mixer)) mixers.push_back(run.mixer);
    if (!std::count(lengths.begin(), lengths.end(), run.train_length))
      lengths.push_back(run.train_length);
  }
  const auto list = [](const std::vector<std::string>& values) {
    std::string text;
    for (const std::string& value : values) text += (text.empty() ? "\"" : ",\"") + value + "\"";
    return "[" + text + "]";
  };
  std::string entries;
  for (const FakeRun& run : listed)
    entries += std::string(entries.empty() ? "" : ",") + "{\"name\":\"" + fake_run_name(run) +
               "\",\"labels\":{\"mixer\":\"" + run.mixer + "\",\"train_length\":\"" +
               run.train_length + "\",\"seed\":\"" + std::to_string(run.seed) + "\"}}";
  return "{\"sweep\":\"s\",\"script\":\"exp.lua\",\"keys\":[\"mixer\",\"train_length\"],"
         "\"values\":{\"mixer\":" +
         list(mixers) + ",\"train_length\":" + list(lengths) + "},\"runs\":[" + entries + "]}\n";
}

// The data rows of the report's table that starts with `header`, in order.
std::vector<std::string> table_rows(const std::string& md, const std::string& header) {
  std::vector<std::string> rows;
  size_t at = md.find(header);
  if (at == std::string::npos) return rows;
  at = md.find('\n', md.find('\n', at) + 1) + 1;  // past the header and its rule
  while (at < md.size() && md[at] == '|') {
    const size_t end = md.find('\n', at);
    rows.push_back(md.substr(at, end - at));
    at = end + 1;
  }
  return rows;
}

}  // namespace

TEST_CASE("a report orders its rows by value, whichever part of the grid ran last") {
  // Sizes as Zoology's script names them and learning rates as numbers: by name, "128x8" would
  // come before "64x4" and "0.01" before "0.0022".
  std::vector<FakeRun> runs;
  for (const char* mixer : {"qlstm", "gpt"})
    for (const char* length : {"256x16", "64x4", "128x8", "0.01", "0.0022", "1e-4"})
      for (int seed : {1, 2}) runs.push_back({mixer, length, seed, "completed", 0.9});
  TempDir root;
  for (const FakeRun& run : runs) write_fake_run(root, "s", run);
  const auto report_listing = [&](const std::vector<FakeRun>& listed) {
    root.write("s/sweep.json", partial_manifest(listed));
    report_of(root);
    return read_file(root / "s/report/report.md");
  };
  // Two parts of the grid, each listing some of the values of both keys.
  const std::vector<FakeRun> gpt_at_64x4(runs.begin() + 14, runs.begin() + 16);
  std::vector<FakeRun> qlstm_two_sizes(runs.begin(), runs.begin() + 2);
  qlstm_two_sizes.insert(qlstm_two_sizes.end(), runs.begin() + 10, runs.begin() + 12);
  const std::string after_gpt = report_listing(gpt_at_64x4);
  const std::string after_qlstm = report_listing(qlstm_two_sizes);
  const std::vector<std::string> rows = table_rows(after_gpt, "| train_length | mixer | 24 |");
  REQUIRE(rows.size() == 12);
  const std::vector<std::string> lengths = {"1e-4", "0.0022", "0.01", "64x4", "128x8", "256x16"};
  for (size_t i = 0; i < rows.size(); ++i) {
    INFO(rows[i]);
    CHECK(rows[i].rfind("| " + lengths[i / 2] + " | " + (i % 2 ? "qlstm" : "gpt") + " |", 0) == 0);
  }
  CHECK(after_qlstm == after_gpt);

  // A grid that lists every value in the folder keeps the script's order of them.
  const std::string whole = report_listing(runs);
  const std::vector<std::string> in_grid_order = table_rows(whole, "| train_length | mixer | 24 |");
  REQUIRE(in_grid_order.size() == 12);
  CHECK(in_grid_order[0].rfind("| 256x16 | qlstm |", 0) == 0);
  CHECK(in_grid_order[1].rfind("| 256x16 | gpt |", 0) == 0);
  CHECK(in_grid_order[11].rfind("| 1e-4 | gpt |", 0) == 0);
}
