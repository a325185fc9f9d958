// StopMatcher (see stop_matcher.h). The held-back tail always starts with the
// first byte of a stop string, so it never splits a UTF-8 character.
#include "server/stop_matcher.h"

#include <algorithm>

namespace parallm {

size_t partial_marker_tail(const std::string& text, const std::string& marker) {
  if (marker.empty()) return 0;
  for (size_t k = std::min(marker.size() - 1, text.size()); k > 0; --k) {
    if (text.compare(text.size() - k, k, marker, 0, k) == 0) return k;
  }
  return 0;
}

std::string StopMatcher::push(const std::string& text) {
  if (stopped_) return "";
  pending_ += text;
  size_t best = std::string::npos, best_len = 0;
  for (const auto& s : stops_) {
    const size_t at = pending_.find(s);
    if (at < best || (at == best && at != std::string::npos && s.size() > best_len)) best = at, best_len = s.size();
  }
  if (best != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, best + (include_ ? best_len : 0));
    pending_.clear();
    return out;
  }
  size_t hold = 0;
  for (const auto& s : stops_) hold = std::max(hold, partial_marker_tail(pending_, s));
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::flush() {
  if (stopped_) return "";
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace parallm
