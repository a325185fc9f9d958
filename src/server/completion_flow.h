// One completion request from body to response: validate, build the prompt
// (chat template or plain text / token ids), check lengths, submit to the
// backend, then either wait and answer one JSON object or stream SSE chunks.
// Stop strings, usage and latency metrics are handled here; a stream whose
// client goes away aborts its sequence.
#pragma once
#include <httplib.h>

#include "server/chat_template.h"
#include "server/completion_backend.h"
#include "server/http_server.h"
#include "server/server_metrics.h"

namespace parallm {

struct CompletionContext {
  const ServerOptions& options;
  CompletionBackend& backend;
  const ChatFormatter& chat;
  ServerMetrics& metrics;
};

// Throws ApiError for a request that cannot be served.
void handle_completion(const CompletionContext& ctx, const httplib::Request& req, httplib::Response& res, bool chat);

}  // namespace parallm
