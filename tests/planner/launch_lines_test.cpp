// Every launch line of many plans, shell-split and checked against the flag
// lists of each tool's CLI (tests/planner/data/cli_flags/<tool>.txt, read from
// the tools' sources at the commits named there): every flag exists, takes a
// value when it must, and enumerated values are in the accepted set. Then what
// the layout needs is on the line: quantization, pipeline stages, one command
// per node for multi-node plans, one command per replica (disjoint
// CUDA_VISIBLE_DEVICES groups) for engines without built-in data parallelism.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "planner/catalog_request.h"
#include "planner/gpu_groups.h"
#include "planner/model_catalog.h"
#include "planner/model_source.h"
#include "planner/plan.h"
#include "topo/topo_matrix.h"
#include "util/check.h"

namespace parallm::planner {
namespace {

const std::string kData = std::string(PARALLM_SOURCE_DIR) + "/tests/planner/data/";

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct FlagSpec {
  bool takes_value = true;
  std::set<std::string> values;  // empty = any
};

struct Tool {
  std::vector<std::string> program;  // "vllm", "serve"
  int positional = 0;
  std::map<std::string, FlagSpec> flags;
};

Tool load_tool(const std::string& name) {
  std::ifstream in(kData + "cli_flags/" + name + ".txt");
  EXPECT_TRUE(in.good()) << name;
  Tool t;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    std::string head;
    ss >> head;
    if (head == "program") {
      for (std::string w; ss >> w;) t.program.push_back(w);
    } else if (head == "positional") {
      ss >> t.positional;
    } else {
      FlagSpec f;
      std::string w;
      if (ss >> w) {
        if (w == "bool")
          f.takes_value = false;
        else if (w == "=")
          for (std::string v; ss >> v;) f.values.insert(v);
      }
      t.flags[head] = f;
    }
  }
  return t;
}

// POSIX-style word splitting of one command line: blanks separate words,
// single quotes keep everything, double quotes keep blanks, a backslash escapes.
std::vector<std::string> shell_split(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    if (ch == '\'') {
      const size_t end = s.find('\'', i + 1);
      EXPECT_NE(end, std::string::npos) << "unclosed quote: " << s;
      cur += s.substr(i + 1, end - i - 1);
      i = end;
      in_word = true;
    } else if (ch == '"') {
      for (++i; i < s.size() && s[i] != '"'; ++i) cur += s[i] == '\\' && i + 1 < s.size() ? s[++i] : s[i];
      in_word = true;
    } else if (ch == '\\' && i + 1 < s.size()) {
      cur += s[++i];
      in_word = true;
    } else if (ch == ' ' || ch == '\t') {
      if (in_word) out.push_back(cur);
      cur.clear();
      in_word = false;
    } else {
      cur += ch;
      in_word = true;
    }
  }
  if (in_word) out.push_back(cur);
  return out;
}

const std::map<std::string, Tool>& tools() {
  static const std::map<std::string, Tool> t = [] {
    std::map<std::string, Tool> m;
    for (const char* n : {"vllm", "sglang", "trtllm", "llamacpp", "parallm", "ray", "mpirun"}) m[n] = load_tool(n);
    return m;
  }();
  return t;
}

struct Parsed {
  std::string tool;                         // key of tools()
  std::map<std::string, std::string> args;  // flag -> value ("" for bool)
  std::vector<std::string> positional;
  std::string cuda_visible_devices;
};

