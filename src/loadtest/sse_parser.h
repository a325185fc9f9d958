// Incremental Server-Sent Events parser (WHATWG HTML §9.2.6, the subset the
// OpenAI streaming API uses): splits the body into events at blank lines and
// joins their `data:` lines. Comments (":...") and other fields are ignored.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace parallm::loadtest {

class SseParser {
 public:
  // Consumes body bytes; appends the data of each completed event to `events`.
  void feed(std::string_view body, std::vector<std::string>& events);
  // Bytes buffered in an unfinished line or event (for limits and tests).
  size_t pending_bytes() const { return line_.size() + data_.size(); }

 private:
  void on_line(std::string_view line, std::vector<std::string>& events);

  std::string line_;
  std::string data_;
  bool has_data_ = false;
  bool last_was_cr_ = false;
};

}  // namespace parallm::loadtest
