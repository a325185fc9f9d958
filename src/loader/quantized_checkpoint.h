// Quantized Hugging Face checkpoints: config.json's quantization_config and
// the tensors each quantized linear layer is stored as, turned at load into
// one matrix [out, in] in a dtype the kernels run.
//
// Layouts (module M, e.g. model.layers.0.self_attn.q_proj; W is [out, in]):
//   fp8 / fbgemm_fp8: M.weight F8_E4M3 [out, in] and either M.weight_scale
//       (per tensor: [] or [1]; per channel: [out] or [out, 1]) or
//       M.weight_scale_inv [ceil(out/B0), ceil(in/B1)] per B0 x B1 block
//       (DeepSeek-V3's weight_block_size). W = q * scale either way.
//       M.input_scale (static activation scales) is not used: activations
//       stay f32.
//   gptq (4 bits): M.qweight I32 [in/8, out], eight inputs per word, lowest
//       nibble first; M.qzeros I32 [groups, out/8], eight outputs per word;
//       M.scales F16 [groups, out]; optional M.g_idx I32 [in] (desc_act: the
//       group of each input, else in / group_size). W[o][i] = (q - z') * s
//       with z' = z + 1 for checkpoint_format "gptq" (AutoGPTQ stores z - 1),
//       z for "gptq_v2".
//   awq (4 bits, version gemm): M.qweight I32 [in, out/8] and M.qzeros I32
//       [groups, out/8], eight outputs per word in AWQ's order (nibble k
//       holds output 8w + {0, 2, 4, 6, 1, 3, 5, 7}[k]); M.scales F16
//       [groups, out]; W[o][i] = (q - z) * s.
//   compressed-tensors, format pack-quantized (4 bits, symmetric):
//       M.weight_packed I32 [out, in/8], eight inputs per word, lowest nibble
//       first, each stored as value + 8; M.weight_scale [out, in/group]
//       (F16/BF16/F32); M.weight_shape [2]. W = (q - 8) * s.
//
// The matrix is written in `target` when the user asked for one (--dtype),
// else in the engine's fastest layout for the format: q4_0 for symmetric
// int4 (exact: ggml's q4_0 is (q - 8) * d), q4_1 for int4 with zero points
// (d = s exact, m = -z s rounded to f16), q8_0 for fp8 and for int4 whose
// groups desc_act scatters (re-quantized per 32 values: docs/models.md gives
// the measured loss).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "loader/model_file.h"
#include "loader/quant_scheme.h"
#include "loader/safetensors_reader.h"

namespace parallm {

// The stored pieces of one quantized module, by suffix ("weight", "qweight", ...).
using QuantParts = std::map<std::string, const SafetensorsTensor*>;

// The module's matrix [out, in] as a WeightTensor named `name` whose data
// lives in a buffer of `model`. Throws InputError on shapes or dtypes that
// contradict the layout.
WeightTensor dequantize_module(const QuantScheme& scheme, const QuantParts& parts, const std::string& name,
                               std::optional<DType> target, ModelFile* model);

}  // namespace parallm
