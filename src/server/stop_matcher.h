// Stop strings over streamed text: push() returns the text that can be sent
// now, holding back any tail that could be the start of a stop string; once a
// stop string appears, the text before it is returned and stopped() is true
// (the stop string itself is never sent, as OpenAI specifies).
#pragma once
#include <string>
#include <vector>

namespace parallm {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  std::string push(const std::string& text);
  std::string flush();  // the held-back tail at the end of generation
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace parallm
