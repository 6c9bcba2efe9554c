// The experiments of experiments/, each in its quick variant (`--set quick=true`, a few steps
// per run): the script as committed runs end to end, trains every run of its sweep and writes
// the report its README shows. The full runs are `make experiments`.

#include <catch2/catch.hpp>

#include "../support/process.h"

using namespace memscript::test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

struct Experiment {
  const char* name;
  int runs;
  const char* script = nullptr;  // a second script of the folder, and the sweep it writes
  const char* sweep = nullptr;
};

// Runs experiments/<path> with the flags and --set values given, into cwd/<out>.
ProcessResult run_experiment(const std::string& path, std::vector<std::string> flags,
                             const std::vector<std::string>& sets, const TempDir& cwd,
                             const std::string& out = "out") {
  for (const std::string& set : sets) flags.insert(flags.end(), {"--set", set});
  flags.insert(flags.end(),
               {"--out", out, std::string(MEMSCRIPT_SOURCE_DIR) + "/experiments/" + path});
  return run_process(MEMSCRIPT_BINARY, flags, cwd.path());
}

// Runs experiments/<path> in its quick variant with more --set values, into cwd/out.
ProcessResult run_quick_with(const std::string& path, const std::vector<std::string>& sets,
                             const TempDir& cwd) {
  return run_experiment(path, {"--quiet", "--threads", "1", "--set", "quick=true"}, sets, cwd);
}

// Runs experiments/<name>/<name>.lua (or the folder's other script) quickly into a temporary
// output folder; checks that every run completed and the report is there.
void run_quick(const Experiment& experiment, const TempDir& cwd) {
  const auto r = run_quick_with(
      std::string(experiment.name) + "/" +
          (experiment.script ? experiment.script : experiment.name + std::string(".lua")),
      {}, cwd);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const fs::path sweep =
      cwd.path() / "out" / (experiment.sweep ? experiment.sweep : experiment.name);
  int completed = 0;
  for (const auto& entry : fs::directory_iterator(sweep)) {
    if (!fs::is_regular_file(entry.path() / "status")) continue;
    INFO(entry.path());
    CHECK(read_file(entry.path() / "status") == "completed\n");
    ++completed;
  }
  CHECK(completed == experiment.runs);
  for (const char* file :
       {"report.md", "index.html", "accuracy_vs_length.svg", "loss_vs_step.svg"}) {
    INFO(file);
    CHECK(fs::is_regular_file(sweep / "report" / file));
  }
}

}  // namespace

TEST_CASE("experiment parity-ones runs end to end in its quick variant") {
  TempDir cwd;
  run_quick({"parity-ones", 16}, cwd);
}

TEST_CASE("experiment dyck-lengths runs end to end in its quick variant") {
  TempDir cwd;
  run_quick({"dyck-lengths", 8}, cwd);
}

TEST_CASE("experiment eigenvalues runs end to end in its quick variant") {
  TempDir cwd;
  run_quick({"eigenvalues", 7}, cwd);
  CHECK_THAT(read_file(cwd.path() / "out/eigenvalues/report/report.md"),
             Contains("deltanet-neg+gpt") && Contains("mamba-neg"));
}

TEST_CASE("experiment mqar-pairs runs end to end in its quick variant, with its plot by pairs") {
  TempDir cwd;
  run_quick({"mqar-pairs", 8}, cwd);
  const fs::path report = cwd.path() / "out/mqar-pairs/report";
  CHECK(fs::is_regular_file(report / "accuracy_vs_pairs.svg"));
  const std::string table = read_file(report / "accuracy_vs_pairs.md");
  CHECK_THAT(table,
             Contains("| mixer | seeds | 4 pairs | 64 pairs |") && Contains("| deltanet | 1 |"));
  CHECK(fs::is_regular_file(cwd.path() / "out/mqar-pairs/mixer=gpt,seed=41/accuracy_by_pairs.csv"));
}

TEST_CASE("experiment grazzi-table3 runs end to end in its quick variant, with the paper's table") {
  TempDir cwd;
  run_quick({"grazzi-table3", 10}, cwd);
  const std::string table = read_file(cwd.path() / "out/grazzi-table3/report/table3.md");
  CHECK_THAT(table, Contains("| deltanet-neg | 1.000 | ") && Contains("| 0.971 | "));
  // Every cell holds memscript's number for its runs (report.ranges); none is missing.
  CHECK_THAT(table, Contains("| mamba-neg | 1.000 | ") && Contains(" (n = 1) |"));
  CHECK(table.find("| – |") == std::string::npos);
}

