// `parallm simulate` through the built binary: the JSON report parses with
// bench's fields and the run is reproducible; every bad input (mode flags,
// negative rates, impossible layouts, unknown model or device, bad trace
// lines) gives one line on stderr and exit code 2.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/command_output.h"

namespace {

using Result = parallm::test::CommandResult;

Result run(const std::string& args) { return parallm::test::run_command(std::string(PARALLM_BINARY) + " " + args); }

class SimulateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(PARALLM_BINARY)) GTEST_SKIP() << "parallm binary not built";
  }
};

const std::string kBase = "simulate --model llama-3.1-8b --gpu H100-SXM ";

TEST_F(SimulateCli, JsonReportIsReproducible) {
  const std::string args = kBase +
                           "--layout tp=1,pp=1,dp=4 --qps 20 --num-requests 200 --input-len 64:512 "
                           "--output-len 16:128 --seed 3 --json -";
  Result a = run(args), b = run(args);
  ASSERT_EQ(a.code, 0) << a.err;
  nlohmann::json ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(ja["tool"], "parallm simulate");
  EXPECT_EQ(ja["results"][0]["completed"], 200);
  EXPECT_EQ(ja["simulation"]["layout"]["dp"], 4);
  ja["simulation"].erase("wall_s");
  jb["simulation"].erase("wall_s");
  EXPECT_EQ(ja, jb);
  EXPECT_NE(a.err.find("parallm simulate"), std::string::npos);  // the table went to stderr
}

// --local on a model file the calibration profiled: its step times price the
// steps (forward 2 ms at 1 token, 8 at 16, nothing else), the report says so;
// the same file changed, or a copy elsewhere, is not that profile any more,
// and stderr says which file the profile is of.
TEST_F(SimulateCli, LocalUsesTheModelsProfile) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "parallm-sim-profile";
  std::filesystem::create_directories(dir);
  const std::string model = (dir / "tiny.gguf").string(), cal = (dir / "cal.json").string();
  ASSERT_EQ(run("make-model --preset tiny --dtype q8_0 --out " + model).code, 0);
  nlohmann::json c = {{"device", "cpu"}, {"threads", 2}, {"mem_bw_gbps", 20.0}, {"fma_gflops", 100.0}};
  c["model_profile"] = {{"model_path", std::filesystem::absolute(model).lexically_normal().string()},
                        {"file_bytes", std::filesystem::file_size(model)},
                        {"threads", 2},
                        {"forward_ms_by_tokens", {{1, 2.0}, {16, 8.0}}},
                        {"logit_row_ms", 0.0},
                        {"prefill_pair_ns", 0.0},
                        {"decode_kv_token_ns", 0.0}};
  std::ofstream(cal) << c.dump();
  const std::string args = "simulate --model " + model + " --local --calibration " + cal +
                           " --concurrency 1 --num-requests 3 --input-len 10 --output-len 5 --json -";
  Result r = run(args);
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["simulation"]["step_times"], "model profile");
  const double sample_ms = j["simulation"]["overheads"]["per_sampled_row_ms"].get<double>();
  const double overhead_ms = j["simulation"]["overheads"]["per_request_ms"].get<double>();
  // TTFT: the front end, then one 10-token step (2 + 9 x 6 / 15 ms); TPOT: 1-token steps.
  EXPECT_NEAR(j["results"][0]["ttft_ms"]["p50"].get<double>(), overhead_ms + 5.6 + sample_ms, 1e-6);
  EXPECT_NEAR(j["results"][0]["tpot_ms"]["p50"].get<double>(), 2.0 + sample_ms, 1e-6);
  EXPECT_NE(r.err.find("step times: the model's profile"), std::string::npos);
  EXPECT_EQ(r.err.find("step times come from the planner's cost model"), std::string::npos);
  const std::string copy = (dir / "copy.gguf").string();
  std::filesystem::copy_file(model, copy, std::filesystem::copy_options::overwrite_existing);
  const std::string copy_args = "simulate --model " + copy + " --local --calibration " + cal +
                                " --concurrency 1 --num-requests 3 --input-len 10 --output-len 5 --json -";
  auto expect_no_profile = [&](const std::string& a) {
    r = run(a);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["simulation"]["step_times"], "perf model");
    EXPECT_NE(r.err.find("profiles " + std::filesystem::absolute(model).lexically_normal().string()), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("step times come from the planner's cost model"), std::string::npos) << r.err;
  };
  expect_no_profile(copy_args);
  std::ofstream(model, std::ios::app) << "x";
  expect_no_profile(args);
  std::filesystem::remove_all(dir);
}

