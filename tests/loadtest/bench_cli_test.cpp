// `parallm bench` as a user runs it: exit code 2 and one line for bad
// arguments, the --json schema of the issue, and the --html report rendered
// in headless Chromium (skipped when chromium is not installed).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fake_openai_server.h"
#include "loadtest/stats.h"
#include "loadtest/workload.h"

namespace parallm::loadtest {
namespace {

namespace fs = std::filesystem;
using testing::FakeOpenAiServer;
using testing::FakeScript;

// Timing-sensitive on shared machines: raise priority where allowed (see
// bench_fake_server_test.cpp); the bench processes started here inherit it.
class RaisePriority : public ::testing::Environment {
 public:
  void SetUp() override { setpriority(PRIO_PROCESS, 0, -10); }
};
const auto* const kRaisePriority = ::testing::AddGlobalTestEnvironment(new RaisePriority);

struct CommandRun {
  int code = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path temp_dir() {
  const fs::path dir = fs::temp_directory_path() / ("parallm_bench_test_" + std::to_string(getpid()) + "_" +
                                                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

CommandRun run_command(const std::string& cmd, const fs::path& dir) {
  CommandRun r;
  const int status = std::system((cmd + " >" + (dir / "stdout").string() + " 2>" + (dir / "stderr").string()).c_str());
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir / "stdout");
  r.err = slurp(dir / "stderr");
  return r;
}

CommandRun bench(const std::string& args, const fs::path& dir) {
  return run_command(std::string(PARALLM_BINARY) + " bench " + args, dir);
}

FakeScript quick(int64_t i, const nlohmann::json&) {
  FakeScript s;
  s.ttft_ms = i % 3 == 0 ? 70 : 8;
  s.gap_ms = 2;
  return s;
}

int free_port() {  // a port nobody listens on: bound, then released
  FakeOpenAiServer s(quick);
  return s.port();
}

TEST(BenchCli, BadArgumentsGiveOneLineAndExit2) {
  const fs::path dir = temp_dir();
  FakeOpenAiServer server(quick);
  const std::string ok = "--url " + server.url();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--url http://127.0.0.1:" + std::to_string(free_port()), "cannot reach"},
      {ok + " --input-len 5:2", "--input-len '5:2'"},
      {ok + " --output-len 0", "--output-len"},
      {ok + " --endpoint embeddings", "--endpoint 'embeddings'"},
      {ok + " --rate -3", "--rate"},
      {ok + " --concurrency 0", "--concurrency"},
      {"--url https://127.0.0.1:1", "https is not supported"},
      {ok + " --find-capacity", "needs an SLO"},
      {ok + " --dataset /nonexistent.jsonl", "--dataset /nonexistent.jsonl"},
      {ok + " --save-detailed", "give --json FILE"},
  };
  for (const auto& [args, expected] : cases) {
    const CommandRun r = bench(args, dir);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_NE(r.err.find(expected), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("parallm: error: ", 0), 0u) << r.err;
  }
  EXPECT_EQ(server.requests_seen(), 0);  // nothing was sent for a bad command line
}

TEST(BenchCli, JsonReportHasTheIssueSchema) {
  const fs::path dir = temp_dir();
  FakeOpenAiServer server(quick);
  const fs::path json_path = dir / "out.json";
  const CommandRun r = bench("--url " + server.url() +
                                 " --concurrency 1,3 --num-requests 9 --input-len 4:12 "
                                 "--output-len 3:6 --ttft-slo 40 --tpot-slo 50 --json " +
                                 json_path.string(),
                             dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("TTFT ms p50/p95"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("c=3"), std::string::npos);
  const auto j = nlohmann::json::parse(slurp(json_path));
  ASSERT_EQ(j["results"].size(), 2u);
  const std::vector<int64_t> levels{1, 3};
  for (size_t i = 0; i < 2; ++i) {
    const auto& l = j["results"][i];
    for (const char* key : {"concurrency", "rate", "requests", "errors", "input_tokens", "output_tokens", "duration_s",
                            "output_tokens_per_s", "decode_tokens_per_s", "requests_per_s", "goodput"}) {
      EXPECT_TRUE(l.contains(key)) << key;
    }
    EXPECT_EQ(l["concurrency"], levels[i]);
    EXPECT_EQ(l["rate"], "inf");
    EXPECT_EQ(l["requests"], 9);
    for (const char* kind : {"timeout", "http_4xx", "http_5xx", "connection", "dropped_stream"}) {
      EXPECT_EQ(l["errors"][kind], 0) << kind;
    }
    for (const char* metric : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}) {
      for (const char* stat : {"mean", "p50", "p90", "p95", "p99"}) {
        EXPECT_TRUE(l[metric][stat].is_number()) << metric << "." << stat;
      }
      EXPECT_LE(l[metric]["p50"].get<double>(), l[metric]["p99"].get<double>());
    }
    EXPECT_EQ(l["output_tokens"], l["output_tokens_counted"]);  // the fake's usage = its chunks
    EXPECT_NEAR(l["output_tokens_per_s"].get<double>(),
                l["output_tokens"].get<double>() / l["duration_s"].get<double>(), 1e-6);
    // TTFT scripted 70 ms for every third arrival, else 8 ms; SLO 40 ms.
    EXPECT_NEAR(l["goodput"].get<double>(), 6.0 / 9.0, 1e-9);
  }
  int64_t sent_max_tokens = 0;
  for (const auto& b : server.bodies()) sent_max_tokens += b["max_tokens"].get<int64_t>();
  EXPECT_EQ(j["results"][0]["output_tokens"].get<int64_t>() + j["results"][1]["output_tokens"].get<int64_t>(),
            sent_max_tokens);
  EXPECT_EQ(j["capacity"], nullptr);
  EXPECT_EQ(j["config"]["model"], "fake-model");
}

// --save-detailed: one entry per request in issue order (the workload's own
// lengths for each index), each request's latencies as the fake scripted them,
// and percentiles of the arrays equal to the report's (the pooling a user does
// across runs rests on that).
TEST(BenchCli, SaveDetailedListsEveryRequestInIssueOrder) {
  const fs::path dir = temp_dir();
  FakeOpenAiServer server([](int64_t, const nlohmann::json& body) {
    FakeScript s;
    const int64_t max_tokens = body["max_tokens"].get<int64_t>();
    s.ttft_ms = 12.0 * static_cast<double>(max_tokens);  // requests finish out of issue order at c=3
    s.gap_ms = 2;
    if (max_tokens == 4) s.http_status = 503;
    return s;
  });
  const fs::path json_path = dir / "out.json";
  const CommandRun r = bench("--url " + server.url() +
                                 " --concurrency 3 --num-requests 15 --input-len 8 --output-len 2:6 --seed 5 "
                                 "--save-detailed --json " +
                                 json_path.string(),
                             dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(json_path));
  const auto& l = j["results"][0];
  const auto& d = l["detailed"];
  for (const char* key : {"start_s", "ttft_ms", "tpot_ms", "e2e_ms", "input_tokens", "output_tokens", "error"})
    ASSERT_EQ(d[key].size(), 15u) << key;
  std::vector<double> ttft;
  int failed = 0;
  for (size_t k = 0; k < 15; ++k) {
    const int64_t out = request_lengths(5, 0, static_cast<int64_t>(k), {8, 8}, {2, 6}).output;
    if (k > 0) {
      EXPECT_GE(d["start_s"][k].get<double>(), d["start_s"][k - 1].get<double>()) << k;
    }
    if (out == 4) {
      ++failed;
      EXPECT_EQ(d["error"][k], "http_5xx") << k;
      EXPECT_TRUE(d["ttft_ms"][k].is_null()) << k;
      continue;
    }
    EXPECT_TRUE(d["error"][k].is_null()) << k;
    EXPECT_EQ(d["output_tokens"][k], out) << k;
    const double t = d["ttft_ms"][k].get<double>();
    EXPECT_GE(t, 12.0 * out) << k;
    EXPECT_LT(t, 12.0 * out + 250) << k;  // generous: CI runs tests two at a time
    EXPECT_NEAR(d["e2e_ms"][k].get<double>(), t + d["tpot_ms"][k].get<double>() * (out - 1), 1e-6) << k;
    ttft.push_back(t);
  }
  EXPECT_EQ(l["failed"], failed);
  ASSERT_FALSE(ttft.empty());
  const Summary s = summarize(ttft);
  EXPECT_DOUBLE_EQ(s.p50, l["ttft_ms"]["p50"].get<double>());
  EXPECT_DOUBLE_EQ(s.p95, l["ttft_ms"]["p95"].get<double>());
  // Without the flag the report has no per-request arrays.
  const CommandRun plain = bench("--url " + server.url() + " --num-requests 2 --json " + json_path.string(), dir);
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_FALSE(nlohmann::json::parse(slurp(json_path))["results"][0].contains("detailed"));
}

std::string find_chromium() {
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"}) {
    if (fs::exists(p)) return p;
  }
  return "";
}

TEST(BenchCli, HtmlReportRendersInHeadlessChromium) {
  const fs::path dir = temp_dir();
  FakeOpenAiServer server([](int64_t i, const nlohmann::json&) {
    FakeScript s;
    s.ttft_ms = 10 + static_cast<double>(i % 11);
    s.gap_ms = 2;
    s.gap_per_stream_ms = 0.5;
    s.tokens = 10;
    if (i % 17 == 5) s.http_status = 503;
    return s;
  });
  const fs::path html = dir / "report.html";
  const CommandRun r = bench("--url " + server.url() +
                                 " --find-capacity --tpot-slo 4.2 --ttft-slo 40 "
                                 "--num-requests 12 --goodput-target 0.8 --peak-concurrency 50 --html " +
                                 html.string(),
                             dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("capacity"), std::string::npos) << r.out;
  const std::string page = slurp(html);
  EXPECT_EQ(page.find("http://"), page.find("http://127.0.0.1"));  // no external reference...
  EXPECT_EQ(page.find("<script"), std::string::npos);              // ...and no script
  EXPECT_EQ(page.find("src="), std::string::npos);
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (apt-get install chromium)";
  const std::string flags =
      " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
      "--disable-background-networking --disable-component-update --disable-sync "
      "--user-data-dir=" +
      (dir / "profile").string() + " ";
  const std::string url = "file://" + html.string();
  const CommandRun dom = run_command("timeout 60 " + chromium + flags + "--dump-dom " + url, dir);
  ASSERT_EQ(dom.code, 0) << dom.err;
  auto count = [&](const std::string& needle) {
    int64_t n = 0;
    for (size_t p = dom.out.find(needle); p != std::string::npos; p = dom.out.find(needle, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("<svg"), 8);               // 4 against load + 4 CDFs
  EXPECT_GE(count("<polyline"), 4 + 4 * 3);  // every level on every CDF
  EXPECT_GE(count("class=\"slo\""), 2);      // SLO lines drawn
  EXPECT_NE(dom.out.find("id=\"capacity\""), std::string::npos);
  EXPECT_NE(dom.out.find("server(s)"), std::string::npos);
  const fs::path shot = dir / "shot.png";
  const CommandRun s = run_command("timeout 60 " + chromium + flags +
                                       "--hide-scrollbars --window-size=1280,2600 "
                                       "--screenshot=" +
                                       shot.string() + " " + url,
                                   dir);
  ASSERT_EQ(s.code, 0) << s.err;
  ASSERT_TRUE(fs::exists(shot));
  EXPECT_GT(fs::file_size(shot), 50'000u);  // a page of charts, not a blank image
  if (const char* keep = std::getenv("PARALLM_BENCH_SCREENSHOT"))
    fs::copy_file(shot, keep, fs::copy_options::overwrite_existing);
}

}  // namespace
}  // namespace parallm::loadtest
