// The names a server answers to. vLLM's `--served-model-name a b` serves one
// model under several names: the first is the one reported in responses,
// every name is accepted in a request's "model" and has its card in
// /v1/models (ServerOptions::served_model_name, then served_model_aliases).
#pragma once
#include <string>
#include <vector>

#include "server/http_server.h"

namespace parallm {

// Whether a request naming `model` is for this server.
bool serves_model(const ServerOptions& options, const std::string& model);
// Every served name, the reported one first.
std::vector<std::string> served_model_names(const ServerOptions& options);

}  // namespace parallm