// Checks the words from `i` against `tool`; returns the index after them.
size_t check_tool(const std::string& name, const std::vector<std::string>& w, size_t i, Parsed* p,
                  const std::string& line, const std::set<std::string>& stop = {}) {
  const Tool& t = tools().at(name);
  for (const auto& part : t.program) {
    EXPECT_LT(i, w.size()) << line;
    if (i >= w.size()) return i;
    EXPECT_EQ(w[i], part) << line;
    ++i;
  }
  int positional = 0;
  while (i < w.size()) {
    const std::string& a = w[i];
    if (stop.count(a) != 0) break;
    if (a.size() > 1 && a[0] == '-') {
      auto it = t.flags.find(a);
      EXPECT_NE(it, t.flags.end()) << name << " has no flag " << a << ": " << line;
      if (it == t.flags.end()) return w.size();
      std::string value;
      if (it->second.takes_value) {
        EXPECT_LT(i + 1, w.size()) << a << " needs a value: " << line;
        if (i + 1 >= w.size()) return w.size();
        value = w[++i];
        EXPECT_FALSE(value.size() > 1 && value[0] == '-' && !std::isdigit(static_cast<unsigned char>(value[1])))
            << a << " followed by a flag: " << line;
        if (!it->second.values.empty()) {
          EXPECT_EQ(it->second.values.count(value), 1u)
              << name << " " << a << " does not accept '" << value << "': " << line;
        }
      }
      p->args[a] = value;
    } else {
      ++positional;
      p->positional.push_back(a);
    }
    ++i;
  }
  EXPECT_EQ(positional, t.positional) << name << " positional arguments: " << line;
  p->tool = name;
  return i;
}

// One command line: environment assignments, then a launcher or a tool.
Parsed check_line(const std::string& line) {
  Parsed p;
  const std::vector<std::string> w = shell_split(line);
  size_t i = 0;
  while (i < w.size() && w[i].find('=') != std::string::npos && w[i][0] != '-') {
    const std::string var = w[i].substr(0, w[i].find('='));
    const std::string val = w[i].substr(w[i].find('=') + 1);
    EXPECT_EQ(var, "CUDA_VISIBLE_DEVICES") << line;
    EXPECT_EQ(val.find_first_not_of("0123456789,"), std::string::npos) << line;
    p.cuda_visible_devices = val;
    ++i;
  }
  EXPECT_LT(i, w.size()) << "empty command: " << line;
  if (i >= w.size()) return p;
  const std::string& prog = w[i];
  if (prog == "printf") {  // writes a config file: printf 'FORMAT' > FILE
    EXPECT_EQ(w.size(), i + 4) << line;
    EXPECT_EQ(w[i + 2], ">") << line;
    p.tool = "printf";
    p.positional = {w.back()};
    return p;
  }
  if (prog == "mpirun") {
    Parsed launcher;
    i = check_tool("mpirun", w, i, &launcher, line, {"trtllm-llmapi-launch"});
    EXPECT_LT(i, w.size()) << line;
    if (i < w.size()) {
      EXPECT_EQ(w[i], "trtllm-llmapi-launch") << line;
    }
    check_tool("trtllm", w, i + 1, &p, line);
    return p;
  }
  const std::map<std::string, std::string> by_program = {{"vllm", "vllm"},           {"python", "sglang"},
                                                         {"trtllm-serve", "trtllm"}, {"llama-server", "llamacpp"},
                                                         {"parallm", "parallm"},     {"ray", "ray"}};
  auto it = by_program.find(prog);
  EXPECT_NE(it, by_program.end()) << "unknown program in: " << line;
  if (it == by_program.end()) return p;
  check_tool(it->second, w, i, &p, line);
  return p;
}

struct Scenario {
  std::string label;
  PlanRequest r;
};

PlanRequest request(const char* model, const char* weights, const char* gpu, int gpus, int nodes = 1,
                    const char* ic = "") {
  return catalog_request(model, weights, gpu, gpus, ic, nodes);
}

