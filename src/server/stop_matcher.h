// Stop strings over streamed text: push() returns the text that can be sent
// now, holding back any tail that could be the start of a stop string; once a
// stop string appears, the text before it is returned and stopped() is true
// (the stop string itself is not sent, as OpenAI specifies, unless asked).
#pragma once
#include <string>
#include <vector>

namespace parallm {

// The length of the longest tail of `text` that is a proper prefix of
// `marker`: bytes a streamer must hold back until it knows whether the marker
// follows.
size_t partial_marker_tail(const std::string& text, const std::string& marker);

class StopMatcher {
 public:
  // include: the stop string itself is sent too (vLLM's include_stop_str_in_output).
  explicit StopMatcher(std::vector<std::string> stops, bool include = false)
      : stops_(std::move(stops)), include_(include) {}
  std::string push(const std::string& text);
  std::string flush();  // the held-back tail at the end of generation
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  bool include_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace parallm
