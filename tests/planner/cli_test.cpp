// End-to-end checks of `parallm plan` and `parallm topo` through the built
// binary: JSON output parses and carries the fixed fields; bad input (unknown
// GPU or model, impossible SLO, malformed topology, config without required
// fields) gives one line on stderr and exit code 2.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "common/command_output.h"

namespace {

using Result = parallm::test::CommandResult;

Result run(const std::string& args) { return parallm::test::run_command(std::string(PARALLM_BINARY) + " " + args); }

const std::string kSrc = PARALLM_SOURCE_DIR;

class PlanCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(PARALLM_BINARY)) GTEST_SKIP() << "parallm binary not built";
  }
};

TEST_F(PlanCli, JsonPlan) {
  Result r = run("plan --model llama-2-70b --weights fp16 --gpu H100-SXM --gpus 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"]["kv_bytes_per_token"], 327680);
  EXPECT_EQ(j["recommendation"]["verdict"], "doesnt_fit");
  EXPECT_EQ(j["recommendation"]["layout"]["tp"], 2);
}

TEST_F(PlanCli, TopologyFileAndConfig) {
  Result r = run("plan --model " + kSrc + "/tests/planner/data/llama-3.1-8b-config.json --gpu H100-SXM --topology " +
                 kSrc + "/tests/topo/data/dgx_h100.txt --offline --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"]["params_total"], 8030261248LL);
  EXPECT_EQ(j["recommendation"]["layout"]["tp"], 1);
  EXPECT_EQ(j["recommendation"]["layout"]["dp"], 8);
  Result t = run("topo --from-file " + kSrc + "/tests/topo/data/dgx_h100.txt --json");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_EQ(nlohmann::json::parse(t.out)["matrix"]["links"][0][1], "NV18");
}

TEST_F(PlanCli, BadInputExits2WithOneLine) {
  const std::string data = kSrc + "/tests/planner/data/";
  const std::string topo = kSrc + "/tests/topo/data/";
  for (const std::string& args : {
           std::string("plan --model llama-2-7b --gpu GTX-480"),
           std::string("plan --model llama-9-7b --gpu H100-SXM"),
           std::string("plan --model llama-2-70b --gpu A100-80G --gpus 8 --tpot-slo 0.5"),
           "plan --model llama-2-7b --gpu H100-SXM --topology " + topo + "bad_link.txt",
           "plan --model " + data + "missing-heads-config.json --gpu H100-SXM",
           "topo --from-file " + topo + "bad_rows.txt",
           std::string("plan --model llama-2-7b --gpu H100-SXM --gpu-hour-price -2"),
           std::string("plan --model llama-2-7b --gpu H100-SXM --gpu-watts -300"),
           std::string("plan --model llama-2-7b --gpu H100-SXM --power-price -0.1"),
           std::string("plan --model llama-2-7b --gpu H100-SXM --gpu-price 30000 --gpu-hour-price 2"),
           std::string("plan --model llama-2-7b --gpu H100-SXM --currency CNY"),
           std::string("plan --model llama-2-7b --gpu H100-SXM --emit k8s --out /tmp/parallm-x --engine tgi"),
           std::string("plan --model meta-llama/Llama-9.9-8B-Instruct --gpu H100-SXM"),
           std::string("plan --calibrate --model /nonexistent/m.gguf --calibration /tmp/parallm-never-written.json"),
       }) {
    Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("parallm: error: ", 0), 0u) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
  }
}

// An HF id of a catalog model plans like its catalog name; an unknown one
// names the closest ids; the seeds' cost fields are in the JSON.
TEST_F(PlanCli, HfIdsSuggestionsAndCost) {
  Result r =
      run("plan --model meta-llama/Llama-3.1-8B-Instruct --gpu A100-80G --daily-requests 100000 "
          "--gpu-hour-price 10 --currency CNY --power-price 1 --ops-cost-month 5000 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"]["params_total"], 8030261248LL);
  EXPECT_EQ(j["cost"]["currency"], "CNY");
  // 1 card x 10 x 720 h + 400 W x 720 h x 1 per kWh + 5000.
  EXPECT_DOUBLE_EQ(j["cost"]["total_per_month"].get<double>(), 7200.0 + 288.0 + 5000.0);
  EXPECT_DOUBLE_EQ(j["cost"]["output_tokens_per_month_at_volume"].get<double>(), 100000.0 * 256 * 30);
  EXPECT_EQ(std::string(j["launch"]["vllm"]).rfind("vllm serve meta-llama/Llama-3.1-8B-Instruct ", 0), 0u);
  EXPECT_EQ(j["launch"]["parallm"], "");
  Result bad = run("plan --model meta-llama/Llama-3.1-9B-Instruct --gpu A100-80G");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("did you mean meta-llama/Llama-3.1-8B-Instruct"), std::string::npos) << bad.err;
}

}  // namespace

