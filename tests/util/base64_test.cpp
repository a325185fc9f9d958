// base64_encode against RFC 4648's test vectors (section 10), and every
// byte value at each offset of a 3-byte group through a decoder written from
// the RFC's alphabet table.
#include "util/base64.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace parallm {
namespace {

TEST(Base64, Rfc4648Vectors) {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [in, out] : vectors) EXPECT_EQ(base64_encode(in, std::string(in).size()), out) << in;
}

// Decodes by the RFC's alphabet table (section 4): every byte value survives
// the round trip at every offset within a 3-byte group.
std::vector<uint8_t> decode(const std::string& s) {
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    const size_t v = alphabet.find(c);
    EXPECT_NE(v, std::string::npos) << c;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>((acc >> bits) & 0xff));
    }
  }
  return out;
}

TEST(Base64, EveryByteRoundTrips) {
  for (size_t lead = 0; lead < 3; ++lead) {
    std::vector<uint8_t> in(lead, 0x55);
    for (int b = 0; b < 256; ++b) in.push_back(static_cast<uint8_t>(b));
    const std::string enc = base64_encode(in.data(), in.size());
    EXPECT_EQ(enc.size() % 4, 0u);
    EXPECT_EQ(decode(enc), in) << lead;
  }
}

}  // namespace
}  // namespace parallm
