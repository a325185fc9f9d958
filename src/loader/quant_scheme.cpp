// quantization_config of a Hugging Face config.json (see quant_scheme.h).
#include "loader/quant_scheme.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "util/check.h"
#include "util/json_parse.h"

namespace parallm {

namespace {
using nlohmann::json;
constexpr const char* kSupportedMethods = "fp8, fbgemm_fp8, gptq, awq, compressed-tensors (pack-quantized int4)";
}  // namespace

bool QuantScheme::is_part(const std::string& suffix) const {
  switch (method) {
    case QuantMethod::kFp8:
      return suffix == "weight_scale" || suffix == "weight_scale_inv" || suffix == "input_scale";
    case QuantMethod::kGptq:
    case QuantMethod::kAwq:
      return suffix == "qweight" || suffix == "qzeros" || suffix == "scales" || suffix == "g_idx";
    case QuantMethod::kCompressedInt4:
      return suffix == "weight_packed" || suffix == "weight_scale" || suffix == "weight_shape";
    case QuantMethod::kNone:
      return false;
  }
  return false;
}

QuantScheme parse_quant_scheme(const std::string& config_json, const std::string& source) {
  QuantScheme s;
  JsonError error;
  const std::optional<json> parsed = try_parse_json<json>(config_json, JsonLimits{kFileJsonDepth}, &error);
  if (!parsed || !parsed->is_object()) return s;  // parse_hf_config reports it
  auto qc_it = parsed->find("quantization_config");
  if (qc_it == parsed->end() || qc_it->is_null()) return s;
  const json& qc = *qc_it;
  auto fail = [&](const std::string& what) -> void { throw InputError(source + ": quantization_config " + what); };
  if (!qc.is_object()) fail("is not an object");
  auto str = [&](const json& o, const char* key, const std::string& fallback) {
    auto it = o.find(key);
    if (it == o.end() || it->is_null()) return fallback;
    if (!it->is_string()) fail(std::string("field '") + key + "' is not a string");
    return it->get<std::string>();
  };
  auto num = [&](const json& o, const char* key, int64_t fallback) {
    auto it = o.find(key);
    if (it == o.end() || it->is_null()) return fallback;
    if (!it->is_number_integer()) fail(std::string("field '") + key + "' is not an integer");
    return it->get<int64_t>();
  };
  auto flag = [&](const json& o, const char* key, bool fallback) {
    auto it = o.find(key);
    if (it == o.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) fail(std::string("field '") + key + "' is not a boolean");
    return it->get<bool>();
  };
  s.name = str(qc, "quant_method", "");
  if (s.name.empty()) fail("has no quant_method");
  if (s.name == "fp8" || s.name == "fbgemm_fp8") {
    s.method = QuantMethod::kFp8;
    const std::string fmt = str(qc, "fmt", "e4m3");
    if (fmt != "e4m3") fail("fmt '" + fmt + "' is not supported (e4m3)");
    if (auto b = qc.find("weight_block_size"); b != qc.end() && !b->is_null()) {
      if (!b->is_array() || b->size() != 2 || !(*b)[0].is_number_integer() || !(*b)[1].is_number_integer() ||
          (*b)[0].get<int64_t>() <= 0 || (*b)[1].get<int64_t>() <= 0) {
        fail("weight_block_size is not two positive integers");
      }
      s.fp8_block = {(*b)[0].get<int64_t>(), (*b)[1].get<int64_t>()};
    }
    return s;
  }
  if (s.name == "gptq" || s.name == "awq") {
    s.method = s.name == "gptq" ? QuantMethod::kGptq : QuantMethod::kAwq;
    const int64_t bits = num(qc, s.name == "gptq" ? "bits" : "bits", 4);
    const int64_t w_bit = num(qc, "w_bit", bits);
    if (bits != 4 || w_bit != 4) fail(std::to_string(bits) + "-bit weights are not supported (4 bits)");
    s.group_size = num(qc, "group_size", num(qc, "q_group_size", 128));
    if (s.group_size == 0 || s.group_size < -1) fail("group_size " + std::to_string(s.group_size) + " is not valid");
    if (s.group_size == -1) s.group_size = 0;  // one group per output channel
    if (s.method == QuantMethod::kGptq) {
      const std::string format = str(qc, "checkpoint_format", "gptq");
      if (format != "gptq" && format != "gptq_v2") fail("checkpoint_format '" + format + "' is not supported");
      s.gptq_zero_plus_one = format == "gptq";
      s.has_zeros = !flag(qc, "sym", true);
      (void)flag(qc, "desc_act", false);  // g_idx, when present, says the order
    } else {
      const std::string version = str(qc, "version", "gemm");
      if (version != "gemm") fail("AWQ version '" + version + "' is not supported (gemm)");
      s.has_zeros = flag(qc, "zero_point", true);
      if (!s.has_zeros) fail("AWQ without zero points is not supported");
    }
    return s;
  }
  if (s.name == "compressed-tensors") {
    s.method = QuantMethod::kCompressedInt4;
    const std::string format = str(qc, "format", "");
    if (format != "pack-quantized") fail("format '" + format + "' is not supported (pack-quantized int4)");
    auto groups = qc.find("config_groups");
    if (groups == qc.end() || !groups->is_object() || groups->size() != 1)
      fail("needs exactly one config_groups entry");
    const json& g = groups->begin().value();
    auto w = g.find("weights");
    if (!g.is_object() || w == g.end() || !w->is_object()) fail("config group has no weights scheme");
    if (num(*w, "num_bits", 0) != 4 || str(*w, "type", "int") != "int") fail("supports 4-bit int weights only");
    if (!flag(*w, "symmetric", true)) fail("asymmetric pack-quantized weights are not supported");
    const std::string strategy = str(*w, "strategy", "group");
    if (strategy == "group") {
      s.group_size = num(*w, "group_size", 128);
      if (s.group_size <= 0) fail("group_size must be positive");
    } else if (strategy == "channel") {
      s.group_size = 0;
    } else {
      fail("strategy '" + strategy + "' is not supported (group, channel)");
    }
    return s;
  }
  fail("quant_method '" + s.name + "' is not supported (supported: " + kSupportedMethods + ")");
  return s;
}

}  // namespace parallm