namespace {

// A GGUF written by `parallm make-model` is read back with the preset's exact
// parameter count and the file's exact tensor bytes (f32: 4 bytes each).
TEST_F(PlanCli, GgufModelFromMakeModel) {
  const std::string path = std::filesystem::temp_directory_path() / "parallm_plan_cli_mixtral_tiny.gguf";
  Result m = run("make-model --preset mixtral-tiny --out " + path);
  ASSERT_EQ(m.code, 0) << m.err;
  Result r = run("plan --model " + path + " --gpu L4 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  // mixtral-tiny: vocab 512, dim 64, 2 layers, 4 heads, 2 KV heads, 8 experts of 128, top-2, untied.
  const int64_t attn = 64 * 64 * 2 + 2 * 64 * 32, experts = 8 * 3 * 64 * 128, router = 64 * 8, norms = 2 * 64;
  const int64_t total = 2 * (attn + experts + router + norms) + 2 * 512 * 64 + 64;
  EXPECT_EQ(j["model"]["params_total"], total);
  EXPECT_EQ(j["model"]["params_active"], total - 2 * 6 * 3 * 64 * 128);
  EXPECT_EQ(j["model"]["weight_bytes"], 4.0 * total);
  EXPECT_EQ(j["model"]["kv_bytes_per_token"], 2 * 2 * 2 * 16 * 2);  // K+V, 2 layers, 2 KV heads, head_dim 16, fp16
  // On a GPU there is no parallm line (no CUDA backend); on the CPU the local
  // GGUF of a supported architecture gets one, and llama.cpp loads the file.
  EXPECT_EQ(j["launch"]["parallm"], "");
  EXPECT_NE(std::string(j["launch_all"]["parallm"]["note"]).find("CPU only"), std::string::npos);
  EXPECT_EQ(std::string(j["launch"]["llamacpp"]).rfind("llama-server -m " + path + " ", 0), 0u);
  Result cpu = run("plan --model " + path + " --gpu cpu --json");
  ASSERT_EQ(cpu.code, 0) << cpu.err;
  const std::string line = nlohmann::json::parse(cpu.out)["launch"]["parallm"];
  EXPECT_EQ(line.rfind("parallm serve --model " + path + " --tp 1", 0), 0u) << line;
  // Every flag of the printed line is an option of parallm serve's own parser.
  Result help = run("serve --help");
  ASSERT_EQ(help.code, 0) << help.err;
  std::istringstream words(line);
  int flags = 0;
  for (std::string w; words >> w;) {
    if (w.rfind("--", 0) != 0) continue;
    ++flags;
    bool found = false;
    for (size_t at = help.out.find(w); at != std::string::npos && !found; at = help.out.find(w, at + 1)) {
      const char before = at == 0 ? ' ' : help.out[at - 1];
      const char after = at + w.size() < help.out.size() ? help.out[at + w.size()] : ' ';
      found = (before == ' ' || before == ',') && (after == ' ' || after == ',' || after == '=');
    }
    EXPECT_TRUE(found) << w << " is not an option of parallm serve";
  }
  EXPECT_GE(flags, 5);
  std::filesystem::remove(path);
}

}  // namespace

namespace {

// `plan --calibrate --model FILE` profiles that file in the real engine: the
// profile names the file as simulate finds it (absolute path, size), every
// figure is physical (a 512-token forward costs more than a 1-token one, the
// spreads are small fractions), and `simulate --local` then prices its steps
// with it: a closed loop at 1 decodes no faster than the profile's 1-token
// forward allows. About 50 s: a model this small reaches the profile's cap of
// 101 rounds, each with its 300 ms idle pause.
TEST_F(PlanCli, CalibrateProfilesAModelFileForSimulate) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "parallm-plan-profile";
  std::filesystem::create_directories(dir);
  const std::string model = (dir / "tiny.gguf").string(), cal = (dir / "cal.json").string();
  ASSERT_EQ(run("make-model --preset tiny --dtype q8_0 --out " + model).code, 0);
  Result r = run("plan --calibrate --threads 1 --model " + model + " --calibration " + cal);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Model profile"), std::string::npos) << r.out;
  std::ifstream in(cal);
  const nlohmann::json p = nlohmann::json::parse(in)["model_profile"];
  EXPECT_EQ(p["model_path"], std::filesystem::absolute(model).lexically_normal().string());
  EXPECT_EQ(p["file_bytes"], std::filesystem::file_size(model));
  EXPECT_EQ(p["threads"], 1);
  const auto& table = p["forward_ms_by_tokens"];
  ASSERT_GE(table.size(), 2u);
  for (size_t i = 0; i < table.size(); ++i) {
    EXPECT_GT(table[i][1].get<double>(), 0.0);
    if (i > 0) {
      EXPECT_GT(table[i][0].get<double>(), table[i - 1][0].get<double>());
    }
  }
  const double one_ms = table[0][1].get<double>(), last_ms = table.back()[1].get<double>();
  EXPECT_EQ(table[0][0].get<double>(), 1.0);
  EXPECT_GE(table.back()[0].get<double>(), 256.0);
  EXPECT_GT(last_ms, 2 * one_ms);  // hundreds of tokens of GEMM against one GEMV
  for (const char* key : {"logit_row_ms", "prefill_pair_ns", "decode_kv_token_ns", "stream_token_us"})
    EXPECT_GE(p[key].get<double>(), 0.0) << key;
  // Serving's share of a step (serve's own loop, less the bare forward) may
  // be below 0 by less than half of the 1-token forward.
  EXPECT_GT(p["step_overhead_us"].get<double>(), -500 * one_ms);
  for (const char* key : {"noise_sigma", "drift_sigma"}) {
    EXPECT_GE(p[key].get<double>(), 0.0) << key;
    EXPECT_LT(p[key].get<double>(), 1.0) << key;  // a log spread: 1 would be a factor of e
  }
  // Decode attention by context: 5 points, ascending, never falling.
  const auto& kv = p["decode_kv_ms_by_ctx"];
  ASSERT_EQ(kv.size(), 5u);
  for (size_t i = 1; i < kv.size(); ++i) {
    EXPECT_GT(kv[i][0].get<double>(), kv[i - 1][0].get<double>());
    EXPECT_GE(kv[i][1].get<double>(), kv[i - 1][1].get<double>());
  }
  // The cold decode steps: after the front-end probe's prompt, at 1 and 4
  // sequences (contexts prompt + 1 and 4 x that), each extra a time under
  // the largest forward (its values may be none on a quiet host).
  const double cold_prompt = p["cold_prompt_tokens"].get<double>();
  EXPECT_GT(cold_prompt, 16.0);
  const auto& cold = p["cold_decode_extra_ms"];
  ASSERT_EQ(cold.size(), 2u);
  EXPECT_EQ(cold[0][0].get<double>(), cold_prompt + 1);
  EXPECT_EQ(cold[1][0].get<double>(), 4 * (cold_prompt + 1));
  for (const auto& c : cold) {
    EXPECT_LE(c[1].size(), 20u);
    for (const auto& ms : c[1]) {
      EXPECT_GT(ms.get<double>(), 0.0);
      EXPECT_LT(ms.get<double>(), last_ms);
    }
  }
  // One round: every shape once, so longer than the largest forward.
  EXPECT_GT(p["drift_period_s"].get<double>() * 1e3, last_ms);
  // serve's front end, timed through its HTTP server with bench's client: a
  // request over loopback takes some microseconds, and far less than 100 ms.
  const double front_us = p["request_overhead_us"].get<double>();
  EXPECT_GT(front_us, 0.0);
  EXPECT_LT(front_us, 1e5);