std::vector<Scenario> scenarios() {
  std::vector<Scenario> s;
  auto add = [&](const std::string& label, PlanRequest r) { s.push_back({label, std::move(r)}); };
  {
    PlanRequest r = request("llama-2-13b", "fp16", "RTX-4090", 2, 1, "pcie4");
    r.workload.concurrency = 16;
    add("13B on 2x24 GB PCIe", r);
  }
  for (double conc : {1.0, 64.0}) {
    PlanRequest r = request("llama-2-70b", "fp16", "A100-80G", 4, 1, "nvlink");
    r.workload.concurrency = conc;
    add("70B fp16 4xA100 c" + std::to_string(static_cast<int>(conc)), r);
  }
  {
    PlanRequest r = request("llama-2-7b", "fp16", "A100-80G", 8);
    r.workload.concurrency = 200;
    r.workload.tpot_slo_ms = 50;
    add("7B A100 200 users", r);
  }
  add("70B int4 one A100", request("llama-2-70b", "int4", "A100-80G", 1));
  {
    PlanRequest r = request("llama-3.1-8b", "bf16", "H100-SXM", 8);
    r.pinned = Layout{4, 2, 1, 0};
    r.workload.concurrency = 256;
    add("8 GPUs as 4 x TP2", r);
  }
  {
    PlanRequest r = request("llama-2-70b", "fp16", "A100-80G", 4, 1, "nvlink");
    r.pinned = Layout{1, 2, 2, 0};
    add("70B tp2 pp2", r);
  }
  for (const char* w : {"fp8", "int8", "int4", "q4_k", "q8_0", "fp16"}) {
    PlanRequest r = request("llama-3.1-8b", w, "L4", 2, 1, "pcie4");
    r.workload.concurrency = 32;
    add(std::string("8B ") + w + " on 2 L4", r);
  }
  {
    PlanRequest r = request("qwen2.5-7b", "bf16", "A10", 4, 1, "pcie4");
    r.kv_dtype = "fp8";
    r.kv_elem_bytes = 1;
    r.workload.concurrency = 64;
    add("Qwen2.5-7B fp8 KV", r);
  }
  {
    PlanRequest r = request("deepseek-v3", "fp8", "H200", 8);
    r.workload.concurrency = 64;
    add("DeepSeek-V3 8xH200", r);
  }
  {
    PlanRequest r = request("deepseek-v3", "fp8", "H100-SXM", 8, 2);
    r.workload.concurrency = 64;
    add("DeepSeek-V3 2x8xH100", r);
  }
  add("405B bf16 2x8 H100", request("llama-3.1-405b", "bf16", "H100-SXM", 8, 2));
  {
    PlanRequest r = request("llama-3.1-8b", "bf16", "H100-SXM", 8, 2);
    r.workload.concurrency = 2000;
    r.pinned = Layout{8, 2, 1, 0};
    add("8B dp8 x tp2 over 2 nodes", r);
  }
  add("Gemma-2-9B on L4", request("gemma-2-9b", "bf16", "L4", 2, 1, "pcie4"));
  add("Phi-4 int4 on RTX-4090", request("phi-4", "int4", "RTX-4090", 1));
  {
    PlanRequest r = request("mixtral-8x7b", "bf16", "H100-SXM", 8);
    r.pinned = Layout{0, 4, 1, 4};
    add("Mixtral tp4 ep4", r);
  }
  return s;
}

std::vector<std::pair<std::string, const EngineLaunch*>> engines(const LaunchCommands& c) {
  return {{"parallm", &c.parallm_all},
          {"vllm", &c.vllm_all},
          {"sglang", &c.sglang_all},
          {"trtllm", &c.trtllm_all},
          {"llamacpp", &c.llamacpp_all}};
}