TEST_CASE("experiment grazzi-table3 runs a part of its table with --set models and tasks") {
  TempDir cwd;
  const auto part =
      run_quick_with("grazzi-table3/grazzi-table3.lua", {"models=mamba-neg", "tasks=parity"}, cwd);
  INFO(part.out << part.err);
  REQUIRE(part.exit_code == 0);
  CHECK(fs::is_regular_file(cwd.path() /
                            "out/grazzi-table3/task=parity,model=mamba-neg,seed=41/status"));
  CHECK_FALSE(fs::exists(cwd.path() / "out/grazzi-table3/task=parity,model=deltanet,seed=41"));
  // The paper's table keeps every row; the models not run have no number.
  const std::string table = read_file(cwd.path() / "out/grazzi-table3/report/table3.md");
  CHECK_THAT(table, Contains("| mamba-neg | 1.000 | ") && Contains("| deltanet | 0.017 | – |"));
  const auto unknown = run_experiment("grazzi-table3/grazzi-table3.lua", {"--quiet"},
                                      {"tasks=parity,dyck"}, cwd, "out2");
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.err, Contains("--set tasks=parity,dyck: expected a comma-separated list "
                                   "from: parity, arithmetic (item 2 is 'dyck')"));
  CHECK_FALSE(fs::exists(cwd.path() / "out2/grazzi-table3"));
}

TEST_CASE("experiment grazzi-s5 runs end to end in its quick variant") {
  TempDir cwd;
  run_quick({"grazzi-s5", 5}, cwd);
  CHECK_THAT(read_file(cwd.path() / "out/grazzi-s5/report/report.md"),
             Contains("deltanet-neg-1") && Contains("deltanet-5") && Contains("mamba-1"));
}

TEST_CASE("experiment chomsky-regular runs end to end in its quick variant, with Table 2") {
  TempDir cwd;
  run_quick({"chomsky-regular", 28}, cwd);
  const std::string table = read_file(cwd.path() / "out/chomsky-regular/report/table2.md");
  CHECK_THAT(table, Contains("| lstm | 100 | ") && Contains("| gpt-alibi | ") &&
                        Contains("| gpt-relative | ") &&
                        Contains("| transformer: best position kind | 52.0 | "));
}

TEST_CASE("experiment chomsky-regular runs a part of its table and names an unknown model") {
  TempDir cwd;
  const std::string script = "chomsky-regular/chomsky-regular.lua";
  const auto part =
      run_quick_with(script, {"models=gpt-relative", "tasks=cycle_navigation,parity"}, cwd);
  INFO(part.out << part.err);
  REQUIRE(part.exit_code == 0);
  int runs = 0;
  for (const auto& entry : fs::directory_iterator(cwd.path() / "out/chomsky-regular")) {
    if (!fs::is_regular_file(entry.path() / "status")) continue;
    CHECK_THAT(entry.path().filename().string(), Contains("model=gpt-relative"));
    ++runs;
  }
  CHECK(runs == 2);
  const auto unknown = run_experiment(script, {"--quiet"}, {"models=gpt-xl"}, cwd, "out2");
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.err, Contains("--set models=gpt-xl: expected a comma-separated list from: "
                                   "lstm, gpt-none") &&
                              Contains("gpt-alibi, gpt-relative (item 1 is 'gpt-xl')"));
  CHECK_FALSE(fs::exists(cwd.path() / "out2/chomsky-regular"));
}

