// One completion request from body to response: validate, build the prompt
// (chat template or plain text / token ids), check lengths, submit to the
// backend, then answer one JSON object or a stream of SSE chunks. Nothing
// here blocks a thread while tokens are generated: the backend's events wake
// the request's flow on a worker (request_channel.h), which renders what
// arrived and writes it to the exchange. Stop strings, usage and latency
// metrics are handled here; a client that goes away aborts its sequences.
#pragma once
#include <memory>

#include "net/http_core.h"
#include "server/active_requests.h"
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
  std::shared_ptr<net::WorkQueue> work;  // where flows run
  ActiveRequests* active = nullptr;      // where flows register (completions only)
  net::HttpHeaders extra_headers = {};   // on every answer (CORS)
};

// Throws ApiError for a request that cannot be served (before anything was
// sent); otherwise the exchange is answered later, from a worker.
void handle_completion(const CompletionContext& ctx, const std::shared_ptr<net::HttpExchange>& exchange, bool chat);

}  // namespace parallm
