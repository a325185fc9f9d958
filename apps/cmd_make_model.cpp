// `parallm make-model`: writes a random-weight model of a preset's shape as a
// GGUF file that parallm and llama.cpp both load (modelgen/make_model.h).
#include <cstdio>
#include <memory>

#include "command_registry.h"
#include "modelgen/make_model.h"
#include "modelgen/model_presets.h"
#include "modelgen/quant_mix.h"
#include "util/log.h"

namespace parallm {
namespace {

struct MakeModelArgs {
  std::string preset;
  std::string dtype = "f32";
  std::string out;
  uint64_t seed = 0;
  std::string vocab_from;
};

const bool registered = register_command(
    {"make-model", "Write a random-weight model (GGUF) of a preset's shape", [](CLI::App& sub) {
       auto args = std::make_shared<MakeModelArgs>();
       sub.add_option("--preset", args->preset, "Model shape (list below)")->required();
       sub.add_option("--dtype", args->dtype,
                      "Matrix dtype: " + dtype_names_list() +
                          " (norms stay f32); or a llama.cpp mix, each matrix the type llama-quantize would give it: " +
                          quant_mix_names_list() + " (q2_k_mix is llama.cpp's Q2_K; plain q2_k is every matrix q2_k)")
           ->capture_default_str();
       sub.add_option("--out", args->out, "Output GGUF file")->required();
       sub.add_option("--seed", args->seed, "Weight seed (same seed, byte-identical file)")->capture_default_str();
       sub.add_option("--vocab-from", args->vocab_from,
                      "GGUF file whose tokenizer.* keys are copied (default: a generated SentencePiece vocabulary)");
       sub.footer(describe_model_presets());
       return [args]() {
         MakeModelOptions opts;
         opts.preset = args->preset;
         set_make_model_type(args->dtype, &opts);
         opts.out_path = args->out;
         opts.seed = args->seed;
         opts.vocab_from = args->vocab_from;
         MakeModelSummary s = make_model(opts);
         std::fprintf(stderr, "make-model: wrote %s: preset %s, %s, %.1fM parameters, vocab %lld, %s\n",
                      opts.out_path.c_str(), opts.preset.c_str(), make_model_type_name(opts).c_str(), s.n_params / 1e6,
                      (long long)s.n_vocab, format_bytes(static_cast<double>(s.file_bytes)).c_str());
         return 0;
       };
     }});

}  // namespace
}  // namespace parallm