TEST_CASE("experiment chomsky-regular's lstm-budget.lua runs end to end in its quick variant") {
  TempDir cwd;
  run_quick({"chomsky-regular", 4, "lstm-budget.lua", "chomsky-lstm-budget"}, cwd);
  // Arithmetic counts its '=' cell, as in Table 2: tested one past 41.
  const std::string eval =
      read_file(cwd.path() /
                "out/chomsky-lstm-budget/lstm=lstm,mlp_ratio=4,task=arithmetic,seed=41/eval.csv");
  CHECK_THAT(eval, Contains("\n20,42,"));
  // An LSTM or task the script does not have: one line naming it, before anything is written.
  const std::string script = "chomsky-regular/lstm-budget.lua";
  const auto lstm = run_experiment(script, {}, {"lstms=gru"}, cwd, "out2");
  CHECK(lstm.exit_code == 2);
  CHECK_THAT(lstm.err, Contains("--set lstms=gru: expected a comma-separated list from: haiku, "
                                "lstm (item 1 is 'gru')"));
  const auto task = run_experiment(script, {}, {"tasks=even_pairs,parity"}, cwd, "out2");
  CHECK(task.exit_code == 2);
  CHECK_THAT(task.err, Contains("--set tasks=even_pairs,parity: expected a comma-separated list "
                                "from: arithmetic, cycle_navigation, even_pairs (item 2 is "
                                "'parity')"));
  CHECK_FALSE(fs::exists(cwd.path() / "out2"));
}

TEST_CASE("experiment grazzi-table3's arithmetic-budget.lua runs end to end in its quick variant") {
  TempDir cwd;
  run_quick({"grazzi-table3", 2, "arithmetic-budget.lua", "grazzi-arithmetic-budget"}, cwd);
  // Table 3's metric from the run folders' models: one row per model and per run.
  const std::string table = read_file(cwd.path() / "out/grazzi-arithmetic-budget/report/table3.md");
  CHECK_THAT(table, Contains("over lengths 40–44") && Contains("| deltanet-neg | 0.971 | ") &&
                        Contains("| deltanet | 0.314 | ") && Contains("| deltanet-neg | 41 | ") &&
                        Contains("| deltanet | 41 | "));
}

TEST_CASE("experiment grazzi-table3's arithmetic-budget.lua runs its short-conv models") {
  TempDir cwd;
  const auto r = run_quick_with(
      "grazzi-table3/arithmetic-budget.lua",
      {"models=deltanet-neg-conv,deltanet-conv,deltanet-neg-fla,deltanet-neg-fla-qkv,"
       "deltanet-neg-fla-blocks,deltanet-neg-fla-xavier"},
      cwd);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const fs::path sweep = cwd.path() / "out/grazzi-arithmetic-budget";
  for (const char* run : {"model=deltanet-neg-conv,seed=41", "model=deltanet-conv,seed=41",
                          "model=deltanet-neg-fla,seed=41"}) {
    INFO(run);
    CHECK(read_file(sweep / run / "status") == "completed\n");
    CHECK_THAT(read_file(sweep / run / "config.json"), Contains("\"short_conv\": 4"));
  }
  CHECK_THAT(read_file(sweep / "model=deltanet-neg-conv,seed=41/config.json"),
             Contains("\"negative_eigenvalues\": true") && !Contains("o_norm"));
  CHECK_THAT(read_file(sweep / "model=deltanet-neg-fla,seed=41/config.json"),
             Contains("\"negative_eigenvalues\": true") && Contains("\"o_norm\": true"));
  CHECK_THAT(read_file(sweep / "model=deltanet-neg-fla-qkv,seed=41/config.json"),
             Contains("\"qkv_conv\": 4") && Contains("\"o_norm\": true") &&
                 Contains("\"beta_bias\": false") && !Contains("short_conv") &&
                 !Contains("swiglu"));
  CHECK_THAT(read_file(sweep / "model=deltanet-neg-fla-blocks,seed=41/config.json"),
             Contains("\"qkv_conv\": 4") && Contains("\"mlp\": \"swiglu\"") &&
                 Contains("\"norm\": \"rms\"") && Contains("\"norm_eps\": 1e-06") &&
                 !Contains("xavier_gain"));
  CHECK_THAT(read_file(sweep / "model=deltanet-neg-fla-xavier,seed=41/config.json"),
             Contains("\"qkv_conv\": 4") && Contains("\"mlp\": \"swiglu\"") &&
                 Contains("\"xavier_gain\": 0.17677669529663"));
  const std::string table = read_file(sweep / "report/table3.md");
  CHECK_THAT(table, Contains("| deltanet-neg-conv | 0.971 | ") &&
                        Contains("| deltanet-conv | 0.314 | ") &&
                        Contains("| deltanet-neg-fla | 0.971 | ") &&
                        Contains("| deltanet-neg-fla-qkv | 0.971 | ") &&
                        Contains("| deltanet-neg-fla-blocks | 0.971 | ") &&
                        Contains("| deltanet-neg-fla-xavier | 0.971 | ") &&
                        Contains("| deltanet-neg-conv | 41 | "));
  const auto unknown = run_quick_with("grazzi-table3/arithmetic-budget.lua", {"models=conv"}, cwd);
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.err, Contains("--set models=conv: expected a comma-separated list from: "
                                   "deltanet, deltanet-conv, deltanet-neg, deltanet-neg-conv, "
                                   "deltanet-neg-fla, deltanet-neg-fla-blocks, "
                                   "deltanet-neg-fla-qkv, deltanet-neg-fla-xavier, mamba-neg, "
                                   "transformer (item 1 is 'conv')"));
}