TEST(LaunchLines, EveryFlagOfEveryLineIsInItsToolsList) {
  int checked = 0;
  for (auto& sc : scenarios()) {
    SCOPED_TRACE(sc.label);
    Plan p = make_plan(sc.r);
    const Layout l = p.recommended;
    ASSERT_GT(l.tp, 0);
    const int group = l.tp * l.pp;
    const bool attn_dp = l.ep > l.tp && l.dp > 1;  // one EP group serves as one replica
    const int per_node = sc.r.fabric.gpus_per_node;
    const int nodes_used = (l.gpus() + per_node - 1) / per_node;
    for (const auto& [engine, e] : engines(p.commands)) {
      SCOPED_TRACE(engine);
      std::vector<Parsed> serves;
      for (const auto& line : e->lines) {
        Parsed q = check_line(line.command);
        ++checked;
        if (q.tool == engine) serves.push_back(q);
      }
      if (e->lines.empty()) {
        EXPECT_FALSE(e->note.empty()) << "no line and no reason";
        continue;
      }
      ASSERT_FALSE(serves.empty());
      const Parsed& s0 = serves.front();
      const std::string& w = sc.r.weights.name;
      // Parallelism on the line.
      if (engine == "vllm") {
        EXPECT_EQ(s0.args.at("--tensor-parallel-size"), std::to_string(l.tp));
        EXPECT_EQ(s0.args.at("--pipeline-parallel-size"), std::to_string(l.pp));
      } else if (engine == "sglang") {
        // Attention-DP + EP: SGLang's --tp-size is the whole EP group (with --dp and --enable-dp-attention).
        EXPECT_EQ(s0.args.at("--tp-size"), std::to_string(attn_dp ? l.tp * l.dp : l.tp));
        if (l.pp > 1) {
          EXPECT_EQ(s0.args.at("--pp-size"), std::to_string(l.pp)) << "pipeline stages dropped";
        } else {
          EXPECT_EQ(s0.args.count("--pp-size"), 0u);
        }
      } else if (engine == "trtllm") {
        EXPECT_EQ(s0.args.at("--tp_size"), std::to_string(attn_dp ? l.tp * l.dp : l.tp));
        EXPECT_EQ(s0.args.at("--pp_size"), std::to_string(l.pp));
      }
      // Quantized weights reach vLLM, SGLang and TensorRT-LLM.
      const std::string model = engine == "sglang"      ? s0.args.at("--model-path")
                                : s0.positional.empty() ? ""
                                                        : s0.positional[0];
      auto quant = [&]() { return s0.args.count("--quantization") ? s0.args.at("--quantization") : ""; };
      if (engine == "vllm" || engine == "sglang") {
        if (w == "fp8") {
          EXPECT_TRUE(quant() == "fp8" || model.find("FP8") != std::string::npos ||
                      model.find("DeepSeek-V3") != std::string::npos)
              << model;
        }
        if (w == "int8") {
          EXPECT_TRUE(quant() == "compressed-tensors" || quant() == "w8a8_int8");
        }
        if (w == "int4") {
          EXPECT_TRUE(quant() == "awq" || quant() == "bitsandbytes");
        }
        if (w.rfind("q", 0) == 0) {
          EXPECT_EQ(quant(), "gguf");
        }
        if (w == "bf16" || w == "fp16") {
          EXPECT_EQ(quant(), "");
        }
      }
      if (engine == "trtllm" && (w == "fp8" || w == "int8" || w == "int4")) {
        EXPECT_TRUE(model.find("FP8") != std::string::npos ||
                    model.find(w == "int8" ? "int8" : w) != std::string::npos ||
                    model.find("DeepSeek-V3") != std::string::npos)
            << "quantized checkpoint: " << model;
      }
      if (engine == "llamacpp") {
        // GGUF only: -hf REPO:QUANT or a .gguf path, never an HF safetensors id.
        if (s0.args.count("-hf")) {
          EXPECT_NE(s0.args.at("-hf").find(':'), std::string::npos);
        } else {
          const std::string m = s0.args.at("-m");
          EXPECT_EQ(m.substr(m.size() - 5), ".gguf") << m;
        }
      }
      // KV cache dtype.
      if (sc.r.kv_elem_bytes <= 1.0) {
        if (engine == "vllm") {
          EXPECT_EQ(s0.args.at("--kv-cache-dtype"), "fp8");
        }
        if (engine == "sglang") {
          EXPECT_EQ(s0.args.at("--kv-cache-dtype"), "fp8_e4m3");
        }
        if (engine == "llamacpp") {
          EXPECT_EQ(s0.args.at("-ctv"), "q8_0");
        }
        if (engine == "trtllm") {
          EXPECT_EQ(s0.args.at("--config"), e->lines.front().command.substr(e->lines.front().command.rfind(' ') + 1));
        }
      }
      // One command per replica where the engine has no data parallelism.
      if ((engine == "trtllm" || engine == "llamacpp") && l.dp > 1 && group <= per_node && !attn_dp) {
        ASSERT_EQ(static_cast<int>(serves.size()), l.dp);
        // Replica k runs on the node its label names; on one node no GPU serves two replicas.
        std::map<std::string, std::set<std::string>> used_per_node;  // "node N" -> GPUs
        std::set<std::string> ports;
        size_t k = 0;
        for (const auto& line : e->lines) {
          if (line.command.find(engine == "trtllm" ? "trtllm-serve" : "llama-server") == std::string::npos) continue;
          const std::string devs = serves[k].cuda_visible_devices;
          ASSERT_FALSE(devs.empty());
          const std::string node = line.where.substr(line.where.find("node"));
          std::stringstream ss(devs);
          int n = 0;
          for (std::string g; std::getline(ss, g, ',');) {
            ++n;
            EXPECT_TRUE(used_per_node[node].insert(g).second) << "GPU " << g << " in two replicas on " << node;
            EXPECT_LT(std::stoi(g), per_node);
          }
          EXPECT_EQ(n, group);
          ports.insert(serves[k].args.at("--port"));
          ++k;
        }
        EXPECT_EQ(k, serves.size());
        EXPECT_EQ(static_cast<int>(ports.size()), l.dp) << "every replica its own port";
      }
      // Multi-node: one command per node.
      if (nodes_used > 1 && (engine == "vllm" || engine == "sglang")) {
        std::set<std::string> where;
        for (const auto& line : e->lines) where.insert(line.where);
        EXPECT_GE(static_cast<int>(where.size()), nodes_used) << "one command per node";
        if (engine == "sglang" && group > per_node) {
          EXPECT_EQ(s0.args.at("--nnodes"), std::to_string(group / per_node));
        }
        if (engine == "vllm" && group > per_node) {
          EXPECT_EQ(s0.args.at("--distributed-executor-backend"), "ray");
        }
        if (engine == "vllm" && group <= per_node) {
          EXPECT_TRUE(s0.args.count("--data-parallel-address"));
        }
      }
    }
    // parallm serves local files on the CPU only: never a line for a catalog model on GPUs.
    EXPECT_TRUE(p.commands.parallm_all.lines.empty());
    EXPECT_NE(p.commands.parallm_all.note.find("No parallm line"), std::string::npos);
  }
  EXPECT_GT(checked, 80);
}