  Result s = run("simulate --model " + model + " --local --calibration " + cal +
                 " --concurrency 1 --num-requests 8 --input-len 16 --output-len 16 --seed 1 --json -");
  ASSERT_EQ(s.code, 0) << s.err;
  const nlohmann::json j = nlohmann::json::parse(s.out);
  EXPECT_EQ(j["simulation"]["step_times"], "model profile");
  EXPECT_EQ(j["results"][0]["completed"], 8);
  // Each request pays the measured front end (unless --request-overhead-ms says otherwise).
  EXPECT_NEAR(j["simulation"]["overheads"]["per_request_ms"].get<double>(), front_us * 1e-3, 1e-9);
  Result given =
      run("simulate --model " + model + " --local --calibration " + cal +
          " --concurrency 1 --num-requests 8 --input-len 16 --output-len 16 --request-overhead-ms 7 --json -");
  ASSERT_EQ(given.code, 0) << given.err;
  EXPECT_EQ(nlohmann::json::parse(given.out)["simulation"]["overheads"]["per_request_ms"].get<double>(), 7.0);
  // Drift and jitter are log-normal factors of a few percent; half is far outside them.
  EXPECT_GT(j["results"][0]["tpot_ms"]["p50"].get<double>(), 0.5 * one_ms);
  std::filesystem::remove_all(dir);
}

}  // namespace