TEST_CASE(
    "experiment grazzi-table3's arithmetic-budget.lua takes the authors' optimizer and batch") {
  TempDir cwd;
  const auto r = run_quick_with("grazzi-table3/arithmetic-budget.lua",
                                {"models=deltanet-neg-conv", "clip=0", "min_lr=1e-6"}, cwd);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::string config = read_file(
      cwd.path() / "out/grazzi-arithmetic-budget/model=deltanet-neg-conv,seed=41/config.json");
  CHECK_THAT(config, Contains("\"clip\": 0.0") && Contains("\"min_lr\": 1e-06"));
  // The authors' budget, planned: batch 256 for 100,000 steps.
  const auto budget =
      run_experiment("grazzi-table3/arithmetic-budget.lua", {"--dry-run"},
                     {"models=deltanet-neg-conv", "batch=256", "steps=100000"}, cwd, "plan");
  INFO(budget.out << budget.err);
  CHECK(budget.exit_code == 0);
  CHECK_THAT(budget.out, Contains("for 100000 steps, batch 256, length 3..40"));
  // In a folder of its own: in cwd the run above is complete, and the sweep would only check it.
  TempDir other;
  const auto negative = run_quick_with("grazzi-table3/arithmetic-budget.lua",
                                       {"models=deltanet-neg-conv", "clip=-1"}, other);
  CHECK(negative.exit_code == 1);
  CHECK_THAT(negative.err, Contains("failed: model=deltanet-neg-conv,seed=41: ") &&
                               Contains("option 'clip' must be in [0, inf], got -1") &&
                               Contains("1 sweep run failed"));
}

TEST_CASE("experiment grazzi-table3's mamba-neg-budget.lua runs end to end in its quick variant") {
  TempDir cwd;
  run_quick({"grazzi-table3", 3, "mamba-neg-budget.lua", "grazzi-mamba-neg"}, cwd);
}

TEST_CASE("experiment lua-mixers runs end to end in its quick variant, deltanet_lua as deltanet") {
  TempDir cwd;
  run_quick({"lua-mixers", 4}, cwd);
  const fs::path sweep = cwd.path() / "out/lua-mixers";
  // From deltanet's weights the Lua twin trains to the same bits (the README's check).
  CHECK(read_file(sweep / "model=deltanet_lua,seed=41/metrics.jsonl") ==
        read_file(sweep / "model=deltanet,seed=41/metrics.jsonl"));
  CHECK_THAT(read_file(sweep / "report/first_error.md"),
             Contains("| deltanet_lua | ") && Contains("| mamba2_lua-neg | "));
}

TEST_CASE("experiment zoology-mqar runs end to end in its quick variant, with Figure 2's table") {
  TempDir cwd;
  run_quick({"zoology-mqar", 2}, cwd);
  const std::string table = read_file(cwd.path() / "out/zoology-mqar/report/figure2.md");
  CHECK_THAT(table, Contains("| attention | 64 | ") && Contains("| deltanet | 64 | "));
  // The recurrent mixers get Zoology's short convolution; attention has none.
  const fs::path sweep = cwd.path() / "out/zoology-mqar";
  CHECK_THAT(read_file(sweep / "size=64x4,width=64,model=deltanet,lr=0.001,seed=41/config.json"),
             Contains("\"short_conv\": 4"));
  CHECK_THAT(read_file(sweep / "size=64x4,width=64,model=attention,lr=0.001,seed=41/config.json"),
             !Contains("short_conv"));
}

