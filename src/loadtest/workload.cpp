// Request shaping; see workload.h.
#include "loadtest/workload.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "util/check.h"
#include "util/json_parse.h"

namespace parallm::loadtest {
namespace {

// Short, frequent English words: each is a single token (with its leading
// space) in GPT-2/Llama/Qwen-style BPE vocabularies.
constexpr const char* kWords[] = {
    "the",     "of",        "and",    "to",       "in",      "is",    "was",     "for",     "on",      "are",
    "with",    "as",        "at",     "be",       "this",    "have",  "from",    "or",      "one",     "had",
    "by",      "but",       "not",    "what",     "all",     "were",  "we",      "when",    "your",    "can",
    "said",    "there",     "use",    "an",       "each",    "which", "she",     "do",      "how",     "their",
    "if",      "will",      "up",     "other",    "about",   "out",   "many",    "then",    "them",    "these",
    "so",      "some",      "her",    "would",    "make",    "like",  "him",     "into",    "time",    "has",
    "look",    "two",       "more",   "write",    "go",      "see",   "number",  "no",      "way",     "could",
    "people",  "my",        "than",   "first",    "water",   "been",  "call",    "who",     "oil",     "its",
    "now",     "find",      "long",   "down",     "day",     "did",   "get",     "come",    "made",    "may",
    "part",    "over",      "new",    "sound",    "take",    "only",  "little",  "work",    "know",    "place",
    "year",    "live",      "me",     "back",     "give",    "most",  "very",    "after",   "thing",   "our",
    "just",    "name",      "good",   "man",      "think",   "say",   "great",   "where",   "help",    "through",
    "much",    "before",    "line",   "right",    "too",     "mean",  "old",     "any",     "same",    "tell",
    "boy",     "follow",    "came",   "want",     "show",    "also",  "around",  "form",    "three",   "small",
    "set",     "put",       "end",    "does",     "another", "well",  "large",   "must",    "big",     "even",
    "such",    "because",   "turn",   "here",     "why",     "ask",   "went",    "men",     "read",    "need",
    "land",    "different", "home",   "us",       "move",    "try",   "kind",    "hand",    "picture", "again",
    "change",  "off",       "play",   "spell",    "air",     "away",  "animal",  "house",   "point",   "page",
    "letter",  "mother",    "answer", "found",    "study",   "still", "learn",   "should",  "world",   "high",
    "every",   "near",      "add",    "food",     "between", "own",   "below",   "country", "plant",   "last",
    "school",  "father",    "keep",   "tree",     "never",   "start", "city",    "earth",   "eye",     "light",
    "thought", "head",      "under",  "story",    "saw",     "left",  "few",     "while",   "along",   "might",
    "close",   "something", "seem",   "next",     "hard",    "open",  "example", "begin",   "life",    "always",
    "those",   "both",      "paper",  "together", "got",     "group", "often",   "run"};
constexpr size_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);

int64_t count_words(const std::string& text) {
  std::istringstream in(text);
  std::string w;
  int64_t n = 0;
  while (in >> w) ++n;
  return n;
}

int64_t draw(const IntRange& r, uint64_t& state) {
  if (r.min == r.max) return r.min;
  const uint64_t span = static_cast<uint64_t>(r.max - r.min + 1);
  return r.min + static_cast<int64_t>(splitmix64(state) % span);
}

}  // namespace

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::string word_prompt(int64_t n_words, uint64_t& rng_state) {
  std::string text;
  text.reserve(static_cast<size_t>(n_words) * 6);
  for (int64_t i = 0; i < n_words; ++i) {
    if (i > 0) text.push_back(' ');
    text += kWords[splitmix64(rng_state) % kNumWords];
  }
  return text;
}

