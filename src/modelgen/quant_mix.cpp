// llama.cpp's mixed file types as a rule table (see quant_mix.h for the
// source and the roles).
#include "modelgen/quant_mix.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace parallm {

namespace {

struct MixInfo {
  QuantMix mix;
  const char* name;
  uint32_t file_type;  // llama.h's LLAMA_FTYPE_MOSTLY_*
  DType base;
};

constexpr MixInfo kMixes[] = {
    {QuantMix::kQ2_K, "q2_k_mix", 10, DType::kQ2_K}, {QuantMix::kQ2_K_S, "q2_k_s", 21, DType::kQ2_K},
    {QuantMix::kQ3_K_S, "q3_k_s", 11, DType::kQ3_K}, {QuantMix::kQ3_K_M, "q3_k_m", 12, DType::kQ3_K},
    {QuantMix::kQ3_K_L, "q3_k_l", 13, DType::kQ3_K}, {QuantMix::kQ4_K_S, "q4_k_s", 14, DType::kQ4_K},
    {QuantMix::kQ4_K_M, "q4_k_m", 15, DType::kQ4_K}, {QuantMix::kQ5_K_S, "q5_k_s", 16, DType::kQ5_K},
    {QuantMix::kQ5_K_M, "q5_k_m", 17, DType::kQ5_K},
};

const MixInfo& info(QuantMix m) {
  for (const MixInfo& i : kMixes) {
    if (i.mix == m) return i;
  }
  return kMixes[0];  // kNone has no info; callers check first
}

// What llama.cpp's quantizer tells tensors apart by (its tensor_category).
enum class Role { kOutput, kTokenEmbd, kAttnV, kAttnK, kAttnQ, kAttnOutput, kFfnUp, kFfnGate, kFfnDown, kOther };

Role role_of(const std::string& name) {
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (name == "output.weight") return Role::kOutput;
  if (name == "token_embd.weight") return Role::kTokenEmbd;
  if (has("attn_qkv.weight") || has("attn_kv_b.weight") || has("attn_v.weight")) return Role::kAttnV;
  if (has("attn_k.weight")) return Role::kAttnK;
  if (has("attn_q.weight")) return Role::kAttnQ;
  if (has("attn_output.weight")) return Role::kAttnOutput;
  if (has("ffn_up")) return Role::kFfnUp;
  if (has("ffn_gate")) return Role::kFfnGate;
  if (has("ffn_down")) return Role::kFfnDown;
  return Role::kOther;
}

// When a rule applies. i of n is the matrix's layer of the model's n layers
// (llama.cpp counts attn_v-like matrices in layer order; every model
// make-model writes has one per layer or none, so that count is the layer).
enum class When {
  kAlways,
  kMoreBits,        // use_more_bits: i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2
  kFirstEighth,     // i < n/8
  kFirstSixteenth,  // i < n/16
  kFirst2,          // i < 2
  kFirst4,          // i < 4
  kGqa4,            // n_head / n_kv_head >= 4
  kExperts8,        // exactly 8 experts (llama.cpp's Mixtral rule, for any such model)
  kNotExperts8,
};

struct Rule {
  Role role;
  QuantMix mix;
  When when;
  DType type;
};

// First matching row wins; a matrix no row matches keeps the mix's base type.
// (llama.cpp's Falcon-only variants and the IQ mixes are left out: parallm
// writes no Falcon, and make-model offers only the k-quant mixes.)
constexpr Rule kRules[] = {
    // attn_v, attn_qkv, attn_kv_b (then the 70B and 8-expert overrides below)
    {Role::kAttnV, QuantMix::kQ2_K, When::kGqa4, DType::kQ4_K},
    {Role::kAttnV, QuantMix::kQ2_K, When::kAlways, DType::kQ3_K},
    {Role::kAttnV, QuantMix::kQ2_K_S, When::kGqa4, DType::kQ4_K},
    {Role::kAttnV, QuantMix::kQ3_K_M, When::kFirst2, DType::kQ5_K},
    {Role::kAttnV, QuantMix::kQ3_K_M, When::kAlways, DType::kQ4_K},
    {Role::kAttnV, QuantMix::kQ3_K_L, When::kAlways, DType::kQ5_K},
    {Role::kAttnV, QuantMix::kQ4_K_M, When::kMoreBits, DType::kQ6_K},
    {Role::kAttnV, QuantMix::kQ5_K_M, When::kMoreBits, DType::kQ6_K},
    {Role::kAttnV, QuantMix::kQ4_K_S, When::kFirst4, DType::kQ5_K},
    // attn_output
    {Role::kAttnOutput, QuantMix::kQ2_K, When::kExperts8, DType::kQ5_K},
    {Role::kAttnOutput, QuantMix::kQ3_K_S, When::kExperts8, DType::kQ5_K},
    {Role::kAttnOutput, QuantMix::kQ3_K_M, When::kExperts8, DType::kQ5_K},
    {Role::kAttnOutput, QuantMix::kQ4_K_S, When::kExperts8, DType::kQ5_K},
    {Role::kAttnOutput, QuantMix::kQ4_K_M, When::kExperts8, DType::kQ5_K},
    {Role::kAttnOutput, QuantMix::kQ2_K, When::kNotExperts8, DType::kQ3_K},
    {Role::kAttnOutput, QuantMix::kQ3_K_M, When::kNotExperts8, DType::kQ4_K},
    {Role::kAttnOutput, QuantMix::kQ3_K_L, When::kNotExperts8, DType::kQ5_K},
    // ffn_down, ffn_down_exps, ffn_down_shexp
    {Role::kFfnDown, QuantMix::kQ2_K, When::kAlways, DType::kQ3_K},
    {Role::kFfnDown, QuantMix::kQ2_K_S, When::kFirstEighth, DType::kQ4_K},
    {Role::kFfnDown, QuantMix::kQ3_K_M, When::kFirstSixteenth, DType::kQ5_K},
    {Role::kFfnDown, QuantMix::kQ3_K_M, When::kAlways, DType::kQ4_K},
    {Role::kFfnDown, QuantMix::kQ3_K_L, When::kAlways, DType::kQ5_K},
    {Role::kFfnDown, QuantMix::kQ4_K_M, When::kMoreBits, DType::kQ6_K},
    {Role::kFfnDown, QuantMix::kQ5_K_M, When::kMoreBits, DType::kQ6_K},
    {Role::kFfnDown, QuantMix::kQ4_K_S, When::kFirstEighth, DType::kQ5_K},
    // token_embd (untied), attn_q, ffn_gate, ffn_up: no row, the base type.
};

bool applies(When w, int64_t i, int64_t n, const ModelConfig& c) {
  switch (w) {
    case When::kAlways:
      return true;
    case When::kMoreBits:
      return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
    case When::kFirstEighth:
      return i < n / 8;
    case When::kFirstSixteenth:
      return i < n / 16;
    case When::kFirst2:
      return i < 2;
    case When::kFirst4:
      return i < 4;
    case When::kGqa4:
      return c.n_kv_head > 0 && c.n_head / c.n_kv_head >= 4;
    case When::kExperts8:
      return c.n_expert == 8;
    case When::kNotExperts8:
      return c.n_expert != 8;
  }
  return false;
}

// llama.cpp's tensor_type_fallback for rows that are not whole blocks. Its
// Q8_0 has no fallback (llama.cpp stops); rows that fit no block type here
// get F16, as its older quantizer gave them. (Before #19770 Q2_K and Q3_K
// fell back to IQ4_NL, not Q4_0.)
DType fit_rows(DType t, int64_t row_len) {
  if (row_len % dtype_block_elems(t) == 0) return t;
  DType f = DType::kF16;
  switch (t) {
    case DType::kQ2_K:
    case DType::kQ3_K:
      f = DType::kQ4_0;
      break;
    case DType::kQ4_K:
      f = DType::kQ5_0;
      break;
    case DType::kQ5_K:
      f = DType::kQ5_1;
      break;
    case DType::kQ6_K:
      f = DType::kQ8_0;
      break;
    case DType::kIQ4_XS:
      f = DType::kIQ4_NL;
      break;
    default:
      break;
  }
  return row_len % dtype_block_elems(f) == 0 ? f : DType::kF16;
}

int64_t layer_of(const std::string& name) {
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) return -1;
  return layer;
}

}  // namespace

