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

ModelSpec dense(const char* name, const char* repo, int64_t layers, int64_t embd, int64_t heads, int64_t kv,
                int64_t ff, int64_t vocab, int64_t max_pos) {
  ModelSpec m;
  m.name = name;
  m.hf_repo = repo;
  m.n_layer = layers;
  m.n_embd = embd;
  m.n_head = heads;
  m.n_kv_head = kv;
  m.head_dim = embd / heads;
  m.n_ff = ff;
  m.n_vocab = vocab;
  m.max_position = max_pos;
  return m;
}

std::vector<ModelSpec> build_catalog() {
  std::vector<ModelSpec> c;
  c.push_back(dense("llama-2-7b", "meta-llama/Llama-2-7b-hf", 32, 4096, 32, 32, 11008, 32000, 4096));
  c.push_back(dense("llama-2-13b", "meta-llama/Llama-2-13b-hf", 40, 5120, 40, 40, 13824, 32000, 4096));
  c.push_back(dense("llama-2-70b", "meta-llama/Llama-2-70b-hf", 80, 8192, 64, 8, 28672, 32000, 4096));
  c.push_back(dense("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct", 32, 4096, 32, 8, 14336, 128256, 131072));
  c.push_back(dense("llama-3.1-70b", "meta-llama/Llama-3.1-70B-Instruct", 80, 8192, 64, 8, 28672, 128256, 131072));
  c.push_back(dense("llama-3.1-405b", "meta-llama/Llama-3.1-405B-Instruct", 126, 16384, 128, 8, 53248, 128256,
                    131072));
  for (auto [name, repo, layers, embd, heads, kv, ff] :
       {std::tuple{"qwen2.5-7b", "Qwen/Qwen2.5-7B-Instruct", 28, 3584, 28, 4, 18944},
        std::tuple{"qwen2.5-14b", "Qwen/Qwen2.5-14B-Instruct", 48, 5120, 40, 8, 13824},
        std::tuple{"qwen2.5-32b", "Qwen/Qwen2.5-32B-Instruct", 64, 5120, 40, 8, 27648},
        std::tuple{"qwen2.5-72b", "Qwen/Qwen2.5-72B-Instruct", 80, 8192, 64, 8, 29568}}) {
    ModelSpec m = dense(name, repo, layers, embd, heads, kv, ff, 152064, 32768);
    m.attn_bias = true;
    c.push_back(m);
  }
  c.push_back(dense("mistral-7b", "mistralai/Mistral-7B-v0.1", 32, 4096, 32, 8, 14336, 32000, 32768));
  {
    ModelSpec m = dense("mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1", 32, 4096, 32, 8, 0, 32000, 32768);
    m.n_expert = 8;
    m.n_expert_used = 2;
    m.n_ff_expert = 14336;
    c.push_back(m);
  }
  {
    ModelSpec m = dense("mixtral-8x22b", "mistralai/Mixtral-8x22B-v0.1", 56, 6144, 48, 8, 0, 32000, 65536);
    m.n_expert = 8;
    m.n_expert_used = 2;
    m.n_ff_expert = 16384;
    c.push_back(m);
  }
  for (auto [name, repo, layers, embd, heads, kv, ff_expert] :
       {std::tuple{"qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", 48, 2048, 32, 4, 768},
        std::tuple{"qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B", 94, 4096, 64, 4, 1536}}) {
    ModelSpec m = dense(name, repo, layers, embd, heads, kv, 0, 151936, 40960);
    m.head_dim = 128;  // explicit head_dim in the config, not hidden/heads
    m.qk_norm = true;
    m.n_expert = 128;
    m.n_expert_used = 8;
    m.n_ff_expert = ff_expert;
    c.push_back(m);
  }
  {
    ModelSpec m = dense("deepseek-v3", "deepseek-ai/DeepSeek-V3", 61, 7168, 128, 128, 18432, 129280, 163840);
    m.head_dim = 0;  // MLA: head dims below
    m.q_lora_rank = 1536;
    m.kv_lora_rank = 512;
    m.qk_nope_head_dim = 128;
    m.qk_rope_head_dim = 64;
    m.v_head_dim = 128;
    m.n_expert = 256;
    m.n_expert_used = 8;
    m.n_ff_expert = 2048;
    m.n_shared_expert = 1;
    m.n_dense_layers = 3;
    c.push_back(m);
  }
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

}  // namespace

bool catalog_has_model(const std::string& name) {
  for (const auto& m : catalog())
    if (m.name == lower(name)) return true;
  return false;
}

ModelSpec catalog_model(const std::string& name) {
  for (const auto& m : catalog())
    if (m.name == lower(name)) return m;
  std::string known;
  for (const auto& m : catalog()) known += (known.empty() ? "" : ", ") + m.name;
  throw InputError("unknown model '" + name + "' (not a file, not in the catalog: " + known + ")");
}

std::vector<std::string> catalog_model_names() {
  std::vector<std::string> out;
  for (const auto& m : catalog()) out.push_back(m.name);
  return out;
}

}  // namespace parallm::planner
