// llama2.c checkpoint (.bin) -> ModelFile. Format (run.c): seven int32
// (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len), then
// f32 arrays grouped by kind across layers: token embedding, attention norms,
// wq, wk, wv, wo, FFN norms, w1 (gate), w2 (down), w3 (up), final norm, two
// legacy RoPE tables, and the classifier when vocab_size is negative
// (a positive vocab_size means the classifier is the embedding table).
// Weights are used in place from the mapping; per-layer tensors are views.
#include <cstring>

#include "loader/model_file.h"
#include "util/check.h"

namespace parallm {

std::unique_ptr<ModelFile> load_llama2c_model(const std::string& path) {
  auto file = std::make_unique<MappedFile>(path);
  if (file->size() < 28) throw InputError("'" + path + "' is too small to be a llama2.c checkpoint");
  int32_t h[7];
  std::memcpy(h, file->data(), sizeof(h));
  auto model = std::make_unique<ModelFile>();
  model->path = path;
  model->format = "llama2c";
  ModelConfig& c = model->config;
  c.arch = Architecture::kLlama;
  c.arch_name = "llama";
  c.n_embd = h[0];
  c.n_ff = h[1];
  c.n_layer = h[2];
  c.n_head = h[3];
  c.n_kv_head = h[4];
  c.tied_embeddings = h[5] > 0;
  c.n_vocab = h[5] > 0 ? h[5] : -static_cast<int64_t>(h[5]);
  c.n_ctx_train = h[6];
  c.rope_style = RopeStyle::kInterleaved;
  c.rms_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  if (h[0] <= 0 || h[1] <= 0 || h[2] <= 0 || h[3] <= 0 || h[4] <= 0 || h[5] == 0 || h[6] <= 0) {
    throw InputError("'" + path + "' is not a llama2.c checkpoint (bad header; GGUF files start with 'GGUF')");
  }
  c.finalize();

  const int64_t dim = c.n_embd, hd = c.head_dim, L = c.n_layer;
  const int64_t q_dim = c.n_head * hd, kv_dim = c.n_kv_head * hd;
  size_t offset = 28;
  const uint8_t* base = file->data();
  const size_t size = file->size();
  // Reserves `count` floats at the current offset, checking the file holds them.
  auto take = [&](int64_t count) {
    size_t bytes = static_cast<size_t>(count) * 4;
    if (count < 0 || offset > size || bytes > size - offset) {
      throw InputError("llama2.c checkpoint '" + path +
                       "' is truncated (header promises more weights than the file holds)");
    }
    const uint8_t* p = base + offset;
    offset += bytes;
    return p;
  };
  auto add = [&](const std::string& name, const uint8_t* data, std::vector<int64_t> shape) {
    WeightTensor t;
    t.name = name;
    t.dtype = DType::kF32;
    t.shape = std::move(shape);
    t.data = data;
    t.nbytes = static_cast<size_t>(t.rows() * t.cols()) * 4;
    model->add_tensor(std::move(t));
  };
  // Adds one view per layer of an array stacked over layers.
  auto add_layers = [&](const std::string& suffix, std::vector<int64_t> shape) {
    int64_t per = 1;
    for (auto d : shape) per *= d;
    const uint8_t* p = take(per * L);
    for (int64_t l = 0; l < L; ++l) {
      add("blk." + std::to_string(l) + "." + suffix, p + static_cast<size_t>(l * per) * 4, shape);
    }
  };
  add("token_embd.weight", take(c.n_vocab * dim), {c.n_vocab, dim});
  add_layers("attn_norm.weight", {dim});
  add_layers("attn_q.weight", {q_dim, dim});
  add_layers("attn_k.weight", {kv_dim, dim});
  add_layers("attn_v.weight", {kv_dim, dim});
  add_layers("attn_output.weight", {dim, q_dim});
  add_layers("ffn_norm.weight", {dim});
  add_layers("ffn_gate.weight", {c.n_ff, dim});
  add_layers("ffn_down.weight", {dim, c.n_ff});
  add_layers("ffn_up.weight", {c.n_ff, dim});
  add("output_norm.weight", take(dim), {dim});
  take(c.n_ctx_train * hd / 2);  // legacy freq_cis_real
  take(c.n_ctx_train * hd / 2);  // legacy freq_cis_imag
  if (!c.tied_embeddings) add("output.weight", take(c.n_vocab * dim), {c.n_vocab, dim});
  model->keep_mapping(std::move(file));
  model->validate();
  return model;
}

}  // namespace parallm
