// GgufWriter -> GgufFile round trips: every metadata type, arrays, tensor
// infos and data, alignment, v2 and v3, and key copying.
#include "loader/gguf_writer.h"

#include <gtest/gtest.h>

#include "loader/gguf_reader.h"
#include "safetensors_test_writer.h"
#include "util/check.h"

namespace parallm {
namespace {

GgufWriter all_types_writer(uint32_t version = 3, size_t alignment = 32) {
  GgufWriter w(version, alignment);
  w.set_u8("t.u8", 250);
  w.set_i8("t.i8", -120);
  w.set_u16("t.u16", 65000);
  w.set_i16("t.i16", -32000);
  w.set_u32("t.u32", 4000000000u);
  w.set_i32("t.i32", -2000000000);
  w.set_u64("t.u64", 18000000000000000000ull);
  w.set_i64("t.i64", -9000000000000000000ll);
  w.set_f32("t.f32", 0.15625f);
  w.set_f64("t.f64", 1e-300);
  w.set_bool("t.bool", true);
  w.set_string("t.str", "h\xc3\xa9llo");
  w.set_string_array("t.strs", {"a", "", "\xe2\x96\x81the"});
  w.set_f32_array("t.f32s", {1.5f, -2.0f});
  w.set_f64_array("t.f64s", {0.25});
  w.set_int_array("t.i32s", GgufType::kI32, {1, -2, 3});
  w.set_int_array("t.u8s", GgufType::kU8, {0, 255});
  w.set_int_array("t.i64s", GgufType::kI64, {-5});
  w.set_string("t.str", "hello");  // replaced in place
  return w;
}

void expect_all_types(const GgufFile& g) {
  EXPECT_EQ(g.get_int("t.u8"), 250);
  EXPECT_EQ(g.get_int("t.i8"), -120);
  EXPECT_EQ(g.get_int("t.u16"), 65000);
  EXPECT_EQ(g.get_int("t.i16"), -32000);
  EXPECT_EQ(g.get_int("t.u32"), 4000000000ll);
  EXPECT_EQ(g.get_int("t.i32"), -2000000000);
  EXPECT_EQ(g.find("t.u64")->u, 18000000000000000000ull);
  EXPECT_EQ(g.get_int("t.i64"), -9000000000000000000ll);
  EXPECT_EQ(g.get_float("t.f32"), 0.15625);
  EXPECT_EQ(g.get_float("t.f64"), 1e-300);
  EXPECT_TRUE(g.get_bool("t.bool"));
  EXPECT_EQ(g.get_string("t.str"), "hello");
  EXPECT_EQ(g.get_string_array("t.strs"), (std::vector<std::string>{"a", "", "\xe2\x96\x81the"}));
  EXPECT_EQ(g.get_float_array("t.f32s"), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(g.get_float_array("t.f64s"), (std::vector<float>{0.25f}));
  EXPECT_EQ(g.get_int_array("t.i32s"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(g.get_int_array("t.u8s"), (std::vector<int64_t>{0, 255}));
  EXPECT_EQ(g.get_int_array("t.i64s"), (std::vector<int64_t>{-5}));
  EXPECT_EQ(g.find("t.u8s")->array_type, GgufType::kU8);
  size_t n_test_keys = 0;
  for (const auto& [key, v] : g.metadata()) n_test_keys += key.rfind("t.", 0) == 0;
  EXPECT_EQ(n_test_keys, 18u);
}

TEST(GgufWriter, RoundTripsEveryMetadataType) {
  for (uint32_t version : {2u, 3u}) {
    auto bytes = all_types_writer(version).to_bytes();
    GgufFile g(bytes.data(), bytes.size());
    EXPECT_EQ(g.version(), version);
    expect_all_types(g);
  }
}

TEST(GgufWriter, RoundTripsTensorsWithAlignment) {
  for (size_t alignment : {32u, 64u}) {
    GgufWriter w = all_types_writer(3, alignment);
    std::vector<float> a = {1, 2, 3, 4, 5, 6};
    w.add_tensor("a", DType::kF32, {2, 3}, test::f32_bytes(a));
    std::vector<uint8_t> q(2 * sizeof(BlockQ8_0));
    for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<uint8_t>(i * 7);
    w.add_tensor("q", DType::kQ8_0, {1, 2, 32}, q);
    w.add_tensor_raw("odd", 99, {5}, 3, [](uint8_t* d) { d[0] = 1, d[1] = 2, d[2] = 3; });
    auto bytes = w.to_bytes();
    EXPECT_EQ(bytes.size() % alignment, 0u);
    GgufFile g(bytes.data(), bytes.size());
    EXPECT_EQ(g.alignment(), alignment);
    ASSERT_EQ(g.tensors().size(), 3u);
    const GgufTensorInfo* ta = g.find_tensor("a");
    EXPECT_EQ(ta->ne, (std::vector<int64_t>{3, 2}));  // GGUF order: innermost first
    EXPECT_EQ(ta->ggml_type, 0u);
    EXPECT_EQ(std::memcmp(g.tensor_data(*ta), a.data(), 24), 0);
    const GgufTensorInfo* tq = g.find_tensor("q");
    EXPECT_EQ(tq->ne, (std::vector<int64_t>{32, 2, 1}));
    EXPECT_EQ(tq->nbytes, q.size());
    EXPECT_EQ(std::vector<uint8_t>(g.tensor_data(*tq), g.tensor_data(*tq) + q.size()), q);
    for (const auto& t : g.tensors()) {
      EXPECT_EQ(t.offset % alignment, 0u);
      EXPECT_EQ(static_cast<size_t>(g.tensor_data(t) - bytes.data()) % alignment, 0u);
    }
    const GgufTensorInfo* odd = g.find_tensor("odd");
    EXPECT_EQ(odd->ggml_type, 99u);
    EXPECT_EQ(g.tensor_data(*odd)[2], 3);
    expect_all_types(g);
  }
}

// header_bytes(): the file's own first bytes, up to where its data starts,
// without running a single fill.
TEST(GgufWriter, HeaderBytesArePrefixOfTheFileWithoutFilling) {
  GgufWriter w = all_types_writer(3, 64);
  w.add_tensor("a", DType::kF32, {2, 3}, test::f32_bytes({1, 2, 3, 4, 5, 6}));
  bool filled = false;
  w.add_tensor_raw("lazy", 0, {40}, 160, [&](uint8_t*) { filled = true; });
  const std::vector<uint8_t> head = w.header_bytes();
  EXPECT_FALSE(filled);
  const std::vector<uint8_t> all = w.to_bytes();
  EXPECT_TRUE(filled);
  ASSERT_EQ(head.size() + w.data_bytes(), all.size());
  EXPECT_TRUE(std::equal(head.begin(), head.end(), all.begin()));
  EXPECT_EQ(head.size() % 64, 0u);
}

TEST(GgufWriter, WritesFilesAndCopiesKeys) {
  test::TempDir dir;
  GgufWriter w = all_types_writer();
  w.add_tensor("a", DType::kF32, {4}, test::f32_bytes({1, 2, 3, 4}));
  w.write_file(dir.file("m.gguf"));
  EXPECT_EQ(test::read_bytes(dir.file("m.gguf")), w.to_bytes());
  GgufFile src(dir.file("m.gguf"));
  GgufWriter copy;
  for (const auto& [key, v] : src.metadata()) copy.copy_key(src, key);
  auto bytes = copy.to_bytes();
  GgufFile g(bytes.data(), bytes.size());
  expect_all_types(g);
  EXPECT_THROW(copy.copy_key(src, "no.such.key"), InputError);
  EXPECT_THROW(w.write_file(dir.file("no/such/dir/m.gguf")), InputError);
  EXPECT_THROW(GgufWriter().set_int_array("x", GgufType::kU8, {256}), InputError);
}

}  // namespace
}  // namespace parallm
