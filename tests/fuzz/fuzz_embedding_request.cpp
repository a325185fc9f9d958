// libFuzzer target: request bodies of /v1/embeddings through
// parse_embedding_request (server/embedding_request). Any bytes must give
// validated parameters or an ApiError(400): no crash, no other exception, no
// stack overflow however deep the body nests; an accepted body has 1 to
// kMaxEmbeddingInputs inputs, none empty, token ids non-negative, and a
// positive `dimensions` when one was given.
// clang-format off
// FUZZ_SOURCES: src/server/embedding_request.cpp src/util/json_parse.cpp src/util/check.cpp src/util/log.cpp
// FUZZ_MAX_LEN: 300000
// clang-format on
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/api_error.h"
#include "server/embedding_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  try {
    const parallm::EmbeddingParams p = parallm::parse_embedding_request(body);
    if (p.inputs.empty() || static_cast<int64_t>(p.inputs.size()) > parallm::kMaxEmbeddingInputs) std::abort();
    for (const parallm::PromptInput& in : p.inputs) {
      if (in.is_tokens ? in.tokens.empty() : in.text.empty()) std::abort();
      for (int32_t t : in.tokens) {
        if (t < 0) std::abort();
      }
    }
    if (p.dimensions && *p.dimensions < 1) std::abort();
  } catch (const parallm::ApiError& e) {
    if (e.status() != 400) std::abort();
  }
  return 0;
}