TEST_CASE("experiment zoology-mqar run in parts into one folder reports every part in one table") {
  // The README's way to run the figure on short leases: part of the grid at a time.
  TempDir cwd;
  for (const char* part : {"models=deltanet", "models=mamba"}) {
    const auto r =
        run_experiment("zoology-mqar/zoology-mqar.lua", {"--quiet", "--threads", "1"},
                       {"steps=2", "batch=2", part, "sizes=64x4", "widths=64", "lrs=1e-3"}, cwd);
    INFO(part << r.out << r.err);
    REQUIRE(r.exit_code == 0);
  }
  const std::string table = read_file(cwd.path() / "out/zoology-mqar/report/figure2.md");
  CHECK_THAT(table, Contains("| deltanet | 64 | ") && Contains("| mamba | 64 | "));
}

TEST_CASE("experiment zoology-mqar's --set vocab= splits the vocabulary as Zoology does") {
  TempDir cwd;
  const auto ran = run_quick_with("zoology-mqar/zoology-mqar.lua", {"vocab=128"}, cwd);
  INFO(ran.out << ran.err);
  REQUIRE(ran.exit_code == 0);
  const std::string config =
      read_file(cwd.path() /
                "out/zoology-mqar/size=64x4,width=64,model=deltanet,lr=0.001,"
                "seed=41/config.json");
  CHECK_THAT(config, Contains("\"keys\": 63") && Contains("\"values\": 64"));
  for (const char* bad : {"vocab=15", "vocab=8"}) {
    const auto r = run_experiment("zoology-mqar/zoology-mqar.lua", {"--quiet"}, {bad}, cwd, "bad");
    INFO(bad << r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("--set " + std::string(bad) + ": expected an even integer >= 16"));
    CHECK_THAT(r.err, !Contains("traceback"));
  }
  const auto unknown =
      run_experiment("zoology-mqar/zoology-mqar.lua", {"--quiet"}, {"models=gpt"}, cwd, "bad");
  INFO(unknown.out << unknown.err);
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.err, Contains("--set models=gpt: expected a comma-separated list from: "
                                   "attention, linear_attention, deltanet, gated_deltanet, mamba"));
  CHECK_FALSE(fs::exists(cwd.path() / "bad"));
}

TEST_CASE("experiment zoology-mqar's --set large=true adds (512, 64) once, named or not") {
  TempDir cwd;
  // sizes, and the last run of the plan: three seeds a size, (512, 64) last and once.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"sizes=256x16", "run 6/6 size=512x64,"},
      {"sizes=512x64", "run 3/3 size=512x64,"},
      {"sizes=256x16,512x64", "run 6/6 size=512x64,"}};
  for (const auto& [sizes, last] : cases) {
    const auto r = run_experiment("zoology-mqar/zoology-mqar.lua", {"--dry-run"},
                                  {"models=deltanet", "widths=64", "lrs=1e-3", sizes, "large=true"},
                                  cwd, "dry");
    INFO(sizes << r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, Contains(last + "width=64,model=deltanet,lr=0.001,seed=43"));
    CHECK_THAT(r.err, !Contains("share the run name"));
  }
}

TEST_CASE("experiment zoology-mqar's plateau.lua draws the committed curves, one chart a size") {
  TempDir cwd;
  const std::string curves =
      std::string(MEMSCRIPT_SOURCE_DIR) + "/experiments/zoology-mqar/results/attention_curves.csv";
  const auto r = run_experiment("zoology-mqar/plateau.lua", {"--quiet"}, {"csv=" + curves}, cwd);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out ==
        "plateau_64x4.svg: 6 curves\nplateau_128x8.svg: 2 curves\n"
        "plateau_256x16.svg: 2 curves\n");
  CHECK_THAT(read_file(cwd.path() / "out/plateau_64x4.svg"),
             Contains(">width 128, lr 0.00046</text>") && Contains(">step</text>"));
}

