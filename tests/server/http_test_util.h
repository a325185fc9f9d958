// Small HTTP helpers for the server tests: raw-socket requests (to read SSE
// streams incrementally and to hang up mid-stream), SSE parsing and metric
// lookup in Prometheus text.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace parallm::test {

// Sends a request over a fresh connection and reads until the server closes
// (Connection: close) or `stop_after_bytes` bytes have arrived (then hangs up).
inline std::string raw_http(int port, const std::string& method, const std::string& path, const std::string& body,
                            const std::string& extra_headers = "", size_t stop_after_bytes = 0) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return "";
  }
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + extra_headers +
                    "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  size_t off = 0;
  while (off < req.size()) {
    ssize_t n = ::send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  std::string out;
  char buf[4096];
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (stop_after_bytes && out.size() >= stop_after_bytes) break;
  }
  ::close(fd);
  return out;
}

inline int status_of(const std::string& response) {
  if (response.size() < 12) return 0;
  return std::stoi(response.substr(9, 3));
}

// The `data:` payloads of an SSE stream (chunked framing is tolerated: chunk
// size lines never start with "data: ").
inline std::vector<std::string> sse_data(const std::string& response) {
  std::vector<std::string> out;
  std::istringstream ss(response);
  std::string line;
  while (std::getline(ss, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
  }
  return out;
}

// The text of a streamed completion / chat completion, and its finish_reason.
inline std::string sse_text(const std::vector<std::string>& data, std::string* finish = nullptr, nlohmann::json* usage = nullptr) {
  std::string text;
  for (const auto& d : data) {
    if (d == "[DONE]") break;
    auto j = nlohmann::json::parse(d);
    if (usage && j.contains("usage") && !j["usage"].is_null()) *usage = j["usage"];
    for (const auto& c : j["choices"]) {
      if (c.contains("text")) text += c["text"].get<std::string>();
      if (c.contains("delta") && c["delta"].contains("content")) text += c["delta"]["content"].get<std::string>();
      if (finish && !c["finish_reason"].is_null()) *finish = c["finish_reason"].get<std::string>();
    }
  }
  return text;
}

// Value of an unlabelled (or exactly labelled) sample in Prometheus text; -1 if absent.
inline double metric(const std::string& text, const std::string& name) {
  std::istringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  return -1;
}

}  // namespace parallm::test
