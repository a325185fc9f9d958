// StopMatcher (see stop_matcher.h). The held-back tail always starts with the
// first byte of a stop string, so it never splits a UTF-8 character.
#include "server/stop_matcher.h"

#include <algorithm>

namespace parallm {

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
  for (const auto& s : stops_) {
    for (size_t k = std::min(s.size() - 1, pending_.size()); k > hold; --k) {
      if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
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
