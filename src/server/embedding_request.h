// Parsing and validating the JSON body of POST /v1/embeddings (OpenAI's
// embeddings API): `input` as a string, an array of strings, an array of
// token ids or an array of such arrays; `encoding_format` "float" (default)
// or "base64"; `dimensions`; `model`; `user`. Every problem is an
// ApiError(400) naming the field. Lengths against the model are checked
// later, when the inputs are tokenized (embeddings_api.cpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/openai_request.h"
#include "util/json_parse.h"

namespace parallm {

// Most inputs one request may hold: each is a sequence in the scheduler
// (they count against --max-queue too). OpenAI allows 2048; clients that
// batch (LangChain's chunk_size) must stay at or below this.
constexpr int64_t kMaxEmbeddingInputs = 512;

struct EmbeddingParams {
  std::string model;
  std::vector<PromptInput> inputs;    // [n_inputs], none empty
  bool base64 = false;                // encoding_format "base64": little-endian float32 bytes
  std::optional<int64_t> dimensions;  // as asked; the server accepts only the model's size
  std::string user;
};

EmbeddingParams parse_embedding_request(const std::string& body,
                                        const JsonLimits& limits = JsonLimits{kRequestJsonDepth});

}  // namespace parallm
