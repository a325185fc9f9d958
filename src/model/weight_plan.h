// WeightPlan: which piece of which tensor each of a rank's weights is, decided
// once from the model's description and the rank's shard (model/shard.h), and
// materialised by each backend its own way: the CPU model converts, packs or
// maps them in place (WeightStore), the device model uploads them
// (model/device_llama_model.h). Plain data pointing into the ModelFile; every
// slicing decision of tensor, pipeline and expert parallelism lives here.
//   column-parallel piece: rows [row_begin, row_end) of W [n_out, n_in], all columns
//   row-parallel piece:    all rows, columns [col_begin, col_end)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "core/dtype.h"
#include "loader/model_file.h"
#include "model/shard.h"

namespace parallm {

// A [row_end - row_begin, col_end - col_begin] piece of a 2-D matrix stored
// at `data`, `full_row_bytes` bytes per full row.
struct MatrixPiece {
  const uint8_t* data = nullptr;  // null: the model has no such matrix
  DType dtype = DType::kF32;
  size_t full_row_bytes = 0;
  int64_t row_begin = 0, row_end = 0;
  int64_t col_begin = 0, col_end = 0;
  std::string what;                    // tensor name (and expert) for messages
  const WeightTensor* bias = nullptr;  // [full n_out] f32; this piece's rows [row_begin, row_end) apply
  bool present() const { return data != nullptr; }
  int64_t n_out() const { return row_end - row_begin; }
  int64_t n_in() const { return col_end - col_begin; }
};

// A run of a 1-D f32 tensor: [begin, begin + length) (norm weights, gates).
struct VectorPiece {
  const WeightTensor* tensor = nullptr;  // null: absent
  int64_t begin = 0;
  bool present() const { return tensor != nullptr; }
  const float* data() const { return reinterpret_cast<const float*>(tensor->data) + begin; }
};

struct LayerPlan {
  int64_t layer = 0;  // global layer index
  VectorPiece attn_norm;
  bool mla = false;            // DeepSeek's latent attention: model/mla.h loads it (no wq / wk / wv)
  MatrixPiece wq, wk, wv, wo;  // column-parallel q / k / v (with their biases), row-parallel o
  VectorPiece q_norm, k_norm;  // Qwen3
  VectorPiece ffn_norm;
  VectorPiece post_attn_norm, post_ffn_norm;  // Gemma
  bool moe_layer = false;
  MatrixPiece w_gate, w_up, w_down;                              // dense FFN (non-MoE layers)
  MatrixPiece router;                                            // MoE: [n_expert, n_embd], whole
  VectorPiece router_bias;                                       // DeepSeek-V3's choice bias
  int64_t expert_begin = 0;                                      // global id of expert_gate[0]
  std::vector<MatrixPiece> expert_gate, expert_up, expert_down;  // per owned expert
  VectorPiece shared_gate_inp;                                   // Qwen2-MoE's shared-expert gate
  MatrixPiece shared_gate, shared_up, shared_down;               // shared experts (MoE layers)
};

struct WeightPlan {
  std::vector<LayerPlan> layers;             // [n_local_layers]
  const WeightTensor* token_embd = nullptr;  // first stage: [n_vocab, n_embd], read row by row
  VectorPiece output_norm;                   // last stage
  MatrixPiece output;                        // last stage: [n_vocab, n_embd] (the embedding when tied)
};

// The plan of the rank with this shard (shape = local_shape(file.config, shard)).
// Throws InputError naming a tensor the file lacks.
WeightPlan plan_weights(const ModelFile& file, const LocalShape& shape, const ShardSpec& shard);

}  // namespace parallm
