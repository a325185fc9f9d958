// Writes the seed corpora of the fuzz targets: small valid files made by
// parallm's own writers (GgufWriter, make-model, the test safetensors
// writer), one folder per target: OUT/fuzz_gguf, OUT/fuzz_safetensors,
// OUT/fuzz_hf_config; and request bodies past the JSON limits for
// OUT/fuzz_openai_request.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "loader/gguf_writer.h"
#include "modelgen/make_model.h"
#include "safetensors_test_writer.h"

using namespace parallm;

namespace {

void write(const std::string& dir, const std::string& name, const std::vector<uint8_t>& bytes) {
  std::filesystem::create_directories(dir);
  test::write_bytes(dir + "/" + name, bytes);
}

std::vector<uint8_t> all_types_gguf(uint32_t version, size_t alignment) {
  GgufWriter w(version, alignment);
  w.set_string("general.architecture", "llama");
  w.set_u8("a.u8", 1);
  w.set_i8("a.i8", -1);
  w.set_u16("a.u16", 2);
  w.set_i16("a.i16", -2);
  w.set_u32("a.u32", 3);
  w.set_i32("a.i32", -3);
  w.set_u64("a.u64", 4);
  w.set_i64("a.i64", -4);
  w.set_f32("a.f32", 0.5f);
  w.set_f64("a.f64", 0.25);
  w.set_bool("a.bool", true);
  w.set_string_array("a.strs", {"<s>", "\xe2\x96\x81hi", ""});
  w.set_f32_array("a.f32s", {1.0f, -1.0f});
  w.set_int_array("a.i32s", GgufType::kI32, {1, 2, 3});
  for (DType dt : kAllDTypes) {
    const int64_t cols = dtype_block_elems(dt) == 1 ? 4 : dtype_block_elems(dt);
    std::vector<uint8_t> bytes(dtype_row_bytes(dt, cols) * 2, 0x11);
    w.add_tensor(std::string("t.") + dtype_name(dt), dt, {2, cols}, bytes);
  }
  // Types parallm cannot run: sized from their ggml layouts (IQ2_XXS, Q8_1,
  // MXFP4), and an id no layout is known for.
  for (uint32_t id : {16u, 9u, 39u, 77u}) {
    int64_t be = 1;
    size_t bb = 1;
    ggml_type_block(id, &be, &bb);
    w.add_tensor_raw("u." + std::to_string(id), id, {2, be}, 2 * bb, [](uint8_t* d) { d[0] = 0x11; });
  }
  return w.to_bytes();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  write(out + "/fuzz_gguf", "all_types_v3.gguf", all_types_gguf(3, 32));
  write(out + "/fuzz_gguf", "all_types_v2_align64.gguf", all_types_gguf(2, 64));
  MakeModelOptions o;
  o.preset = "tiny";
  o.dtype = DType::kQ4_0;
  write(out + "/fuzz_gguf", "tiny_q4_0.gguf", build_model_gguf(o).to_bytes());
  // Whole models small enough to fuzz, one per architecture preset, for the
  // model mapping (fuzz_gguf_model): 300 tokens, 8 wide, heads of 4.
  for (const ModelPreset& preset : model_presets()) {
    if (preset.name.rfind("tiny-", 0) != 0 && preset.name != "mixtral-tiny") continue;
    ModelPreset micro = preset;
    const ModelConfig& full = preset.config;
    ModelConfig& c = micro.config;
    c.n_vocab = 300;
    c.n_embd = 8;
    c.n_head = 2;
    c.n_kv_head = c.arch == Architecture::kGemma3 ? 1 : 2;
    c.head_dim = full.n_head * full.head_dim != full.n_embd ? 8 : 0;  // 0: finalize() derives it
    c.n_ff = 8;
    c.n_ff_dense = full.n_ff_dense > 0 ? 32 : 0;
    c.n_ff_shared = full.shared_expert_gated ? 16 : 0;
    c.n_expert = full.n_expert > 0 ? 4 : 0;
    c.rope_original_ctx = full.rope_scaling == RopeScaling::kLlama3 ? 64 : 16;
    c.n_ctx_train = 64;
    if (full.mla()) {  // MLA at micro size: latent 8, heads of 4 + 4, values 4
      c.kv_lora_rank = 8;
      c.qk_nope_dim = c.qk_rope_dim = c.v_head_dim = 4;
      c.q_lora_rank = full.q_lora_rank > 0 ? 8 : 0;
      c.head_dim = 8;
      c.n_ff_dense = 8;
      c.n_ff_shared = c.n_expert_shared * c.n_ff;
      c.n_layer = 2;
    }
    complete_generated_config(&c);
    MakeModelOptions mo;
    mo.shape = &micro;
    write(out + "/fuzz_gguf_model", preset.name + ".gguf", build_model_gguf(mo).to_bytes());
  }

  std::vector<test::StTensor> st = {
      {"model.embed_tokens.weight", "F32", {2, 2}, test::f32_bytes({1, 2, 3, 4})},
      {"model.norm.weight", "BF16", {2}, {0x80, 0x3f, 0x00, 0x40}},
      {"lm_head.weight", "F16", {1, 2}, {0x00, 0x3c, 0x00, 0xc0}},
      {"empty", "F32", {0}, {}},
  };
  write(out + "/fuzz_safetensors", "small.safetensors", test::safetensors_bytes(st, {{"format", "pt"}}));
  write(out + "/fuzz_safetensors", "one.safetensors", test::safetensors_bytes({st[0]}));

  // One module of each quantized layout (fuzz_quantized_module): the first
  // byte picks the method, the second the group size (32), then a
  // safetensors file of the module's parts.
  {
    auto words = [](size_t n, uint32_t v) {
      std::vector<uint8_t> b(n * 4);
      for (size_t i = 0; i < n; ++i) std::memcpy(b.data() + 4 * i, &v, 4);
      return b;
    };
    const std::vector<uint8_t> half_scales(2 * 2 * 16, 0x3c);  // f16 ~1.0 bytes
    const std::vector<test::StTensor> gptq = {{"qweight", "I32", {8, 16}, words(8 * 16, 0x76543210u)},
                                              {"qzeros", "I32", {2, 2}, words(4, 0x77777777u)},
                                              {"scales", "F16", {2, 16}, half_scales}};
    const std::vector<test::StTensor> awq = {{"qweight", "I32", {64, 2}, words(128, 0x01234567u)},
                                             {"qzeros", "I32", {2, 2}, words(4, 0x88888888u)},
                                             {"scales", "F16", {2, 16}, half_scales}};
    const std::vector<test::StTensor> packed = {{"weight_packed", "I32", {16, 8}, words(128, 0x89abcdefu)},
                                                {"weight_scale", "F16", {16, 2}, half_scales}};
    const std::vector<test::StTensor> fp8 = {{"weight", "F8_E4M3", {16, 64}, std::vector<uint8_t>(1024, 0x38)},
                                             {"weight_scale", "F32", {}, test::f32_bytes({0.5f})}};
    const std::pair<uint8_t, const std::vector<test::StTensor>*> seeds[] = {
        {0, &fp8}, {1 | 4 | 8, &gptq}, {2 | 4, &awq}, {3, &packed}};
    for (const auto& [method, tensors] : seeds) {
      std::vector<uint8_t> bytes = {method, 2};
      const std::vector<uint8_t> st = test::safetensors_bytes(*tensors);
      bytes.insert(bytes.end(), st.begin(), st.end());
      write(out + "/fuzz_quantized_module", "method" + std::to_string(method % 4) + ".bin", bytes);
    }
  }

  const std::string llama =
      R"({"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,)"
      R"( "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,)"
      R"( "rope_theta": 500000.0, "max_position_embeddings": 131072, "tie_word_embeddings": false,)"
      R"( "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,)"
      R"( "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "hidden_act": "silu"})";
  const std::string qwen =
      R"({"architectures": ["Qwen2ForCausalLM"], "vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864,)"
      R"( "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2, "tie_word_embeddings": true,)"
      R"( "rope_theta": 1000000.0, "rope_scaling": null})";
  const std::string mixtral =
      R"({"model_type": "mixtral", "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,)"
      R"( "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 8,)"
      R"( "num_experts_per_tok": 2, "rope_scaling": {"type": "linear", "factor": 2.0}, "head_dim": 128})";
  const std::string qwen3moe =
      R"({"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": 151936,)"
      R"( "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128,)"
      R"( "num_experts_per_tok": 8, "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [],)"
      R"( "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128})";
  const std::string qwen2moe =
      R"({"model_type": "qwen2_moe", "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632,)"
      R"( "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632, "num_experts": 60,)"
      R"( "num_experts_per_tok": 4, "norm_topk_prob": false, "num_hidden_layers": 24, "num_attention_heads": 16})";
  const std::string gemma2 =
      R"({"model_type": "gemma2", "vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216,)"
      R"( "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,)"
      R"( "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256, "sliding_window": 4096,)"
      R"( "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0})";
  const std::string gemma3 =
      R"({"model_type": "gemma3_text", "vocab_size": 262144, "hidden_size": 1152, "intermediate_size": 6912,)"
      R"( "num_hidden_layers": 26, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,)"
      R"( "sliding_window": 512, "sliding_window_pattern": 6, "rope_local_base_freq": 10000.0,)"
      R"( "rope_theta": 1000000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0}})";
  const std::string phi3 =
      R"({"model_type": "phi3", "vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192,)"
      R"( "num_hidden_layers": 32, "num_attention_heads": 32, "max_position_embeddings": 131072,)"
      R"( "original_max_position_embeddings": 4096, "rope_scaling": {"type": "longrope",)"
      R"( "long_factor": [1.0, 1.2, 1.5, 2.0], "short_factor": [1.0, 1.0, 1.1, 1.2]}, "head_dim": 8})";
  for (const auto& [name, text] : {std::pair{"llama3.json", llama},
                                   {"qwen2.json", qwen},
                                   {"mixtral.json", mixtral},
                                   {"qwen3moe.json", qwen3moe},
                                   {"qwen2moe.json", qwen2moe},
                                   {"gemma2.json", gemma2},
                                   {"gemma3.json", gemma3},
                                   {"phi3.json", phi3}}) {
    write(out + "/fuzz_hf_config", name, std::vector<uint8_t>(text.begin(), text.end()));
  }

  // Request bodies past the JSON limits (the first byte picks chat): nested
  // 50,000 deep, and a message 20,000 keys wide.
  const std::string deep = "1{\"messages\":[{\"role\":\"user\",\"content\":\"hi\",\"x\":" + std::string(50'000, '[') +
                           std::string(50'000, ']') + "}]}";
  std::string wide = "1{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"";
  for (int i = 0; i < 20'000; ++i) wide += ",\"k" + std::to_string(i % 15'000) + "\":" + std::to_string(i);
  wide += "}]}";
  for (const auto& [name, text] : {std::pair{"deep_chat.txt", deep}, {"wide_chat.txt", wide}}) {
    write(out + "/fuzz_openai_request", name, std::vector<uint8_t>(text.begin(), text.end()));
  }
  return 0;
}
