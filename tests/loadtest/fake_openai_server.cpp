// Scripted fake OpenAI-compatible server; see fake_openai_server.h.
#include "fake_openai_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <sstream>
#include <stdexcept>

namespace parallm::loadtest::testing {
namespace {

using Clock = std::chrono::steady_clock;

bool send_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string chunk(const std::string& payload) {
  std::ostringstream s;
  s << std::hex << payload.size() << "\r\n" << payload << "\r\n";
  return s.str();
}

std::string sse(const nlohmann::json& j) { return chunk("data: " + j.dump() + "\n\n"); }

int64_t words(const std::string& text) {
  std::istringstream in(text);
  std::string w;
  int64_t n = 0;
  while (in >> w) ++n;
  return n;
}

}  // namespace

int64_t FakeOpenAiServer::count_prompt_words(const nlohmann::json& body) {
  if (body.contains("prompt") && body["prompt"].is_string()) return words(body["prompt"].get<std::string>());
  int64_t n = 0;
  if (body.contains("messages")) {
    for (const auto& m : body["messages"]) n += words(m.value("content", ""));
  }
  return n;
}

FakeOpenAiServer::FakeOpenAiServer(Scripter scripter) : scripter_(std::move(scripter)) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(listen_fd_, 512) != 0) {
    throw std::runtime_error(std::string("fake server: bind/listen: ") + std::strerror(errno));
  }
  socklen_t len = sizeof(addr);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

FakeOpenAiServer::~FakeOpenAiServer() {
  kill();
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers.swap(workers_);
  }
  for (auto& t : workers) t.join();
}

void FakeOpenAiServer::kill() {
  if (stopping_.exchange(true)) return;
  shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  close(listen_fd_);
  std::lock_guard<std::mutex> lock(mu_);
  for (int fd : open_fds_) shutdown(fd, SHUT_RDWR);
  cv_.notify_all();
}

std::vector<FakeOpenAiServer::Observed> FakeOpenAiServer::observed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return observed_;
}

std::vector<nlohmann::json> FakeOpenAiServer::bodies() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bodies_;
}

void FakeOpenAiServer::accept_loop() {
  while (!stopping_) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ++connections_;
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      close(fd);
      return;
    }
    open_fds_.insert(fd);
    const Clock::time_point accepted = Clock::now();
    workers_.emplace_back([this, fd, accepted] { serve_connection(fd, accepted); });
  }
}

bool FakeOpenAiServer::sleep_until(Clock::time_point t) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_until(lock, t, [this] { return stopping_.load(); });
}

void FakeOpenAiServer::serve_connection(int fd, Clock::time_point accepted) {
  std::string buf;
  bool first_request = true;
  char tmp[8192];
  while (!stopping_) {
    // Read one request: headers, then Content-Length bytes of body.
    size_t header_end;
    while ((header_end = buf.find("\r\n\r\n")) == std::string::npos) {
      const ssize_t n = read(fd, tmp, sizeof(tmp));
      if (n <= 0) goto done;
      buf.append(tmp, static_cast<size_t>(n));
    }
    {
      const std::string head = buf.substr(0, header_end);
      size_t content_length = 0;
      std::istringstream lines(head);
      std::string method, path, line;
      lines >> method >> path;
      while (std::getline(lines, line)) {
        for (auto& c : line) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (line.rfind("content-length:", 0) == 0) content_length = std::stoul(line.substr(15));
      }
      while (buf.size() < header_end + 4 + content_length) {
        const ssize_t n = read(fd, tmp, sizeof(tmp));
        if (n <= 0) goto done;
        buf.append(tmp, static_cast<size_t>(n));
      }
      const std::string body_text = buf.substr(header_end + 4, content_length);
      buf.erase(0, header_end + 4 + content_length);
      if (method == "GET" && path == "/v1/models") {
        ++models_requests_;
        if (loading_polls_.fetch_sub(1) > 0) {
          const std::string err = R"({"error":{"message":"the model is still loading","type":"server_error"}})";
          if (!send_all(fd, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: " +
                                std::to_string(err.size()) + "\r\n\r\n" + err))
            goto done;
          continue;
        }
        const std::string body = R"({"object":"list","data":[{"id":"fake-model","object":"model"}]})";
        if (!send_all(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body))
          goto done;
        continue;
      }
      const bool chat = path == "/v1/chat/completions";
      const auto body = nlohmann::json::parse(body_text, nullptr, false);
      if (method != "POST" || (!chat && path != "/v1/completions") || body.is_discarded()) {
        const std::string err = R"({"error":{"message":"not found","type":"invalid_request_error"}})";
        if (!send_all(fd, "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: " +
                              std::to_string(err.size()) + "\r\n\r\n" + err))
          goto done;
        continue;
      }
      // The first request's clock starts at accept(), so the time to start
      // this connection's thread counts as server time, as it would in a real server.
      const Clock::time_point arrival = first_request ? accepted : Clock::now();
      first_request = false;
      if (!stream_completion(fd, body, chat, arrival)) goto done;
    }
  }
done:
  std::lock_guard<std::mutex> lock(mu_);
  open_fds_.erase(fd);
  close(fd);
}

