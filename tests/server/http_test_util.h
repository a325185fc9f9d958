// Small HTTP helpers for the server tests: raw-socket requests (to read SSE
// streams incrementally and to hang up mid-stream), SSE parsing, metric
// lookup in Prometheus text and a small parser of it.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
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
                    "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
                    body;
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
inline std::string sse_text(const std::vector<std::string>& data, std::string* finish = nullptr,
                            nlohmann::json* usage = nullptr) {
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

// A small parser of Prometheus text (format 0.0.4): samples with their
// labels, and the # TYPE / # HELP of each family.
struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};
struct PromText {
  std::vector<PromSample> samples;
  std::map<std::string, std::string> types, helps;  // by family name
  std::string error;                                // the first line that does not parse

  static PromText parse(const std::string& text) {
    PromText out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      if (line[0] == '#') {
        std::istringstream ls(line.substr(1));
        std::string kind, name, rest;
        ls >> kind >> name;
        std::getline(ls, rest);
        if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
        if (kind == "TYPE") out.types[name] = rest;
        if (kind == "HELP") out.helps[name] = rest;
        continue;
      }
      PromSample smp;
      size_t i = 0;
      while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
      smp.name = line.substr(0, i);
      if (i < line.size() && line[i] == '{') {
        ++i;
        while (i < line.size() && line[i] != '}') {
          const size_t eq = line.find('=', i);
          if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') break;
          const std::string key = line.substr(i, eq - i);
          std::string value;
          size_t j = eq + 2;
          for (; j < line.size() && line[j] != '"'; ++j) {
            if (line[j] == '\\' && j + 1 < line.size()) {
              ++j;
              value += line[j] == 'n' ? '\n' : line[j];
            } else {
              value += line[j];
            }
          }
          smp.labels[key] = value;
          i = j + 1;
          if (i < line.size() && line[i] == ',') ++i;
        }
        if (i >= line.size() || line[i] != '}') {
          if (out.error.empty()) out.error = line;
          continue;
        }
        ++i;
      }
      try {
        smp.value = std::stod(line.substr(i));
      } catch (...) {
        if (out.error.empty()) out.error = line;
        continue;
      }
      out.samples.push_back(std::move(smp));
    }
    return out;
  }
  // The samples of `name` (exactly), in order.
  std::vector<const PromSample*> find(const std::string& name) const {
    std::vector<const PromSample*> out;
    for (const auto& s : samples) {
      if (s.name == name) out.push_back(&s);
    }
    return out;
  }
  double value(const std::string& name) const {
    auto v = find(name);
    return v.size() == 1 ? v[0]->value : -1;
  }
  // The family a sample belongs to: its name, or for a histogram's series the name without the suffix.
  std::string family(const std::string& name) const {
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string sfx = suffix;
      if (name.size() > sfx.size() && name.compare(name.size() - sfx.size(), sfx.size(), sfx) == 0) {
        const std::string base = name.substr(0, name.size() - sfx.size());
        auto it = types.find(base);
        if (it != types.end() && it->second == "histogram") return base;
      }
    }
    return name;
  }
};

}  // namespace parallm::test
