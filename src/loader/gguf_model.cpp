// GGUF checkpoint -> ModelFile. Tensor names in GGUF already are parallm's
// canonical names; shapes are reversed (GGUF lists the innermost dimension
// first). Hyper-parameters come from the "<arch>.*" metadata keys.
#include <algorithm>
#include <optional>

#include "loader/model_file.h"
#include "util/check.h"

namespace parallm {

namespace {

void read_config(const GgufFile& g, ModelConfig* c) {
  std::string arch = g.get_string("general.architecture");
  c->arch = parse_architecture(arch);
  apply_architecture_defaults(c);
  c->arch_name = arch;  // the prefix of its metadata keys
  const std::string p = arch + ".";
  c->n_embd = g.get_int(p + "embedding_length");
  c->n_layer = g.get_int(p + "block_count");
  c->n_head = g.get_int(p + "attention.head_count");
  c->n_kv_head = g.get_int_opt(p + "attention.head_count_kv").value_or(c->n_head);
  c->head_dim = g.get_int_opt(p + "attention.key_length").value_or(0);
  if (auto v = g.get_int_opt(p + "attention.value_length"); v && c->head_dim != 0 && *v != c->head_dim) {
    throw InputError("GGUF '" + g.path() + "': value heads of " + std::to_string(*v) + " differ from key heads of " +
                     std::to_string(c->head_dim) + " (not supported)");
  }
  c->n_ctx_train = g.get_int_opt(p + "context_length").value_or(2048);
  c->rms_eps = static_cast<float>(g.get_float_opt(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  c->rope_theta = static_cast<float>(g.get_float_opt(p + "rope.freq_base").value_or(10000.0));
  c->n_expert = g.get_int_opt(p + "expert_count").value_or(0);
  c->n_expert_used = g.get_int_opt(p + "expert_used_count").value_or(0);
  // MoE files name the experts' width apart from the dense one (which a
  // Qwen-MoE file still writes, unused when every layer is sparse).
  const std::optional<int64_t> expert_ff = g.get_int_opt(p + "expert_feed_forward_length");
  c->n_ff = c->n_expert > 0 && expert_ff ? *expert_ff : g.get_int(p + "feed_forward_length");
  c->n_ff_shared = g.get_int_opt(p + "expert_shared_feed_forward_length").value_or(0);
  if (c->arch == Architecture::kQwen2Moe && c->n_ff_shared == 0) {
    throw InputError("GGUF '" + g.path() + "': qwen2moe lacks " + p + "expert_shared_feed_forward_length");
  }
  if (auto norm = g.get_bool_opt(p + "expert_weights_norm")) c->norm_topk_prob = *norm;
  if (auto every = g.get_int_opt(p + "leading_dense_block_count"); every && *every != 0) {
    throw InputError("GGUF '" + g.path() + "': leading dense layers in a MoE model are not supported yet");
  }
  if (auto type = g.get_string_opt(p + "rope.scaling.type")) {
    if (*type == "linear") {
      c->rope_scaling = RopeScaling::kLinear;
    } else if (*type == "llama3") {
      c->rope_scaling = RopeScaling::kLlama3;
    } else if (*type != "none") {
      throw InputError("GGUF '" + g.path() + "': unsupported rope scaling type '" + *type +
                       "' (supported: none, linear, llama3)");
    }
    c->rope_factor = static_cast<float>(g.get_float_opt(p + "rope.scaling.factor").value_or(1.0));
    c->rope_original_ctx = g.get_int_opt(p + "rope.scaling.original_context_length").value_or(8192);
    c->rope_low_freq_factor = static_cast<float>(g.get_float_opt(p + "rope.scaling.low_freq_factor").value_or(1.0));
    c->rope_high_freq_factor = static_cast<float>(g.get_float_opt(p + "rope.scaling.high_freq_factor").value_or(4.0));
  }
}

}  // namespace

std::unique_ptr<ModelFile> load_gguf_model(const std::string& path) {
  auto gguf = std::make_unique<GgufFile>(path);
  auto model = std::make_unique<ModelFile>();
  model->path = path;
  model->format = "gguf";
  read_config(*gguf, &model->config);

  for (const auto& info : gguf->tensors()) {
    DType dt;
    if (!dtype_from_ggml(info.ggml_type, &dt)) {
      const std::string id = std::to_string(info.ggml_type);
      const std::string name = ggml_type_gguf_name(info.ggml_type);
      const std::string what = name == "type " + id ? "ggml type " + id + ", which no ggml release defines and"
                                                    : "type " + name + " (ggml type " + id + "), which";
      throw InputError("model '" + path + "': tensor '" + info.name + "' has " + what +
                       " parallm does not support (supported: " + dtype_names_list() + ")");
    }
    WeightTensor t;
    t.name = info.name;
    t.dtype = dt;
    t.shape.assign(info.ne.rbegin(), info.ne.rend());
    t.data = gguf->tensor_data(info);
    t.nbytes = info.nbytes;
    model->add_tensor(std::move(t));
  }
  const WeightTensor& embd = model->get("token_embd.weight");
  if (embd.shape.size() != 2) throw InputError("model '" + path + "': token_embd.weight is not a matrix");
  model->config.n_vocab = gguf->get_int_opt(model->config.arch_name + ".vocab_size").value_or(embd.shape[0]);
  model->config.tied_embeddings = model->find("output.weight") == nullptr;
  model->config.finalize();
  if (const WeightTensor* f = model->find("rope_freqs.weight")) {
    // Llama 3.1 checkpoints converted by llama.cpp carry the per-frequency
    // divisors of llama3 rope scaling as a tensor instead of metadata.
    if (f->dtype != DType::kF32 || f->shape.size() != 1 || f->shape[0] != model->config.head_dim / 2) {
      throw InputError("model '" + path + "': rope_freqs.weight has an unexpected shape or type");
    }
  }
  model->set_gguf(std::move(gguf));
  model->validate();
  return model;
}

}  // namespace parallm
