// ModelFile: one loaded checkpoint in parallm's canonical form, whatever the
// format on disk: a frozen ModelConfig plus weight tensors under llama.cpp's
// GGUF tensor names, each pointing into a memory mapping (or, when a format
// needs a conversion, into a buffer the ModelFile owns).
//
// Canonical names (row-major shapes, outermost first; matrices are [n_out, n_in]):
//   token_embd.weight            [n_vocab, n_embd]
//   output_norm.weight           [n_embd]
//   output.weight                [n_vocab, n_embd]   (absent when tied to token_embd)
//   blk.N.attn_norm.weight       [n_embd]
//   blk.N.attn_q.weight          [n_head * head_dim, n_embd]      (+ .bias [n_head * head_dim] for Qwen2)
//   blk.N.attn_k.weight          [n_kv_head * head_dim, n_embd]   (+ .bias)
//   blk.N.attn_v.weight          [n_kv_head * head_dim, n_embd]   (+ .bias)
//   blk.N.attn_output.weight     [n_embd, n_head * head_dim]
//   blk.N.ffn_norm.weight        [n_embd]
//   dense:  blk.N.ffn_gate.weight, blk.N.ffn_up.weight [n_ff, n_embd]; blk.N.ffn_down.weight [n_embd, n_ff]
//   MoE:    blk.N.ffn_gate_inp.weight [n_expert, n_embd];
//           blk.N.ffn_gate_exps.weight, blk.N.ffn_up_exps.weight [n_expert, n_ff, n_embd];
//           blk.N.ffn_down_exps.weight [n_expert, n_embd, n_ff]
//           (older GGUF files store experts one by one as blk.N.ffn_gate.E.weight: the GGUF loader
//            accepts both; use expert_matrix() to read either)
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "core/dtype.h"
#include "loader/gguf_reader.h"
#include "util/mapped_file.h"
#include "util/zeroed_memory.h"

namespace parallm {

struct WeightTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // row-major, outermost first
  const uint8_t* data = nullptr;
  size_t nbytes = 0;

  int64_t rows() const;  // product of all but the last dimension
  int64_t cols() const { return shape.empty() ? 0 : shape.back(); }
  size_t row_bytes() const { return dtype_row_bytes(dtype, cols()); }
};

class ModelFile {
 public:
  ModelConfig config;
  std::string format;  // "gguf", "safetensors", "llama2c"
  std::string path;

  // Throws InputError naming the tensor and the file when it is missing.
  const WeightTensor& get(const std::string& name) const;
  const WeightTensor* find(const std::string& name) const;
  const std::map<std::string, WeightTensor>& tensors() const { return tensors_; }

  // Data pointer and row stride of expert `e`'s matrix `kind` ("gate", "up", "down") in layer `layer`,
  // from a merged [n_expert, rows, cols] tensor or a per-expert one.
  struct ExpertMatrix {
    const uint8_t* data;
    DType dtype;
    int64_t rows, cols;
  };
  ExpertMatrix expert_matrix(int64_t layer, const std::string& kind, int64_t e) const;

  // The GGUF metadata when the model came from GGUF (tokenizer, chat template).
  const GgufFile* gguf() const { return gguf_.get(); }
  // Directory of a Hugging Face checkpoint (tokenizer.json lives there), else "".
  std::string hf_dir;
  // bench-model --synthetic: the tensors' bytes are untouched zero pages; a
  // device model fills its weights on the device instead of reading them
  // (modelgen/synthetic_model.h), a CPU rank refuses the file.
  bool synthetic = false;

  // Total bytes of all weights, and of all but the token embedding table
  // (what a decode step streams: the roofline denominator).
  size_t weight_bytes() const;
  size_t streamed_weight_bytes() const;

  // --- used by the format readers ---
  void add_tensor(WeightTensor t);
  void keep_mapping(std::unique_ptr<MappedFile> m) { maps_.push_back(std::move(m)); }
  const uint8_t* own_buffer(std::vector<uint8_t> bytes);  // returns the buffer's stable data pointer
  void set_gguf(std::unique_ptr<GgufFile> g) { gguf_ = std::move(g); }
  void keep_memory(ZeroedMemory m) { memory_.push_back(std::move(m)); }
  // Checks that every tensor the architecture needs is present with the
  // expected shape; throws InputError naming the first problem.
  void validate() const;

 private:
  std::map<std::string, WeightTensor> tensors_;
  std::vector<std::unique_ptr<MappedFile>> maps_;
  std::vector<std::vector<uint8_t>> buffers_;
  std::unique_ptr<GgufFile> gguf_;
  std::vector<ZeroedMemory> memory_;
};

// Opens a model by sniffing the path: a directory (Hugging Face config.json +
// safetensors), a GGUF file, or a llama2.c checkpoint. ctx_size > 0 overrides
// the context length in the metadata.
// quantized_as: the dtype a quantized HF checkpoint's layers are converted
// to at load (--dtype); nullopt = the format's fastest (loader/quantized_checkpoint.h).
std::unique_ptr<ModelFile> open_model(const std::string& path, std::optional<DType> quantized_as = std::nullopt);

// Per-format readers (each in its own file).
std::unique_ptr<ModelFile> load_gguf_model(const std::string& path);
// The same over a parsed GGUF (from memory); `name` stands for the path.
std::unique_ptr<ModelFile> load_gguf_model(std::unique_ptr<GgufFile> gguf, const std::string& name);
std::unique_ptr<ModelFile> load_safetensors_model(const std::string& dir_or_file,  // safetensors_model.cpp
                                                  std::optional<DType> quantized_as = std::nullopt);
std::unique_ptr<ModelFile> load_llama2c_model(const std::string& path);  // llama2c_model.cpp

}  // namespace parallm
