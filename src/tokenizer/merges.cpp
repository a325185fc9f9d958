// Ranked merge registration (see merges.h).
#include "tokenizer/merges.h"

#include <string>

#include "util/check.h"

namespace parallm {

void add_merge(TokenizerData& data, std::string_view left, std::string_view right, int32_t rank) {
  auto find = [&](std::string_view piece) {
    auto it = data.piece_to_id.find(piece);
    if (it == data.piece_to_id.end()) {
      throw InputError("tokenizer merge " + std::to_string(rank) + " ('" + std::string(left) + "' + '" +
                       std::string(right) + "') names a piece missing from the vocabulary");
    }
    return it->second;
  };
  const int32_t left_id = find(left);
  const int32_t right_id = find(right);
  std::string merged(left);
  merged += right;
  const int32_t merged_id = find(merged);
  data.merges.emplace(merge_key(left_id, right_id), MergeInfo{rank, merged_id});
}

void add_merge_line(TokenizerData& data, std::string_view line, int32_t rank) {
  const size_t space = line.size() > 1 ? line.find(' ', 1) : std::string_view::npos;
  if (space == std::string_view::npos) {
    throw InputError("tokenizer merge " + std::to_string(rank) + " ('" + std::string(line) +
                     "') is not two pieces separated by a space");
  }
  add_merge(data, line.substr(0, space), line.substr(space + 1), rank);
}

}  // namespace parallm