TEST(LaunchLines, TheCheckerRejectsWhatTheToolsReject) {
  // The checker must be able to fail: an unknown flag, a value outside the set,
  // a missing model and the old SGLang "--dp 1" / llama-server "-m <HF id>" lines.
  EXPECT_NONFATAL_FAILURE(check_line("vllm serve m --tensor-parallel-size 2 --no-such-flag 3"), "has no flag");
  EXPECT_NONFATAL_FAILURE(check_line("vllm serve m --quantization int4"), "does not accept");
  EXPECT_NONFATAL_FAILURE(check_line("vllm serve --tensor-parallel-size 2"), "positional");
  EXPECT_NONFATAL_FAILURE(check_line("python -m sglang.launch_server --model-path m --tp 2 --dp 1"), "has no flag");
  EXPECT_NONFATAL_FAILURE(check_line("llama-server -m meta-llama/Llama-3.1-8B extra"), "positional");
}

// Attention data-parallel + expert-parallel (ep spans the dp ranks): one
// replica of dp x tp GPUs, the way DeepSeek-V3 is served, on 8 and 16 GPUs.
TEST(LaunchLines, AttentionDpWithExpertParallelIsOneReplica) {
  for (int nodes : {1, 2}) {
    SCOPED_TRACE(nodes);
    PlanRequest r = request("deepseek-v3", "fp8", nodes == 1 ? "H200" : "H100-SXM", 8, nodes);
    r.workload.concurrency = 256;
    Plan p = make_plan(r);
    Candidate c = p.best >= 0 ? p.candidates[p.best] : Candidate{};
    const int n = 8 * nodes;
    c.layout = Layout{n, 1, 1, n};
    const LaunchCommands cmd = launch_commands(p, c);
    for (const auto& [engine, e] : engines(cmd))
      for (const auto& line : e->lines) check_line(line.command);
    ASSERT_EQ(static_cast<int>(cmd.vllm_all.lines.size()), nodes);
    Parsed v = check_line(cmd.vllm_all.lines[0].command);
    EXPECT_EQ(v.args.at("--data-parallel-size"), std::to_string(n));
    EXPECT_EQ(v.args.at("--tensor-parallel-size"), "1");
    EXPECT_EQ(v.args.count("--enable-expert-parallel"), 1u);
    if (nodes > 1) {
      EXPECT_EQ(check_line(cmd.vllm_all.lines[1].command).args.count("--headless"), 1u);
    }
    ASSERT_EQ(static_cast<int>(cmd.sglang_all.lines.size()), nodes);
    Parsed sg = check_line(cmd.sglang_all.lines[0].command);
    EXPECT_EQ(sg.args.at("--tp-size"), std::to_string(n));
    EXPECT_EQ(sg.args.at("--dp-size"), std::to_string(n));
    EXPECT_EQ(sg.args.count("--enable-dp-attention"), 1u);
    EXPECT_EQ(sg.args.at("--ep-size"), std::to_string(n));
    if (nodes > 1) {
      EXPECT_EQ(sg.args.at("--nnodes"), "2");
    }
    // TensorRT-LLM: one server (not one per dp rank), attention DP in its YAML.
    int serves = 0;
    bool attention_dp = false;
    for (const auto& line : cmd.trtllm_all.lines) {
      serves += line.command.find("trtllm-serve") != std::string::npos;
      attention_dp = attention_dp || line.command.find("enable_attention_dp: true") != std::string::npos;
    }
    EXPECT_EQ(serves, 1);
    EXPECT_TRUE(attention_dp);
    EXPECT_EQ(check_line(cmd.trtllm).args.at("--tp_size"), std::to_string(n));
    EXPECT_TRUE(cmd.llamacpp_all.lines.empty());
  }
}