const char* quant_mix_name(QuantMix m) { return m == QuantMix::kNone ? "none" : info(m).name; }

bool parse_quant_mix(const std::string& name, QuantMix* out) {
  std::string s = name;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  for (const MixInfo& i : kMixes) {
    if (s == i.name) {
      *out = i.mix;
      return true;
    }
  }
  return false;
}

std::string quant_mix_names_list() {
  std::string s;
  for (const MixInfo& i : kMixes) s += std::string(s.empty() ? "" : ", ") + i.name;
  return s;
}

uint32_t quant_mix_file_type(QuantMix m) { return info(m).file_type; }

DType quant_mix_base_type(QuantMix m) { return info(m).base; }

DType quant_mix_tensor_type(QuantMix m, const ModelConfig& c, const std::string& name, int64_t row_len) {
  const DType base = info(m).base;
  const Role role = role_of(name);
  // The classifier, and token_embd when it is the classifier too: Q6_K, or
  // Q8_0 when its rows are not whole blocks of the base type.
  if (role == Role::kOutput || (role == Role::kTokenEmbd && c.tied_embeddings)) {
    return fit_rows(row_len % dtype_block_elems(base) != 0 ? DType::kQ8_0 : DType::kQ6_K, row_len);
  }
  const int64_t i = layer_of(name), n = c.n_layer;
  DType t = base;
  for (const Rule& r : kRules) {
    if (r.role == role && r.mix == m && applies(r.when, i, n, c)) {
      t = r.type;
      break;
    }
  }
  if (role == Role::kAttnV) {
    // llama.cpp's 70B (Llama with 80 layers and GQA): attn_v is 8x smaller
    // than attn_q, so more bits cost little.
    const bool llama_70b = c.arch == Architecture::kLlama && c.n_layer == 80 && c.n_kv_head < c.n_head;
    if (llama_70b && (t == DType::kQ3_K || t == DType::kQ4_K)) t = DType::kQ5_K;
    if (c.n_expert == 8) t = DType::kQ8_0;
  }
  if (role == Role::kAttnK && c.n_expert == 8) t = DType::kQ8_0;
  return fit_rows(t, row_len);
}

}  // namespace parallm
