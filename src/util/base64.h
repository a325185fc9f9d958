// Base64 (RFC 4648 section 4: the standard alphabet, '=' padding), for
// binary payloads in JSON: /v1/embeddings' encoding_format "base64".
#pragma once
#include <cstddef>
#include <string>

namespace parallm {

std::string base64_encode(const void* data, size_t n_bytes);

}  // namespace parallm
