// POST /v1/embeddings, OpenAI-compatible:
//   {"input": str | [str] | [ids] | [[ids]], "model"?, "encoding_format"?: "float" | "base64",
//    "dimensions"?, "user"?}
//   -> {"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model",
//       "usage": {"prompt_tokens", "total_tokens"}}
// Each input is one prefill-only request of the serving engine (batched with
// everything else in the scheduler's steps, chunked like any prompt); its
// embedding is the mean of the last hidden state after the final norm over
// the input's tokens, L2-normalised: llama-server's --embedding with mean
// pooling (docs/server.md). Text gets the tokenizer's BOS as a completion
// prompt does. No thread waits: the last input's event renders the answer
// on a worker.
#pragma once
#include <memory>

#include "server/completion_flow.h"

namespace parallm {

// Throws ApiError for a request that cannot be served (nothing sent yet);
// otherwise the exchange is answered later, from a worker.
void handle_embeddings(const CompletionContext& ctx, const std::shared_ptr<net::HttpExchange>& exchange);

}  // namespace parallm