std::vector<DatasetEntry> load_dataset(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError("--dataset " + path + ": cannot open file");
  std::vector<DatasetEntry> entries;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = "--dataset " + path + ":" + std::to_string(line_no) + ": ";
    const auto parsed = try_parse_json<nlohmann::json>(line, JsonLimits{kRequestJsonDepth});
    if (!parsed || !parsed->is_object()) throw InputError(where + "not a JSON object");
    const nlohmann::json& j = *parsed;
    DatasetEntry e;
    if (j.contains("prompt") && j["prompt"].is_string()) {
      e.prompt = j["prompt"].get<std::string>();
      e.prompt_words = count_words(e.prompt);
    } else if (j.contains("messages") && j["messages"].is_array() && !j["messages"].empty()) {
      e.messages = j["messages"];
      for (const auto& m : e.messages) {
        if (!m.is_object() || !m.contains("content") || !m["content"].is_string()) {
          throw InputError(where + "each message needs a string \"content\"");
        }
        e.prompt_words += count_words(m["content"].get<std::string>());
      }
    } else if (j.contains("conversations") && j["conversations"].is_array()) {
      for (const auto& turn : j["conversations"]) {
        if (turn.is_object() && turn.value("from", "") == "human" && turn.contains("value") &&
            turn["value"].is_string()) {
          e.prompt = turn["value"].get<std::string>();
          break;
        }
      }
      if (e.prompt.empty()) throw InputError(where + "no human turn in \"conversations\"");
      e.prompt_words = count_words(e.prompt);
    } else {
      throw InputError(where + "needs \"prompt\" (string), \"messages\" (array) or \"conversations\"");
    }
    for (const char* key : {"output_len", "max_tokens"}) {
      if (j.contains(key)) {
        if (!j[key].is_number_integer() || j[key].get<int64_t>() < 1) {
          throw InputError(where + "\"" + key + "\" must be a positive integer");
        }
        e.output_len = j[key].get<int64_t>();
      }
    }
    entries.push_back(std::move(e));
  }
  if (entries.empty()) throw InputError("--dataset " + path + ": no requests in file");
  return entries;
}

Workload::Workload(const BenchOptions& options, std::string model)
    : options_(options),
      model_(std::move(model)),
      path_(endpoint_path(options.url, options.endpoint == Endpoint::kChat)) {
  if (!options.dataset_path.empty()) {
    dataset_ = load_dataset(options.dataset_path);
    order_.resize(dataset_.size());
    for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
    uint64_t state = options.seed ^ 0xDA7A5E7ull;
    for (size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[splitmix64(state) % i]);
  }
}

RequestLengths request_lengths(uint64_t seed, int level, int64_t index, const IntRange& input_len,
                               const IntRange& output_len) {
  uint64_t state = seed * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(level) * 0xBF58476D1CE4E5B9ull ^
                   (static_cast<uint64_t>(index) + 1) * 0xD1B54A32D192ED03ull;
  splitmix64(state);
  RequestLengths r;
  r.input = draw(input_len, state);
  r.output = draw(output_len, state);
  return r;
}

nlohmann::json Workload::body(int level, int64_t index, int64_t* prompt_tokens_est, int64_t* max_tokens) const {
  uint64_t state = options_.seed * 0x100000001B3ull + static_cast<uint64_t>(level) * 0x9E37ull +
                   static_cast<uint64_t>(index) * 0x2545F4914F6CDD1Dull;
  splitmix64(state);
  const RequestLengths lengths = request_lengths(options_.seed, level, index, options_.input_len, options_.output_len);
  nlohmann::json body = nlohmann::json::object();
  if (!model_.empty()) body["model"] = model_;
  std::string prompt;
  nlohmann::json messages;
  int64_t out_len = 0;
  if (!dataset_.empty()) {
    const DatasetEntry& e = dataset_[order_[static_cast<size_t>(index) % order_.size()]];
    prompt = e.prompt;
    messages = e.messages;
    *prompt_tokens_est = e.prompt_words;
    out_len = e.output_len;
  } else {
    prompt = word_prompt(lengths.input, state);
    *prompt_tokens_est = lengths.input;
  }
  if (out_len == 0) out_len = lengths.output;
  *max_tokens = out_len;
  if (options_.endpoint == Endpoint::kChat) {
    if (messages.is_null()) messages = nlohmann::json::array({{{"role", "user"}, {"content", prompt}}});
    body["messages"] = messages;
  } else {
    if (!messages.is_null()) {  // completions take text: join the turns
      for (const auto& m : messages) prompt += (prompt.empty() ? "" : "\n") + m["content"].get<std::string>();
    }
    body["prompt"] = prompt;
  }
  body["max_tokens"] = out_len;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  if (options_.ignore_eos) body["ignore_eos"] = true;
  if (!options_.extra_body.empty()) {
    // Checked by validate_options; its fields win (a benchmark of constraints, sampling fields).
    const nlohmann::json extra = nlohmann::json::parse(options_.extra_body);
    for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
  }
  return body;
}

PreparedRequest Workload::make(int level, int64_t index) const {
  PreparedRequest r;
  const std::string json = body(level, index, &r.prompt_tokens_est, &r.max_tokens).dump();
  std::string& out = r.http_bytes;
  out.reserve(json.size() + 256);
  out += "POST " + path_ + " HTTP/1.1\r\nHost: " + options_.url.authority() + "\r\n";
  out += "User-Agent: parallm-bench\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\n";
  if (!options_.api_key.empty()) out += "Authorization: Bearer " + options_.api_key + "\r\n";
  out += "Content-Length: " + std::to_string(json.size()) + "\r\n\r\n";
  out += json;
  return r;
}

}  // namespace parallm::loadtest