bool FakeOpenAiServer::stream_completion(int fd, const nlohmann::json& body, bool chat, Clock::time_point arrival) {
  int64_t index;
  {
    std::lock_guard<std::mutex> lock(mu_);
    bodies_.push_back(body);
    index = requests_seen_++;
  }
  const FakeScript s = scripter_(index, body);
  if (s.http_status != 200) {
    const std::string err = R"({"error":{"message":"scripted failure","type":"server_error","code":)" +
                            std::to_string(s.http_status) + "}}";
    return send_all(fd, "HTTP/1.1 " + std::to_string(s.http_status) +
                            " Scripted\r\nContent-Type: application/json\r\nContent-Length: " +
                            std::to_string(err.size()) + "\r\n\r\n" + err);
  }
  const int64_t n_tokens = s.tokens >= 0 ? s.tokens : body.value("max_tokens", 16);
  const bool usage =
      s.send_usage && body.contains("stream_options") && body["stream_options"].value("include_usage", false);
  auto piece = [&](const nlohmann::json& delta_or_text, const nlohmann::json& finish) {
    nlohmann::json c = {{"index", 0}, {"finish_reason", finish}};
    if (chat)
      c["delta"] = delta_or_text;
    else
      c["text"] = delta_or_text;
    return nlohmann::json{{"id", "cmpl-fake"},
                          {"object", chat ? "chat.completion.chunk" : "text_completion"},
                          {"model", "fake-model"},
                          {"choices", nlohmann::json::array({c})}};
  };
  std::string head =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  if (chat) head += sse(piece({{"role", "assistant"}, {"content", ""}}, nullptr));
  if (!send_all(fd, head)) return false;
  if (s.stall_ms > 0 && !sleep_until(arrival + std::chrono::microseconds(static_cast<int64_t>(s.stall_ms * 1e3)))) {
    return false;
  }
  const int64_t streams = ++active_streams_;
  for (int64_t m = max_streams_.load(); streams > m && !max_streams_.compare_exchange_weak(m, streams);) {
  }
  struct Leave {
    std::atomic<int64_t>& n;
    bool left = false;
    void leave() {
      if (!left) --n;
      left = true;
    }
    ~Leave() { leave(); }
  } leave{active_streams_};
  // NOTE: the token timeline is anchored at the moment the first token really
  // went out, so a late wake-up for the first token (a busy test machine)
  // does not make the later gaps shorter than scripted.
  Clock::time_point next = arrival + std::chrono::microseconds(static_cast<int64_t>(s.ttft_ms * 1e3));
  Clock::time_point first_sent{}, last_sent{};
  for (int64_t i = 0; i < n_tokens; ++i) {
    if (i > 0) {
      const double gap = s.gap_ms + s.gap_per_stream_ms * static_cast<double>(active_streams_.load() - 1);
      next += std::chrono::microseconds(static_cast<int64_t>(gap * 1e3));
    }
    if (!sleep_until(next)) return false;
    if (i == 0) next = first_sent = Clock::now();
    last_sent = Clock::now();
    if (i == s.drop_after_tokens) return false;  // the caller closes the connection
    if (i == s.error_after_tokens) {
      leave.leave();
      return send_all(
          fd, chunk("data: {\"error\":{\"message\":\"scripted stream error\",\"code\":500}}\n\n") + "0\r\n\r\n");
    }
    const nlohmann::json text = "tok" + std::to_string(i) + " ";
    if (!send_all(fd, sse(piece(chat ? nlohmann::json{{"content", text}} : text, nullptr)))) return false;
  }
  if (s.drop_after_tokens >= n_tokens) return false;
  leave.leave();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
    observed_.push_back(
        {ms(first_sent - arrival), n_tokens > 1 ? ms(last_sent - first_sent) / static_cast<double>(n_tokens - 1) : -1});
  }  // before the end is visible, so the next request sees the right count
  std::string tail = sse(piece(chat ? nlohmann::json::object() : nlohmann::json(""), "length"));
  if (usage) {
    const int64_t prompt = count_prompt_words(body) + (chat ? 7 : 1);  // a template's extra tokens
    tail += sse({{"id", "cmpl-fake"},
                 {"object", "chat.completion.chunk"},
                 {"choices", nlohmann::json::array()},
                 {"usage",
                  {{"prompt_tokens", prompt},
                   {"completion_tokens", n_tokens * s.tokens_per_chunk},
                   {"total_tokens", prompt + n_tokens * s.tokens_per_chunk}}}});
  }
  if (s.send_done) tail += chunk("data: [DONE]\n\n");
  tail += "0\r\n\r\n";
  return send_all(fd, tail);
}

}  // namespace parallm::loadtest::testing