TEST_F(SimulateCli, TraceAndHtml) {
  const auto dir = std::filesystem::temp_directory_path() / "parallm_sim_cli";
  std::filesystem::create_directories(dir);
  {
    std::ofstream t(dir / "ok.jsonl");
    t << "{\"arrival_s\": 0, \"input_tokens\": 100, \"output_tokens\": 20}\n"
         "{\"arrival_s\": 0.5, \"input_tokens\": 300, \"output_tokens\": 5}\n";
  }
  Result r = run(kBase + "--trace " + (dir / "ok.jsonl").string() + " --json - --html " + (dir / "r.html").string());
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["config"]["mode"], "trace");
  EXPECT_EQ(j["results"][0]["output_tokens"], 25);
  EXPECT_TRUE(std::filesystem::file_size(dir / "r.html") > 1000);
  EXPECT_FALSE(j["results"][0].contains("detailed"));

  // --save-detailed: the trace's two requests, in its order, as bench writes them.
  r = run(kBase + "--trace " + (dir / "ok.jsonl").string() + " --save-detailed --json -");
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  const auto& d = j["results"][0]["detailed"];
  EXPECT_EQ(d["input_tokens"], nlohmann::json::parse("[100, 300]"));
  EXPECT_EQ(d["output_tokens"], nlohmann::json::parse("[20, 5]"));
  EXPECT_EQ(d["error"], nlohmann::json::parse("[null, null]"));
  EXPECT_NEAR(d["start_s"][1].get<double>() - d["start_s"][0].get<double>(), 0.5, 1e-9);
  for (int k = 0; k < 2; ++k) {
    const double out = d["output_tokens"][k].get<double>();
    EXPECT_NEAR(d["e2e_ms"][k].get<double>(), d["ttft_ms"][k].get<double>() + d["tpot_ms"][k].get<double>() * (out - 1),
                1e-6);
  }
}

TEST_F(SimulateCli, BadInputIsOneLineAndExit2) {
  const auto dir = std::filesystem::temp_directory_path() / "parallm_sim_cli";
  std::filesystem::create_directories(dir);
  {
    std::ofstream t(dir / "bad.jsonl");
    t << "{\"arrival_s\": 0, \"input_tokens\": 100, \"output_tokens\": 20}\n"
         "{\"arrival_s\": 0.5, \"input_tokens\": -3, \"output_tokens\": 5}\n";
  }
  struct Case {
    std::string args, needle;
  } cases[] = {
      {kBase + "--qps -2", "--qps must be a positive"},
      {kBase + "--qps 0", "--qps must be a positive"},
      {kBase + "--concurrency 0", "--concurrency must be at least 1"},
      {kBase + "--qps 1 --concurrency 2", "exactly one of"},
      {kBase, "exactly one of"},
      {kBase + "--qps 1 --layout tp=3", "does not divide"},
      {kBase + "--qps 1 --layout tp=2,pp=1,dp=-1", "--layout"},
      {kBase + "--qps 1 --layout tp=16", "devices of a node"},
      {"simulate --model llama-3.1-70b --gpu RTX-4090 --qps 1", "does not fit"},
      {"simulate --model no-such-model --gpu H100-SXM --qps 1", "no-such-model"},
      {"simulate --model llama-3.1-8b --gpu Z80 --qps 1", "Z80"},
      {kBase + "--trace " + (dir / "bad.jsonl").string(), "bad.jsonl:2: \"input_tokens\""},
      {kBase + "--trace /nonexistent.jsonl", "cannot open"},
      {kBase + "--qps 1 --duration -5", "--duration"},
      {kBase + "--qps 1 --router random", "--router"},
      {kBase + "--qps 1 --input-len 0", "--input-len"},
      {kBase + "--qps 1 --request-overhead-ms -3", "--request-overhead-ms"},
      {kBase + "--qps 1 --http-threads 0", "--http-threads"},
      {kBase + "--qps 1 --save-detailed", "give --json FILE"},
  };
  for (const Case& c : cases) {
    Result r = run(c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << "\n" << r.err;
  }
}

}  // namespace

namespace {

// `plan` with SLOs simulates its top candidates at their claimed capacity:
// the P95s it reports are what `simulate` measures for that replica and load.
TEST_F(SimulateCli, PlanChecksItsSloCapacityWithTheSimulator) {
  Result p =
      run("plan --model llama-3.1-8b --gpu H100-SXM --gpus 2 --concurrency 40 --input-len 512 "
          "--output-len 128 --ttft-slo 400 --tpot-slo 40 --json");
  ASSERT_EQ(p.code, 0) << p.err;
  const nlohmann::json j = nlohmann::json::parse(p.out);
  ASSERT_TRUE(j.contains("simulate_check"));
  ASSERT_GE(j["simulate_check"].size(), 1u);
  const nlohmann::json& c = j["simulate_check"][0];
  const std::string layout = c["layout"];
  const int streams = static_cast<int>(c["load"].get<double>());
  Result s = run("simulate --model llama-3.1-8b --gpu H100-SXM --layout " + layout.substr(0, layout.rfind(',')) +
                 ",dp=1 --concurrency " + std::to_string(streams) + " --num-requests " +
                 std::to_string(std::max(200, 8 * streams)) +
                 " --input-len 512 --output-len 128 --max-num-batched-tokens 8192 --max-model-len 640 "
                 "--json -");
  ASSERT_EQ(s.code, 0) << s.err;
  const nlohmann::json r = nlohmann::json::parse(s.out)["results"][0];
  EXPECT_NEAR(c["p95_ttft_ms"].get<double>(), r["ttft_ms"]["p95"].get<double>(), 1e-6);
  EXPECT_NEAR(c["p95_tpot_ms"].get<double>(), r["tpot_ms"]["p95"].get<double>(), 1e-6);
  EXPECT_EQ(c["holds"].get<bool>(),
            r["ttft_ms"]["p95"].get<double>() <= 400 && r["tpot_ms"]["p95"].get<double>() <= 40);
  Result none = run("plan --model llama-3.1-8b --gpu H100-SXM --gpus 2 --concurrency 40 --json");
  ASSERT_EQ(none.code, 0);
  EXPECT_FALSE(nlohmann::json::parse(none.out).contains("simulate_check"));  // no SLO, nothing to check
}

}  // namespace
