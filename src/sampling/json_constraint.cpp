#include "sampling/json_constraint.h"

namespace parallm {
namespace {

bool is_ws(unsigned char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_hex(unsigned char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

}  // namespace

bool JsonPrefix::accepts(const std::string& bytes) const {
  JsonPrefix copy = *this;
  for (unsigned char c : bytes) {
    if (!copy.feed(c)) return false;
  }
  return true;
}

bool JsonPrefix::feed(const std::string& bytes) {
  if (!accepts(bytes)) return false;
  for (unsigned char c : bytes) feed(c);
  return true;
}

bool JsonPrefix::end_value() {
  mode_ = depth_ == 0 ? Mode::kDone : Mode::kAfterValue;
  return true;
}

bool JsonPrefix::close(unsigned char c) {
  if (depth_ == 0 || stack_[depth_ - 1] != (c == '}' ? '{' : '[')) return false;
  --depth_;
  return end_value();
}

bool JsonPrefix::value_start(unsigned char c) {
  switch (c) {
    case '{':
    case '[':
      if (depth_ == kMaxDepth) return false;
      stack_[depth_++] = static_cast<char>(c);
      mode_ = c == '{' ? Mode::kKeyOrEnd : Mode::kValueOrEnd;
      return true;
    case '"':
      string_is_key_ = false;
      mode_ = Mode::kString;
      return true;
    case 't':
      lit_ = "true";
      break;
    case 'f':
      lit_ = "false";
      break;
    case 'n':
      lit_ = "null";
      break;
    default:
      if (c == '-' || is_digit(c)) {
        mode_ = Mode::kNumber;
        num_ = c == '-' ? Num::kSign : c == '0' ? Num::kZero : Num::kInt;
        return true;
      }
      return false;
  }
  mode_ = Mode::kLiteral;
  lit_pos_ = 1;
  return true;
}

bool JsonPrefix::feed(unsigned char c) {
  const bool in_string = mode_ == Mode::kString || mode_ == Mode::kEscape || mode_ == Mode::kUnicode;
  if (!in_string && is_ws(c)) {
    const int limit = mode_ == Mode::kStart ? kMaxLeadingWhitespace : kMaxWhitespaceRun;
    if (mode_ == Mode::kDone || mode_ == Mode::kLiteral || ws_run_ >= limit) return false;
    if (mode_ == Mode::kNumber) {  // whitespace ends a number, where one may end
      if (num_ != Num::kZero && num_ != Num::kInt && num_ != Num::kFrac && num_ != Num::kExpDigits) return false;
      mode_ = Mode::kAfterValue;
    }
    ++ws_run_;
    return true;
  }
  ws_run_ = 0;
  switch (mode_) {
    case Mode::kStart:
      if (is_ws(c)) return true;
      if (c != '{') return false;
      return value_start(c);
    case Mode::kDone:
      return false;  // nothing after the object (the sampler ends generation there)
    case Mode::kValue:
      if (is_ws(c)) return true;
      return value_start(c);
    case Mode::kValueOrEnd:
      if (is_ws(c)) return true;
      if (c == ']') return close(c);
      return value_start(c);
    case Mode::kKeyOrEnd:
    case Mode::kKey:
      if (is_ws(c)) return true;
      if (c == '}' && mode_ == Mode::kKeyOrEnd) return close(c);
      if (c != '"') return false;
      string_is_key_ = true;
      mode_ = Mode::kString;
      return true;
    case Mode::kColon:
      if (is_ws(c)) return true;
      if (c != ':') return false;
      mode_ = Mode::kValue;
      return true;
    case Mode::kAfterValue:
      if (is_ws(c)) return true;
      if (c == ',') {
        mode_ = in_object() ? Mode::kKey : Mode::kValue;
        return true;
      }
      if (c == '}' || c == ']') return close(c);
      return false;
    case Mode::kString:
      if (c == '"') {
        if (string_is_key_) {
          mode_ = Mode::kColon;
          return true;
        }
        return end_value();
      }
      if (c == '\\') {
        mode_ = Mode::kEscape;
        return true;
      }
      return c >= 0x20;  // control characters must be escaped
    case Mode::kEscape:
      if (c == 'u') {
        mode_ = Mode::kUnicode;
        hex_left_ = 4;
        return true;
      }
      if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
        mode_ = Mode::kString;
        return true;
      }
      return false;
    case Mode::kUnicode:
      if (!is_hex(c)) return false;
      if (--hex_left_ == 0) mode_ = Mode::kString;
      return true;
    case Mode::kLiteral:
      if (static_cast<unsigned char>(lit_[lit_pos_]) != c) return false;
      if (lit_[++lit_pos_] == '\0') return end_value();
      return true;
    case Mode::kNumber: {
      const bool digit = is_digit(c);
      switch (num_) {
        case Num::kSign:
          if (!digit) return false;
          num_ = c == '0' ? Num::kZero : Num::kInt;
          return true;
        case Num::kZero:
        case Num::kInt:
          if (digit && num_ == Num::kInt) return true;
          if (c == '.') return num_ = Num::kDot, true;
          if (c == 'e' || c == 'E') return num_ = Num::kExp, true;
          break;  // the number may end here
        case Num::kDot:
          if (!digit) return false;
          num_ = Num::kFrac;
          return true;
        case Num::kFrac:
          if (digit) return true;
          if (c == 'e' || c == 'E') return num_ = Num::kExp, true;
          break;
        case Num::kExp:
          if (c == '+' || c == '-') return num_ = Num::kExpSign, true;
          [[fallthrough]];
        case Num::kExpSign:
          if (!digit) return false;
          num_ = Num::kExpDigits;
          return true;
        case Num::kExpDigits:
          if (digit) return true;
          break;
      }
      // The number ended: c must follow a value (the top level is an object,
      // so a number is always inside one).
      JsonPrefix after = *this;
      after.mode_ = Mode::kAfterValue;
      if (!after.feed(c)) return false;
      *this = after;
      return true;
    }
  }
  return false;
}

}  // namespace parallm