TEST_CASE("experiment zoology-mqar's plateau-16x4.lua runs in its quick variant, with escape.md") {
  TempDir cwd;
  run_quick({"zoology-mqar", 1, "plateau-16x4.lua", "plateau-16x4"}, cwd);
  const fs::path report = cwd.path() / "out/plateau-16x4/report";
  CHECK_THAT(read_file(report / "escape.md"), Contains("| heads 4, lr 0.0003 | 1 | "));
  CHECK_THAT(read_file(report / "escape.svg"), Contains(">heads 4, lr 0.0003</text>"));
}

TEST_CASE("experiment zoology-mqar's plateau-16x4.lua reads the first step past 0.5 and 0.9") {
  // A completed run folder without config.json is reported from its files unchecked, so its
  // evaluation curve can be chosen: 0.27 at step 50, 0.62 at 100, 0.95 at 150.
  TempDir cwd;
  const std::string run = "out/plateau-16x4/heads=4,lr=0.0003,seed=41/";
  cwd.write(run + "status", "completed\n");
  cwd.write(run + "eval.csv",
            "step,length,accuracy,sequence_accuracy,precision,recall,loss,scored,sequences,"
            "scaled_accuracy\n50,16,0.270000,0,0,0,1.4,512,128,0.26\n"
            "100,16,0.620000,0,0,0,1.0,512,128,0.61\n150,16,0.950000,0,0,0,0.2,512,128,0.95\n");
  const auto r = run_experiment("zoology-mqar/plateau-16x4.lua", {"--quiet"}, {"quick=true"}, cwd);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(read_file(cwd.path() / "out/plateau-16x4/report/escape.md"),
             Contains("| heads 4, lr 0.0003 | 1 | 100 | 150 | 0.950 | 0.950 |"));
}

TEST_CASE("experiment mad runs end to end in its quick variant, with the paper's MAD table") {
  TempDir cwd;
  run_quick({"mad", 10}, cwd);
  const fs::path sweep = cwd.path() / "out/mad";
  const std::string table = read_file(sweep / "report/mad-table.md");
  // The paper's scores beside memscript's: Fuzzy Recall is the first column, then the average
  // over the five tasks and the paper's six-task average.
  CHECK_THAT(table, Contains("| transformer (gpt) | 29.8 | ") && Contains("| mamba | 6.7 | ") &&
                        Contains(" | 79.1 | ") && Contains(" | 74.5 |"));
  // Every cell holds memscript's number: no task is missing.
  CHECK(table.find("| – |") == std::string::npos);
  // Each run writes its test scores (MAD's test targets) before it completes.
  const fs::path run = sweep /
                       "setting=selective_copying.base,mixer=gpt,lr=0.001,weight_decay=0,"
                       "seed=41";
  CHECK_THAT(read_file(run / "mad_test.csv"), Contains("best_recall"));
  // MAD's blocks: RMSNorm and a SwiGLU MLP 352 wide.
  CHECK_THAT(read_file(run / "config.json"),
             Contains("\"mlp\": \"swiglu\"") && Contains("\"mlp_hidden\": 352") &&
                 Contains("\"norm\": \"rms\"") && !Contains("mlp_ratio"));
}

TEST_CASE("experiment mad crosses MAD's blocks with memscript's, at any MLP width") {
  const fs::path gpt_run =
      "out/mad/setting=memorization.base,mixer=gpt,lr=0.001,weight_decay=0,seed=41";
  for (const auto& [blocks, norm, mlp] :
       {std::tuple{"rmsnorm-gelu", true, false}, std::tuple{"layernorm-swiglu", false, true}}) {
    INFO(blocks);
    TempDir cwd;
    const auto r =
        run_quick_with("mad/mad.lua", {"tasks=memorization", std::string("blocks=") + blocks}, cwd);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const std::string config = read_file(cwd.path() / gpt_run / "config.json");
    CHECK(Contains("\"norm\": \"rms\"").match(config) == norm);
    CHECK(Contains("\"mlp\": \"swiglu\"").match(config) == mlp);
    CHECK(Contains("\"mlp_hidden\": 352").match(config) == mlp);
    CHECK(Contains("\"mlp_ratio\": 4").match(config) == !mlp);
  }
  // --set mlp_hidden= narrows or widens the blocks' MLP, --set mlp_bias= takes its biases away:
  // GELU 352 wide, the width of MAD's, without biases as MAD's SwiGLU.
  TempDir cwd;
  const auto r = run_quick_with(
      "mad/mad.lua", {"tasks=memorization", "blocks=memscript", "mlp_hidden=352", "mlp_bias=false"},
      cwd);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(read_file(cwd.path() / gpt_run / "config.json"),
             Contains("\"mlp_hidden\": 352") && Contains("\"mlp_bias\": false") &&
                 !Contains("mlp_ratio") && !Contains("swiglu"));
  const auto bad = run_quick_with("mad/mad.lua", {"mlp_hidden=-1"}, cwd);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Contains("--set mlp_hidden=-1: expected a whole number of units"));
  const auto bad_bias = run_quick_with("mad/mad.lua", {"mlp_bias=no"}, cwd);
  CHECK(bad_bias.exit_code == 2);
  CHECK_THAT(bad_bias.err, Contains("mlp_bias=no") && Contains("blocks, true, false"));
}

