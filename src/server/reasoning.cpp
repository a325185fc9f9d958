#include "server/reasoning.h"

#include "server/stop_matcher.h"
#include "util/check.h"

namespace parallm {
namespace {

const std::string kOpen = "<think>", kClose = "</think>";

}  // namespace

ReasoningFormat parse_reasoning_format(const std::string& name) {
  if (name.empty()) return ReasoningFormat::kNone;
  if (name == "deepseek_r1") return ReasoningFormat::kDeepSeekR1;
  if (name == "qwen3") return ReasoningFormat::kQwen3;
  throw InputError("--reasoning-parser must be deepseek_r1 or qwen3, not '" + name + "'");
}

ReasoningSplitter::ReasoningSplitter(ReasoningFormat format) : format_(format) {
  if (format_ == ReasoningFormat::kNone) state_ = State::kContent;
}

ReasoningSplitter::Parts ReasoningSplitter::push(const std::string& text) {
  Parts out;
  pending_ += text;
  if (state_ == State::kStart) {
    // Wait until the answer shows whether it opens with <think> (after any
    // whitespace, which a SentencePiece tokenizer's first piece may carry).
    const size_t first = pending_.find_first_not_of(" \n\t\r");
    if (first == std::string::npos) return out;
    const std::string rest = pending_.substr(first);
    if (rest.size() < kOpen.size() && kOpen.compare(0, rest.size(), rest) == 0) return out;
    const bool opens = rest.compare(0, kOpen.size(), kOpen) == 0;
    if (opens) pending_ = rest.substr(kOpen.size());
    state_ = opens || format_ == ReasoningFormat::kDeepSeekR1 ? State::kReasoning : State::kContent;
  }
  if (state_ == State::kReasoning) {
    const size_t close = pending_.find(kClose);
    if (close == std::string::npos) {
      const size_t hold = partial_marker_tail(pending_, kClose);
      out.reasoning = pending_.substr(0, pending_.size() - hold);
      pending_.erase(0, pending_.size() - hold);
      return out;
    }
    out.reasoning = pending_.substr(0, close);
    pending_.erase(0, close + kClose.size());
    state_ = State::kContent;
  }
  out.content.swap(pending_);
  pending_.clear();
  return out;
}

ReasoningSplitter::Parts ReasoningSplitter::flush() {
  Parts out;
  // A held tail that never became a tag: it belongs where it was. An answer
  // too short to decide (a prefix of "<think>") is content, unless R1.
  if (state_ == State::kReasoning || (state_ == State::kStart && format_ == ReasoningFormat::kDeepSeekR1)) {
    out.reasoning.swap(pending_);
  } else {
    out.content.swap(pending_);
  }
  pending_.clear();
  return out;
}

}  // namespace parallm
