// StreamDecoder: multi-byte characters split across byte-fallback and
// byte-level tokens come out whole, never as broken UTF-8; the concatenated
// stream equals decode() of the same ids.
#include <gtest/gtest.h>

#include <algorithm>

#include "test_util.h"
#include "tokenizer/unicode.h"

namespace parallm::test {
namespace {

std::string stream_all(const Tokenizer& tok, const std::vector<int32_t>& ids,
                       std::vector<std::string>* chunks = nullptr) {
  StreamDecoder stream(tok);
  std::string out;
  for (int32_t id : ids) {
    std::string chunk = stream.push(id);
    EXPECT_EQ(utf8_sanitize(chunk), chunk) << "chunk is not valid UTF-8";
    if (chunks) chunks->push_back(chunk);
    out += chunk;
  }
  out += stream.flush();
  return out;
}

TEST(StreamDecoder, ByteFallbackPiecesJoinIntoOneCharacter) {
  const auto& tok = cached_tokenizer(shared_path("models/stories260K/tok512.bin"));
  // BOS, then U+6211 as three byte-fallback tokens, then " ok".
  std::vector<int32_t> ids = tok.encode("\xE6\x88\x91 ok", true);
  ASSERT_EQ(ids[0], 1);
  std::vector<std::string> chunks;
  EXPECT_EQ(stream_all(tok, ids, &chunks), tok.decode(ids));
  EXPECT_EQ(tok.decode(ids), "\xE6\x88\x91 ok");
  // The first two byte tokens produce nothing; the third completes the character.
  const auto whole = std::find(chunks.begin(), chunks.end(), "\xE6\x88\x91");
  EXPECT_NE(whole, chunks.end());
}

TEST(StreamDecoder, ByteLevelEmojiAcrossTokens) {
  const auto& tok = cached_tokenizer(shared_path("models/vocab/ggml-vocab-gpt-2.gguf"));
  const std::string text = "I \xF0\x9F\xA6\x99 llamas \xE6\x88\x91\xE6\x83\xB3";
  const auto ids = tok.encode(text, false);
  EXPECT_EQ(stream_all(tok, ids), text);
}

TEST(StreamDecoder, IncompleteSequenceIsHeldThenFlushedAsReplacement) {
  const auto& tok = cached_tokenizer(shared_path("models/stories260K/tok512.bin"));
  StreamDecoder stream(tok);
  EXPECT_EQ(stream.push(0xE2 + 3), "");
  EXPECT_EQ(stream.push(0x82 + 3), "");
  EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD\xEF\xBF\xBD");
  // A lead byte followed by ASCII: the broken byte becomes U+FFFD at once.
  EXPECT_EQ(stream.push(0xE2 + 3), "");
  EXPECT_EQ(stream.push('A' + 3),
            "\xEF\xBF\xBD"
            "A");
}

TEST(StreamDecoder, LeadingSpaceStrippedOnlyAfterBos) {
  const auto& tok = cached_tokenizer(shared_path("models/stories260K/tok512.bin"));
  const auto ids = tok.encode("Once upon a time", true);  // 1 403 407 261 378
  EXPECT_EQ(stream_all(tok, ids), "Once upon a time");
  // Generated tokens streamed without BOS keep their spaces.
  const std::vector<int32_t> tail(ids.begin() + 2, ids.end());
  EXPECT_EQ(stream_all(tok, tail), " upon a time");
}

}  // namespace
}  // namespace parallm::test