TEST_CASE("experiment mad trains a setting on one training set, whatever else runs beside it") {
  // The fixed set's seed follows the setting's place among its task's settings, not among the
  // settings --set selects: vocab-512 alone and after the baseline train on the same sequences.
  const std::vector<std::string> common = {"tasks=memorization", "mixers=gpt", "lrs=1e-3", "wds=0",
                                           "epochs=1",           "phase=grid"};
  TempDir cwd;
  std::vector<std::string> alone = common, both = common;
  alone.push_back("settings=memorization.vocab-512");
  both.push_back("settings=memorization.base,memorization.vocab-512");
  for (const auto& [sets, out] : {std::pair{alone, "alone"}, std::pair{both, "both"}}) {
    const auto r = run_experiment("mad/mad.lua", {"--quiet", "--threads", "1"}, sets, cwd, out);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
  }
  const std::string run =
      "mad/setting=memorization.vocab-512,mixer=gpt,lr=0.001,weight_decay=0,seed=41/metrics.jsonl";
  const std::string trained = read_file(cwd.path() / "alone" / run);
  CHECK_THAT(trained, Contains("\"loss\""));
  CHECK(trained == read_file(cwd.path() / "both" / run));
}

TEST_CASE("experiment mad runs the settings named in --set settings=, and refuses unknown ones") {
  TempDir cwd;
  const auto dry_run = [&](const std::vector<std::string>& sets) {
    return run_experiment("mad/mad.lua", {"--dry-run"}, sets, cwd);
  };
  const auto plan = [&](const std::string& settings) {
    return dry_run({"settings=" + settings, "mixers=gpt", "lrs=1e-3", "wds=0"});
  };
  const auto two = plan("memorization.vocab-8192,in_context_recall.base");
  INFO(two.out << two.err);
  REQUIRE(two.exit_code == 0);
  size_t trained = 0;
  for (size_t at = two.out.find("dry run: train"); at != std::string::npos;
       at = two.out.find("dry run: train", at + 1))
    ++trained;
  CHECK(trained == 2);
  CHECK_THAT(two.out, Contains("\"vocab\":8192") && Contains("for 20000 steps"));
  const auto unknown = plan("memorization.vocab-9");
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.err,
             Contains("--set settings=memorization.vocab-9: expected all, baseline, or names of "
                      "settings of the tasks run (<task>.base, <task>.<knob>-<value>: --dry-run "
                      "lists them) (no setting memorization.vocab-9)"));
  CHECK_THAT(unknown.err, !Contains("traceback"));
  // A setting of a task that --set tasks= leaves out, a task or a phase the script does not have.
  const auto other_task = dry_run({"tasks=memorization", "settings=in_context_recall.base"});
  CHECK(other_task.exit_code == 2);
  CHECK_THAT(other_task.err, Contains("(no setting in_context_recall.base)"));
  const auto task = dry_run({"tasks=memorization,recall"});
  CHECK(task.exit_code == 2);
  CHECK_THAT(task.err, Contains("--set tasks=memorization,recall: expected a comma-separated list "
                                "from: fuzzy_recall, in_context_recall, memorization, "
                                "noisy_recall, selective_copying (item 2 is 'recall')"));
  const auto phase = dry_run({"phase=train"});
  CHECK(phase.exit_code == 2);
  CHECK_THAT(phase.err, Contains("--set phase=train: expected one of: all, grid, seeds"));
}
