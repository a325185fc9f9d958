// llama.cpp's mixed file types (`llama-quantize ... Q4_K_M`): one base type
// for most matrices and more bits for the ones quantization hurts most, so
// `make-model --dtype q4_k_m` writes files shaped like the downloaded ones.
//
// The rules are those of llama.cpp's quantizer (src/llama-quant.cpp,
// llama_tensor_get_type_impl and its use_more_bits helper, and
// tensor_type_fallback), as read at ggml-org/llama.cpp commit
// 007dbbf3fd17eefe9b47fee45f48f7ba5e62b714 (after PR #19770 and #20357,
// 2026-03), restated in quant_mix.cpp as a table; the tests restate them
// once more, independently.
//
// Roles, by llama.cpp's name matching: output.weight; token_embd.weight
// (which takes output's rule when the file has no output.weight, as in tied
// models); attn_v (with attn_qkv and attn_kv_b, which llama.cpp treats as
// attn_v since #19770); attn_k; attn_q; attn_output; ffn_down (also
// ffn_down_exps and ffn_down_shexp); ffn_gate / ffn_up (and their _exps /
// _shexp); every other matrix (MLA's attn_q_a, attn_q_b, attn_kv_a_mqa,
// attn_k_b, attn_v_b) keeps the base type, as in llama.cpp.
#pragma once
#include <cstdint>
#include <string>

#include "config/model_config.h"
#include "core/dtype.h"

namespace parallm {

// kNone: every matrix takes the plain dtype (the mix is not used).
enum class QuantMix { kNone, kQ2_K, kQ2_K_S, kQ3_K_S, kQ3_K_M, kQ3_K_L, kQ4_K_S, kQ4_K_M, kQ5_K_S, kQ5_K_M };

// make-model's name of a mix: llama.cpp's in lower case ("q4_k_m"), except
// the Q2_K file type, "q2_k_mix": plain "q2_k" is every matrix q2_k.
const char* quant_mix_name(QuantMix m);
// True and *out for a mix name (case-insensitive); false otherwise.
bool parse_quant_mix(const std::string& name, QuantMix* out);
// "q2_k_mix, q2_k_s, ..., q5_k_m", for help and messages.
std::string quant_mix_names_list();
// llama.cpp's LLAMA_FTYPE_MOSTLY_* value (general.file_type).
uint32_t quant_mix_file_type(QuantMix m);
// The type most matrices get (Q4_K for Q4_K_M and Q4_K_S, ...).
DType quant_mix_base_type(QuantMix m);

// The type the mix gives the matrix `name` whose rows (ggml's ne[0]) hold
// row_len values, in a model of description c (layer count, experts, GQA
// ratio) that has an output.weight unless c.tied_embeddings. Includes
// llama.cpp's fallback for rows that are not a whole number of the chosen
// type's blocks: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K / Q3_K ->
// Q4_0, then F16 if the fallback does not fit either.
DType quant_mix_tensor_type(QuantMix m, const ModelConfig& c, const std::string& name, int64_t row_len);

}  // namespace parallm
