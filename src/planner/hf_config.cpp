// Hugging Face config.json -> ModelSpec: the handful of fields the planner
// needs (Llama, Mistral, Mixtral, Qwen2/2.5, Qwen3, Qwen3-MoE, DeepSeek-V2/V3
// naming), with the defaults transformers applies (num_key_value_heads =
// num_attention_heads, head_dim = hidden_size / num_attention_heads).
// Multimodal configs nest the language model under "text_config".
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "planner/model_catalog.h"
#include "planner/model_source.h"
#include "util/check.h"
#include "util/json_parse.h"

namespace parallm::planner {

namespace {

int64_t get_int(const nlohmann::json& j, const char* key, int64_t fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) throw InputError(std::string("config field '") + key + "' is not a number");
  return it->get<int64_t>();
}

}  // namespace

ModelSpec model_from_hf_config_text(const std::string& text, const std::string& origin) {
  JsonError error;
  const std::optional<nlohmann::json> parsed = try_parse_json<nlohmann::json>(text, JsonLimits{kFileJsonDepth}, &error);
  if (!parsed) throw InputError(origin + ": not valid JSON (" + error.message + ")");
  const nlohmann::json& root = *parsed;
  if (!root.is_object()) throw InputError(origin + ": config.json must be a JSON object");
  const nlohmann::json& j =
      root.contains("text_config") && root["text_config"].is_object() ? root["text_config"] : root;
  const std::string type = j.value("model_type", root.value("model_type", std::string()));
  ModelSpec m;
  m.name = origin;
  m.n_embd = get_int(j, "hidden_size", 0);
  m.n_layer = get_int(j, "num_hidden_layers", 0);
  m.n_head = get_int(j, "num_attention_heads", 0);
  m.n_kv_head = get_int(j, "num_key_value_heads", m.n_head);
  m.head_dim = get_int(j, "head_dim", m.n_head > 0 ? m.n_embd / m.n_head : 0);
  m.n_ff = get_int(j, "intermediate_size", 0);
  m.n_vocab = get_int(j, "vocab_size", 0);
  m.max_position = get_int(j, "max_position_embeddings", 0);
  m.tied_embeddings = root.value("tie_word_embeddings", j.value("tie_word_embeddings", false));
  m.attn_bias = type == "qwen2" || type == "qwen2_moe" || j.value("attention_bias", false);
  m.qk_norm = type == "qwen3" || type == "qwen3_moe";
  // Experts: Mixtral num_local_experts, Qwen num_experts, DeepSeek n_routed_experts.
  m.n_expert = get_int(j, "num_local_experts", get_int(j, "num_experts", get_int(j, "n_routed_experts", 0)));
  if (m.n_expert > 0) {
    m.n_expert_used = get_int(j, "num_experts_per_tok", 0);
    m.n_ff_expert = get_int(j, "moe_intermediate_size", m.n_ff);  // Mixtral: experts use intermediate_size
    m.n_shared_expert = get_int(j, "n_shared_experts", 0);
    const int64_t shared_ff = get_int(j, "shared_expert_intermediate_size", 0);
    if (shared_ff > 0) {
      m.n_shared_expert = 1;
      m.n_ff_shared = shared_ff;
    }
    m.n_dense_layers = get_int(j, "first_k_dense_replace", 0);
    // DeepSeek-V3's router keeps a per-expert score bias (noaux_tc routing);
    // Qwen2-MoE gates its shared expert with one more [1, n_embd] projection.
    m.moe_router_bias = type == "deepseek_v3" || j.value("topk_method", std::string()) == "noaux_tc";
    m.shared_expert_gate = type == "qwen2_moe";
  }
  m.kv_lora_rank = get_int(j, "kv_lora_rank", 0);
  if (m.kv_lora_rank > 0) {
    m.q_lora_rank = get_int(j, "q_lora_rank", 0);
    m.qk_nope_head_dim = get_int(j, "qk_nope_head_dim", 0);
    m.qk_rope_head_dim = get_int(j, "qk_rope_head_dim", 0);
    m.v_head_dim = get_int(j, "v_head_dim", 0);
    m.head_dim = 0;
  }
  try {
    validate_model(m);
  } catch (const InputError& e) {
    std::string msg = e.what();
    throw InputError(origin + ": " + msg.substr(msg.find(": ") + 2));
  }
  return m;
}

ModelSpec model_from_hf_config_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw InputError("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return model_from_hf_config_text(ss.str(), path);
}

ModelSpec load_model_spec(const std::string& ref) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(ref, ec)) {
    fs::path cfg = fs::path(ref) / "config.json";
    if (!fs::exists(cfg, ec)) throw InputError(ref + ": directory without config.json");
    return model_from_hf_config_file(cfg.string());
  }
  if (fs::is_regular_file(ref, ec)) {
    std::ifstream f(ref, std::ios::binary);
    char magic[4] = {0, 0, 0, 0};
    f.read(magic, 4);
    if (std::string(magic, 4) == "GGUF") return model_from_gguf(ref);
    return model_from_hf_config_file(ref);
  }
  return catalog_model(ref);
}

}  // namespace parallm::planner
