// Public config.json values (hidden_size, num_hidden_layers, num_attention_heads,
// num_key_value_heads, head_dim, intermediate_size, vocab_size,
// tie_word_embeddings, MoE and MLA fields) of the catalog models, as published
// on the Hugging Face model pages named in hf_repo.
#include "planner/model_catalog.h"

#include <algorithm>
#include <cctype>
#include <tuple>

#include "util/check.h"

namespace parallm::planner {

namespace {

// A catalog entry: the architecture's implied features (biases, norms, tied
// embeddings, ... as apply_architecture_defaults says) and the published
// shapes; head_dim is hidden / heads unless an entry sets it.
ModelSpec entry(const char* name, const char* repo, Architecture arch, int64_t layers, int64_t embd, int64_t heads,
                int64_t kv, int64_t ff, int64_t vocab, int64_t max_pos) {
  ModelSpec m;
  m.name = name;
  m.hf_repo = repo;
  ModelConfig& c = m.config;
  c.arch = arch;
  apply_architecture_defaults(&c);
  c.n_layer = layers;
  c.n_embd = embd;
  c.n_head = heads;
  c.n_kv_head = kv;
  c.n_ff = ff;
  c.n_vocab = vocab;
  c.n_ctx_train = max_pos;
  return m;
}

ModelSpec llama(const char* name, const char* repo, int64_t layers, int64_t embd, int64_t heads, int64_t kv, int64_t ff,
                int64_t vocab, int64_t max_pos) {
  return entry(name, repo, Architecture::kLlama, layers, embd, heads, kv, ff, vocab, max_pos);
}

std::vector<ModelSpec> build_catalog() {
  std::vector<ModelSpec> c;
  c.push_back(llama("llama-2-7b", "meta-llama/Llama-2-7b-hf", 32, 4096, 32, 32, 11008, 32000, 4096));
  c.push_back(llama("llama-2-13b", "meta-llama/Llama-2-13b-hf", 40, 5120, 40, 40, 13824, 32000, 4096));
  c.push_back(llama("llama-2-70b", "meta-llama/Llama-2-70b-hf", 80, 8192, 64, 8, 28672, 32000, 4096));
  c.push_back(llama("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct", 32, 4096, 32, 8, 14336, 128256, 131072));
  c.push_back(llama("llama-3.1-70b", "meta-llama/Llama-3.1-70B-Instruct", 80, 8192, 64, 8, 28672, 128256, 131072));
  c.push_back(llama("llama-3.1-405b", "meta-llama/Llama-3.1-405B-Instruct", 126, 16384, 128, 8, 53248, 128256, 131072));
  // Qwen2.5: q/k/v biases (the architecture's).
  for (auto [name, repo, layers, embd, heads, kv, ff] :
       {std::tuple{"qwen2.5-7b", "Qwen/Qwen2.5-7B-Instruct", 28, 3584, 28, 4, 18944},
        std::tuple{"qwen2.5-14b", "Qwen/Qwen2.5-14B-Instruct", 48, 5120, 40, 8, 13824},
        std::tuple{"qwen2.5-32b", "Qwen/Qwen2.5-32B-Instruct", 64, 5120, 40, 8, 27648},
        std::tuple{"qwen2.5-72b", "Qwen/Qwen2.5-72B-Instruct", 80, 8192, 64, 8, 29568}}) {
    c.push_back(entry(name, repo, Architecture::kQwen2, layers, embd, heads, kv, ff, 152064, 32768));
  }
  // Llama 3.2 small models (tied embeddings; head_dim = hidden / heads).
  for (auto [name, repo, layers, embd, heads] :
       {std::tuple{"llama-3.2-1b", "meta-llama/Llama-3.2-1B-Instruct", 16, 2048, 32},
        std::tuple{"llama-3.2-3b", "meta-llama/Llama-3.2-3B-Instruct", 28, 3072, 24}}) {
    ModelSpec m = llama(name, repo, layers, embd, heads, 8, 8192, 128256, 131072);
    m.config.tied_embeddings = true;
    c.push_back(m);
  }
  // Qwen3 dense: explicit head_dim 128, q/k RMSNorm (the architecture's), no
  // qkv bias; the three smallest tie their embeddings.
  for (auto [name, repo, layers, embd, heads, ff, tied] :
       {std::tuple{"qwen3-0.6b", "Qwen/Qwen3-0.6B", 28, 1024, 16, 3072, true},
        std::tuple{"qwen3-1.7b", "Qwen/Qwen3-1.7B", 28, 2048, 16, 6144, true},
        std::tuple{"qwen3-4b", "Qwen/Qwen3-4B", 36, 2560, 32, 9728, true},
        std::tuple{"qwen3-8b", "Qwen/Qwen3-8B", 36, 4096, 32, 12288, false},
        std::tuple{"qwen3-14b", "Qwen/Qwen3-14B", 40, 5120, 40, 17408, false},
        std::tuple{"qwen3-32b", "Qwen/Qwen3-32B", 64, 5120, 64, 25600, false}}) {
    ModelSpec m = entry(name, repo, Architecture::kQwen3, layers, embd, heads, 8, ff, 151936, 40960);
    m.config.head_dim = 128;
    m.config.tied_embeddings = tied;
    c.push_back(m);
  }
  // Gemma 2 / 3 (text part): explicit head_dim; tied embeddings and the
  // RMSNorms after attention and after the FFN as well (both generations'),
  // q/k norms (Gemma 3's). NOTE: their sliding-window layers keep a shorter
  // KV cache than the global ones; the memory model counts every layer as
  // global (an upper bound).
  for (auto [name, repo, layers, embd, heads, kv, hd, ff, vocab, max_pos] :
       {std::tuple{"gemma-2-2b", "google/gemma-2-2b-it", 26, 2304, 8, 4, 256, 9216, 256000, 8192},
        std::tuple{"gemma-2-9b", "google/gemma-2-9b-it", 42, 3584, 16, 8, 256, 14336, 256000, 8192},
        std::tuple{"gemma-2-27b", "google/gemma-2-27b-it", 46, 4608, 32, 16, 128, 36864, 256000, 8192},
        std::tuple{"gemma-3-1b", "google/gemma-3-1b-it", 26, 1152, 4, 1, 256, 6912, 262144, 32768},
        std::tuple{"gemma-3-4b", "google/gemma-3-4b-it", 34, 2560, 8, 4, 256, 10240, 262208, 131072},
        std::tuple{"gemma-3-12b", "google/gemma-3-12b-it", 48, 3840, 16, 8, 256, 15360, 262208, 131072},
        std::tuple{"gemma-3-27b", "google/gemma-3-27b-it", 62, 5376, 32, 16, 128, 21504, 262208, 131072}}) {
    const Architecture arch =
        std::string(name).rfind("gemma-3", 0) == 0 ? Architecture::kGemma3 : Architecture::kGemma2;
    ModelSpec m = entry(name, repo, arch, layers, embd, heads, kv, ff, vocab, max_pos);
    m.config.head_dim = hd;
    c.push_back(m);
  }
  // Phi-3 / Phi-4 (model_type phi3: fused q/k/v and gate/up, the same counts).
  for (auto [name, repo, layers, embd, heads, kv, ff, vocab, max_pos] :
       {std::tuple{"phi-3-mini", "microsoft/Phi-3-mini-4k-instruct", 32, 3072, 32, 32, 8192, 32064, 4096},
        std::tuple{"phi-3-medium", "microsoft/Phi-3-medium-4k-instruct", 40, 5120, 40, 10, 17920, 32064, 4096},
        std::tuple{"phi-4", "microsoft/phi-4", 40, 5120, 40, 10, 17920, 100352, 16384}}) {
    c.push_back(entry(name, repo, Architecture::kPhi3, layers, embd, heads, kv, ff, vocab, max_pos));
  }
  {
    ModelSpec m = entry("phi-4-mini", "microsoft/Phi-4-mini-instruct", Architecture::kPhi3, 32, 3072, 24, 8, 8192,
                        200064, 131072);
    m.config.tied_embeddings = true;
    c.push_back(m);
  }
  c.push_back(llama("mistral-7b", "mistralai/Mistral-7B-v0.1", 32, 4096, 32, 8, 14336, 32000, 32768));
  // Mixtral: every layer sparse; n_ff is each expert's width.
  for (auto [name, repo, layers, embd, heads, ff_expert, max_pos] :
       {std::tuple{"mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1", 32, 4096, 32, 14336, 32768},
        std::tuple{"mixtral-8x22b", "mistralai/Mixtral-8x22B-v0.1", 56, 6144, 48, 16384, 65536}}) {
    ModelSpec m = llama(name, repo, layers, embd, heads, 8, ff_expert, 32000, max_pos);
    m.config.n_expert = 8;
    m.config.n_expert_used = 2;
    c.push_back(m);
  }
  for (auto [name, repo, layers, embd, heads, kv, ff_expert] :
       {std::tuple{"qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", 48, 2048, 32, 4, 768},
        std::tuple{"qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B", 94, 4096, 64, 4, 1536}}) {
    ModelSpec m = entry(name, repo, Architecture::kQwen3Moe, layers, embd, heads, kv, ff_expert, 151936, 40960);
    m.config.head_dim = 128;  // explicit head_dim in the config, not hidden/heads
    m.config.n_expert = 128;
    m.config.n_expert_used = 8;
    c.push_back(m);
  }
  {
    // The routed experts' width is n_ff; the three leading dense layers' n_ff_dense.
    ModelSpec m = entry("deepseek-v3", "deepseek-ai/DeepSeek-V3", Architecture::kDeepseek2, 61, 7168, 128, 128, 2048,
                        129280, 163840);
    ModelConfig& d = m.config;
    d.q_lora_rank = 1536;
    d.kv_lora_rank = 512;
    d.qk_nope_dim = 128;
    d.qk_rope_dim = 64;
    d.v_head_dim = 128;
    d.head_dim = d.qk_nope_dim + d.qk_rope_dim;  // MLA's key head
    d.n_expert = 256;
    d.n_expert_used = 8;
    d.n_expert_shared = 1;
    d.n_ff_shared = d.n_expert_shared * d.n_ff;
    d.n_dense_lead = 3;
    d.n_ff_dense = 18432;
    d.router_bias = true;  // e_score_correction_bias [256] in each of the 58 MoE layers
    c.push_back(m);
  }
  for (ModelSpec& m : c) m.config.finalize();  // checked and derived (head_dim) as a file's description is
  return c;
}

const std::vector<ModelSpec>& catalog() {
  static const std::vector<ModelSpec> c = build_catalog();
  return c;
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// Hugging Face ids compare without case, the organisation's "Meta-" model
// prefix and the release suffixes (-Instruct, -it, -hf, -chat): the base and
// the instruct repository of a model have the same architecture.
std::string hf_key(const std::string& id) {
  std::string s = lower(id);
  const size_t slash = s.find('/');
  if (slash != std::string::npos && s.compare(slash + 1, 5, "meta-") == 0) s.erase(slash + 1, 5);
  for (bool again = true; again;) {
    again = false;
    for (const char* suffix : {"-instruct", "-chat-hf", "-chat", "-hf", "-it", "-4k", "-128k"}) {
      const std::string x = suffix;
      if (s.size() > x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0) {
        s.erase(s.size() - x.size());
        again = true;
      }
    }
  }
  return s;
}

// Levenshtein distance, for "did you mean" suggestions.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

const ModelSpec* find_model(const std::string& name) {
  const std::string n = lower(name);
  for (const auto& m : catalog())
    if (m.name == n) return &m;
  if (name.find('/') != std::string::npos) {
    const std::string k = hf_key(name);
    for (const auto& m : catalog())
      if (hf_key(m.hf_repo) == k) return &m;
  }
  return nullptr;
}

}  // namespace

bool catalog_has_model(const std::string& name) {
  return find_model(name) != nullptr && name.find('/') == std::string::npos;
}

bool catalog_has_hf_id(const std::string& hf_id) {
  return hf_id.find('/') != std::string::npos && find_model(hf_id) != nullptr;
}

std::vector<std::string> close_model_names(const std::string& name, size_t max_count) {
  const bool hf = name.find('/') != std::string::npos;
  const std::string key = hf ? hf_key(name) : lower(name);
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& m : catalog()) {
    const std::string cand = hf ? m.hf_repo : m.name;
    scored.push_back({edit_distance(key, hf ? hf_key(cand) : cand), cand});
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (const auto& [d, cand] : scored) {
    if (out.size() >= max_count || d > std::max<size_t>(4, key.size() / 2)) break;
    out.push_back(cand);
  }
  return out;
}

QuantizedRepos catalog_quantized_repos(const std::string& name) {
  // Public repositories holding the catalog models' weights in other formats
  // (AWQ int4, W8A8 int8, FP8 ModelOpt / official FP8, GGUF); "" = none known.
  struct Row {
    const char* name;
    QuantizedRepos r;
  };
  static const Row rows[] = {
      {"llama-2-7b", {"TheBloke/Llama-2-7B-AWQ", "", "", "TheBloke/Llama-2-7B-GGUF"}},
      {"llama-2-13b", {"TheBloke/Llama-2-13B-AWQ", "", "", "TheBloke/Llama-2-13B-GGUF"}},
      {"llama-2-70b", {"TheBloke/Llama-2-70B-AWQ", "", "", "TheBloke/Llama-2-70B-GGUF"}},
      {"llama-3.1-8b",
       {"hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8",
        "nvidia/Llama-3.1-8B-Instruct-FP8", "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF"}},
      {"llama-3.1-70b",
       {"hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", "RedHatAI/Meta-Llama-3.1-70B-Instruct-quantized.w8a8",
        "nvidia/Llama-3.1-70B-Instruct-FP8", "bartowski/Meta-Llama-3.1-70B-Instruct-GGUF"}},
      {"llama-3.1-405b",
       {"hugging-quants/Meta-Llama-3.1-405B-Instruct-AWQ-INT4", "", "nvidia/Llama-3.1-405B-Instruct-FP8", ""}},
      {"llama-3.2-1b", {"", "", "", "bartowski/Llama-3.2-1B-Instruct-GGUF"}},
      {"llama-3.2-3b", {"", "", "", "bartowski/Llama-3.2-3B-Instruct-GGUF"}},
      {"qwen2.5-7b", {"Qwen/Qwen2.5-7B-Instruct-AWQ", "", "", "Qwen/Qwen2.5-7B-Instruct-GGUF"}},
      {"qwen2.5-14b", {"Qwen/Qwen2.5-14B-Instruct-AWQ", "", "", "Qwen/Qwen2.5-14B-Instruct-GGUF"}},
      {"qwen2.5-32b", {"Qwen/Qwen2.5-32B-Instruct-AWQ", "", "", "Qwen/Qwen2.5-32B-Instruct-GGUF"}},
      {"qwen2.5-72b", {"Qwen/Qwen2.5-72B-Instruct-AWQ", "", "", "Qwen/Qwen2.5-72B-Instruct-GGUF"}},
      {"qwen3-0.6b", {"", "", "Qwen/Qwen3-0.6B-FP8", "Qwen/Qwen3-0.6B-GGUF"}},
      {"qwen3-1.7b", {"", "", "Qwen/Qwen3-1.7B-FP8", "Qwen/Qwen3-1.7B-GGUF"}},
      {"qwen3-4b", {"Qwen/Qwen3-4B-AWQ", "", "Qwen/Qwen3-4B-FP8", "Qwen/Qwen3-4B-GGUF"}},
      {"qwen3-8b", {"Qwen/Qwen3-8B-AWQ", "", "Qwen/Qwen3-8B-FP8", "Qwen/Qwen3-8B-GGUF"}},
      {"qwen3-14b", {"Qwen/Qwen3-14B-AWQ", "", "Qwen/Qwen3-14B-FP8", "Qwen/Qwen3-14B-GGUF"}},
      {"qwen3-32b", {"Qwen/Qwen3-32B-AWQ", "", "Qwen/Qwen3-32B-FP8", "Qwen/Qwen3-32B-GGUF"}},
      {"qwen3-30b-a3b", {"", "", "Qwen/Qwen3-30B-A3B-FP8", "Qwen/Qwen3-30B-A3B-GGUF"}},
      {"qwen3-235b-a22b", {"", "", "Qwen/Qwen3-235B-A22B-FP8", ""}},
      {"mistral-7b", {"TheBloke/Mistral-7B-v0.1-AWQ", "", "", "TheBloke/Mistral-7B-v0.1-GGUF"}},
      {"mixtral-8x7b", {"TheBloke/Mixtral-8x7B-v0.1-AWQ", "", "", "TheBloke/Mixtral-8x7B-v0.1-GGUF"}},
      // DeepSeek-V3's own checkpoint is FP8 (block-scaled).
      {"deepseek-v3", {"", "", "deepseek-ai/DeepSeek-V3", "unsloth/DeepSeek-V3-GGUF"}},
      {"gemma-2-2b", {"", "", "", "bartowski/gemma-2-2b-it-GGUF"}},
      {"gemma-2-9b", {"", "", "", "bartowski/gemma-2-9b-it-GGUF"}},
      {"gemma-2-27b", {"", "", "", "bartowski/gemma-2-27b-it-GGUF"}},
      {"gemma-3-1b", {"", "", "", "unsloth/gemma-3-1b-it-GGUF"}},
      {"gemma-3-4b", {"", "", "", "unsloth/gemma-3-4b-it-GGUF"}},
      {"gemma-3-12b", {"", "", "", "unsloth/gemma-3-12b-it-GGUF"}},
      {"gemma-3-27b", {"", "", "", "unsloth/gemma-3-27b-it-GGUF"}},
      {"phi-3-mini", {"", "", "", "microsoft/Phi-3-mini-4k-instruct-gguf"}},
      {"phi-3-medium", {"", "", "", "bartowski/Phi-3-medium-4k-instruct-GGUF"}},
      {"phi-4", {"", "", "", "microsoft/phi-4-gguf"}},
  };
  const ModelSpec* m = find_model(name);
  if (m == nullptr) return {};
  for (const Row& row : rows)
    if (m->name == row.name) return row.r;
  return {};
}

ModelSpec catalog_model(const std::string& name) {
  if (const ModelSpec* m = find_model(name)) return *m;
  std::string close;
  for (const auto& c : close_model_names(name, 3)) close += (close.empty() ? "" : ", ") + c;
  if (name.find('/') != std::string::npos)
    throw InputError("unknown model '" + name + "': not a file and not a Hugging Face id in the catalog" +
                     (close.empty() ? std::string(" (give its config.json instead)")
                                    : " (did you mean " + close + "? or give its config.json)"));
  std::string known;
  for (const auto& m : catalog()) known += (known.empty() ? "" : ", ") + m.name;
  throw InputError("unknown model '" + name + "' (not a file, not in the catalog" +
                   (close.empty() ? "" : "; did you mean " + close + "?") + " known: " + known + ")");
}

std::vector<std::string> catalog_model_names() {
  std::vector<std::string> out;
  for (const auto& m : catalog()) out.push_back(m.name);
  return out;
}

}  // namespace parallm::planner
