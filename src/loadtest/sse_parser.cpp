// Incremental SSE parser; see sse_parser.h. Lines end in LF, CRLF or CR.
#include "loadtest/sse_parser.h"

namespace parallm::loadtest {

void SseParser::on_line(std::string_view line, std::vector<std::string>& events) {
  if (line.empty()) {  // dispatch
    if (has_data_) events.push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line[0] == ':') return;  // comment / keep-alive ping
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view{} : line.substr(colon + 1);
  if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  if (field != "data") return;
  if (has_data_) data_.push_back('\n');
  data_.append(value);
  has_data_ = true;
}

void SseParser::feed(std::string_view body, std::vector<std::string>& events) {
  for (size_t i = 0; i < body.size();) {
    const char c = body[i];
    if (last_was_cr_ && c == '\n') {  // second half of CRLF
      last_was_cr_ = false;
      ++i;
      continue;
    }
    last_was_cr_ = false;
    if (c == '\n' || c == '\r') {
      last_was_cr_ = c == '\r';
      on_line(line_, events);
      line_.clear();
      ++i;
      continue;
    }
    const size_t end = body.find_first_of("\r\n", i);
    const size_t n = (end == std::string_view::npos ? body.size() : end) - i;
    line_.append(body.substr(i, n));
    i += n;
  }
}

}  // namespace parallm::loadtest
