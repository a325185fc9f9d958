// Hugging Face checkpoints -> ModelFile: config.json (config/hf_config.h),
// one model.safetensors or the shards named by model.safetensors.index.json,
// every tensor mapped in place and renamed to the canonical GGUF names of
// model_file.h (q/k are not permuted: the config selects rotate-half RoPE).
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "config/hf_config.h"
#include "loader/model_file.h"
#include "loader/quantized_checkpoint.h"
#include "loader/safetensors_reader.h"
#include "util/check.h"
#include "util/json_parse.h"
#include "util/log.h"

namespace parallm {

namespace {

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool is_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
std::string parent_dir(const std::string& p) {
  size_t slash = p.find_last_of('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : p.substr(0, slash));
}

// Per-layer HF suffix -> canonical suffix.
constexpr std::pair<const char*, const char*> kLayerNames[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},  // Qwen3
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"mlp.gate.weight", "ffn_gate_inp.weight"},  // Qwen-MoE router
    {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
    {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
    {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
    {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
    {"self_attn.q_a_proj.weight", "attn_q_a.weight"},  // DeepSeek's latent attention
    {"self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight"},
    {"self_attn.q_b_proj.weight", "attn_q_b.weight"},
    {"self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight"},
    {"self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight"},
    {"self_attn.kv_b_proj.weight", "attn_kv_b.weight"},
    {"mlp.gate.e_score_correction_bias", "exp_probs_b.bias"},
    {"mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight"},
    {"mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight"},
    {"mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight"},
    {"self_attn.qkv_proj.weight", "attn_qkv.weight"},  // Phi-3: fused Q, K, V rows
    {"mlp.gate_up_proj.weight", "ffn_up.weight"},      // Phi-3: gate rows, then up rows (llama.cpp's name)
};

// Returns the canonical name, "" for tensors parallm does not use (rotary
// caches some exporters include), or throws for names it cannot place.
// Gemma's four norms per layer: the one after attention is not the FFN's
// pre-norm there.
constexpr std::pair<const char*, const char*> kGemmaNorms[] = {
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
};

bool is_gemma(const ModelConfig& c) { return c.arch == Architecture::kGemma2 || c.arch == Architecture::kGemma3; }

std::string canonical_name(const std::string& hf, const std::string& where, const ModelConfig& config) {
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  static const std::regex layer(R"(model\.layers\.(\d+)\.(.+))");
  static const std::regex expert(R"(block_sparse_moe\.experts\.(\d+)\.(w1|w2|w3)\.weight)");
  static const std::regex qwen_expert(R"(mlp\.experts\.(\d+)\.(gate|up|down)_proj\.weight)");
  std::smatch m;
  if (std::regex_match(hf, m, layer)) {
    // DeepSeek-V3's multi-token-prediction layers follow the last one: not
    // part of the causal model.
    const std::string index = m[1].str();
    if (config.arch == Architecture::kDeepseek2 && (index.size() > 9 || std::stoll(index) >= config.n_layer)) return "";
    const std::string blk = "blk." + m[1].str() + ".";
    const std::string rest = m[2].str();
    if (is_gemma(config)) {
      for (const auto& [from, to] : kGemmaNorms) {
        if (rest == from) return blk + to;
      }
    }
    for (const auto& [from, to] : kLayerNames) {
      if (rest == from) return blk + to;
    }
    std::smatch e;
    if (std::regex_match(rest, e, expert)) {
      const std::string w = e[2].str();
      const char* kind = w == "w1" ? "ffn_gate" : (w == "w3" ? "ffn_up" : "ffn_down");
      return blk + kind + "." + e[1].str() + ".weight";
    }
    if (std::regex_match(rest, e, qwen_expert)) return blk + "ffn_" + e[2].str() + "." + e[1].str() + ".weight";
    if (rest.find("rotary_emb") != std::string::npos) return "";
  }
  throw InputError(where + ": tensor '" + hf +
                   "' is not part of a Llama/Mistral/Mixtral/Qwen2/Qwen3/Qwen-MoE/Gemma/Phi-3/DeepSeek checkpoint");
}

// Gemma's RMSNorm multiplies by (1 + w) and its checkpoints store w; the
// kernels multiply by the stored vector, so the 1 is added once here (as
// llama.cpp's converter does when it writes a Gemma GGUF).
void add_one_to_gemma_norms(ModelFile* model) {
  std::vector<std::string> names;
  for (const auto& [name, t] : model->tensors()) {
    const std::string suffix = "norm.weight";
    if (t.shape.size() == 1 && name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      names.push_back(name);
    }
  }
  for (const std::string& name : names) {
    WeightTensor t = model->get(name);
    PARALLM_CHECK(t.dtype == DType::kF32);
    std::vector<uint8_t> bytes(t.nbytes);
    std::memcpy(bytes.data(), t.data, t.nbytes);
    float* w = reinterpret_cast<float*>(bytes.data());
    for (int64_t i = 0; i < t.shape[0]; ++i) w[i] += 1.0f;
    t.data = model->own_buffer(std::move(bytes));
    model->add_tensor(std::move(t));
  }
}

bool all_zero(const SafetensorsTensor& t) {
  for (size_t i = 0; i < t.nbytes; ++i) {
    // -0.0 is zero too: only its sign bit is set (the top bit of the last byte of an element).
    const size_t elem = t.st_dtype == "F32" ? 4 : 2;
    const uint8_t b = t.data[i];
    if (b != 0 && !(i % elem == elem - 1 && b == 0x80)) return false;
  }
  return true;
}

// The shard files of a checkpoint directory.
std::vector<std::string> shard_files(const std::string& dir) {
  const std::string single = dir + "/model.safetensors";
  const std::string index = dir + "/model.safetensors.index.json";
  if (is_file(single)) return {single};
  if (!is_file(index)) {
    throw InputError("'" + dir + "' has neither model.safetensors nor model.safetensors.index.json");
  }
  JsonError error;
  const std::optional<nlohmann::json> parsed =
      try_parse_json<nlohmann::json>(read_text_file(index), JsonLimits{kFileJsonDepth}, &error);
  if (!parsed) throw InputError("'" + index + "' is not a safetensors index (" + error.message + ")");
  const nlohmann::json& j = *parsed;
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
    throw InputError("'" + index + "' is not a safetensors index (no weight_map object)");
  }
  std::set<std::string> files;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string()) throw InputError("'" + index + "': weight_map entry '" + name + "' is not a file name");
    std::string f = file.get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..") {
      throw InputError("'" + index + "': shard name '" + f + "' must be a plain file name in the same folder");
    }
    files.insert(f);
  }
  if (files.empty()) throw InputError("'" + index + "' names no shards");
  std::vector<std::string> out;
  for (const auto& f : files) out.push_back(dir + "/" + f);
  return out;
}

}  // namespace