TEST(LaunchLines, ParallmLineOnlyForALocalSupportedModelOnTheCpu) {
  PlanRequest r = request("llama-3.1-8b", "q4_0", "cpu", 1);
  r.model_ref = kData + "llama-3.1-8b-config.json";  // a local file
  r.model = load_model_spec(r.model_ref);            // its description: the engine runs it
  ASSERT_EQ(r.model.arch, "llama");
  ASSERT_EQ(r.model.engine_refusal, "");
  Plan p = make_plan(r);
  ASSERT_EQ(p.commands.parallm_all.lines.size(), 1u) << p.commands.parallm_all.note;
  Parsed q = check_line(p.commands.parallm);
  EXPECT_EQ(q.args.at("--model"), r.model_ref);
  // A config.json the engine would refuse, described by the same reader.
  std::string text = read_text(r.model_ref);
  text.replace(text.find("\"llama\""), 7, "\"falcon\"");
  r.model = model_from_hf_config_text(text, r.model_ref);
  EXPECT_TRUE(make_plan(r).commands.parallm_all.lines.empty());
  EXPECT_NE(make_plan(r).commands.parallm_all.note.find("architecture 'falcon'"), std::string::npos)
      << make_plan(r).commands.parallm_all.note;
  r.model = load_model_spec(r.model_ref);
  r.gpu = catalog_gpu("A100-80G");
  r.fabric = fabric_from_interconnect(r.gpu, "", 1, 1);
  EXPECT_NE(make_plan(r).commands.parallm_all.note.find("CPU only"), std::string::npos);
}

TEST(LaunchLines, MaxNumSeqsIsTheSloCapacityCappedByKv) {
  PlanRequest r = request("llama-2-7b", "fp16", "A100-80G", 1);
  r.workload.concurrency = 8;
  r.workload.tpot_slo_ms = 30;
  Plan p = make_plan(r);
  const Candidate& b = p.candidates[p.best];
  const long long expect = std::min<long long>(
      {static_cast<long long>(b.max_concurrency_slo), static_cast<long long>(b.max_concurrency_kv), 256LL});
  EXPECT_EQ(check_line(p.commands.vllm).args.at("--max-num-seqs"), std::to_string(expect));
  // DeepSeek-V3 bf16 on 8xH100 needs more devices than given: the hypothetical
  // layout's KV capacity sets the limit, not 1.
  PlanRequest d = request("deepseek-v3", "bf16", "H100-SXM", 8);
  Plan pd = make_plan(d);
  EXPECT_GT(std::stoll(check_line(pd.commands.vllm).args.at("--max-num-seqs")), 1);
}

}  // namespace
}  // namespace parallm::planner