std::unique_ptr<ModelFile> load_safetensors_model(const std::string& dir_or_file, std::optional<DType> quantized_as) {
  std::string dir = dir_or_file;
  std::vector<std::string> shards;
  if (is_dir(dir_or_file)) {
    shards = shard_files(dir);
  } else if (dir_or_file.size() > 12 && dir_or_file.compare(dir_or_file.size() - 12, 12, ".safetensors") == 0) {
    dir = parent_dir(dir_or_file);
    shards = {dir_or_file};
  } else {  // a config.json path
    dir = parent_dir(dir_or_file);
    shards = shard_files(dir);
  }
  const std::string config_path = dir + "/config.json";
  if (!is_file(config_path)) throw InputError("'" + dir + "' has no config.json (a Hugging Face checkpoint needs one)");

  auto model = std::make_unique<ModelFile>();
  model->path = dir;
  model->format = "safetensors";
  model->hf_dir = dir;
  model->config = parse_hf_config(read_text_file(config_path), config_path);

  const QuantScheme scheme = parse_quant_scheme(read_text_file(config_path), config_path);
  bool has_lm_head = false;
  auto add = [&](WeightTensor w, const std::string& hf_name) {
    if (w.name == "output.weight") {
      has_lm_head = true;
      if (model->config.tied_embeddings) return;  // tied: the classifier is token_embd
    }
    if (model->find(w.name) != nullptr) throw InputError("model '" + dir + "': tensor '" + hf_name + "' appears twice");
    model->add_tensor(std::move(w));
  };
  // Quantized modules' pieces, gathered over every shard, then converted.
  std::map<std::string, QuantParts> quantized;
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  for (const auto& shard : shards) {
    files.push_back(std::make_unique<SafetensorsFile>(shard));
    SafetensorsFile& f = *files.back();
    for (const auto& t : f.tensors()) {
      const size_t dot = t.name.rfind('.');
      const std::string base = dot == std::string::npos ? t.name : t.name.substr(0, dot);
      const std::string suffix = dot == std::string::npos ? "" : t.name.substr(dot + 1);
      if (scheme.is_part(suffix) ||
          (scheme.method == QuantMethod::kFp8 && suffix == "weight" && t.st_dtype == "F8_E4M3")) {
        quantized[base][suffix] = &t;
        continue;
      }
      if (!t.is_float) {
        throw InputError("model '" + dir + "': tensor '" + t.name + "' has dtype " + t.st_dtype +
                         (scheme.method == QuantMethod::kNone
                              ? ", and config.json has no quantization_config that would use it"
                              : ", which " + scheme.name + " checkpoints do not store there"));
      }
      std::string name;
      try {
        name = canonical_name(t.name, shard, model->config);
      } catch (const InputError&) {
        // GPTQ exports carry a bias for every linear layer, zeros where the
        // architecture has none: those are dropped, any other is an error.
        if (scheme.method == QuantMethod::kNone || suffix != "bias" || !all_zero(t)) throw;
        continue;
      }
      if (name.empty()) continue;
      WeightTensor w;
      w.name = name;
      w.dtype = t.dtype;
      w.shape = t.shape;
      // Qwen2-MoE's shared-expert gate is a [1, n_embd] matrix in HF, a
      // vector in GGUF: one dot product per token either way.
      if (name.find("ffn_gate_inp_shexp") != std::string::npos && w.shape.size() == 2 && w.shape[0] == 1) {
        w.shape = {w.shape[1]};
      }
      w.data = t.data;
      w.nbytes = t.nbytes;
      add(std::move(w), t.name);
    }
    model->keep_mapping(f.take_mapping());
  }
  for (const auto& [base, parts] : quantized) {
    const bool only_unused = std::all_of(parts.begin(), parts.end(), [](const auto& p) {
      return p.first == "input_scale" || p.first == "weight_shape";
    });
    if (only_unused) continue;  // e.g. the input scale of a layer kept in bf16
    const std::string name = canonical_name(base + ".weight", dir, model->config);
    if (name.empty()) continue;
    add(dequantize_module(scheme, parts, name, quantized_as, model.get()), base);
  }
  if (!model->config.tied_embeddings && !has_lm_head) {
    throw InputError("model '" + dir + "' lacks lm_head.weight and config.json does not set tie_word_embeddings");
  }
  // NOTE: 1-D tensors (norms, biases) must be f32 for the kernels; HF stores
  // them in the checkpoint dtype, so convert those few small ones here.
  for (const auto& [name, t] : model->tensors()) {
    if (t.shape.size() != 1 || t.dtype == DType::kF32) continue;
    const int64_t n = t.shape[0];
    std::vector<uint8_t> bytes(static_cast<size_t>(n) * sizeof(float));
    float* out = reinterpret_cast<float*>(bytes.data());
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      out[i] = t.dtype == DType::kF16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
    }
    WeightTensor c = t;
    c.dtype = DType::kF32;
    c.nbytes = bytes.size();
    c.data = model->own_buffer(std::move(bytes));
    model->add_tensor(std::move(c));
  }
  if (is_gemma(model->config)) add_one_to_gemma_norms(model.get());
  model->validate();
  log_debug("loaded Hugging Face checkpoint " + dir + " (" + std::to_string(shards.size()) + " shard(s))");
  return model;
}

}  // namespace parallm
