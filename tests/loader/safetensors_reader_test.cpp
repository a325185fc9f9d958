// SafetensorsFile: round trips through an independent writer, and every
// malformation the reader must turn into an InputError.
#include "loader/safetensors_reader.h"

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "safetensors_test_writer.h"
#include "util/check.h"

namespace parallm {
namespace {

using test::f32_bytes;
using test::safetensors_bytes;
using test::safetensors_raw;
using test::StTensor;

std::vector<StTensor> sample_tensors() {
  std::vector<uint8_t> f16, bf16;
  for (float x : {1.0f, -2.5f, 0.125f, 3.0f, 65504.0f, -0.0f}) {
    uint16_t h = fp32_to_fp16(x), b = fp32_to_bf16(x);
    f16.insert(f16.end(), {static_cast<uint8_t>(h), static_cast<uint8_t>(h >> 8)});
    bf16.insert(bf16.end(), {static_cast<uint8_t>(b), static_cast<uint8_t>(b >> 8)});
  }
  return {
      {"a.weight", "F32", {2, 3}, f32_bytes({1, 2, 3, 4, 5, 6})},
      {"b.half", "F16", {3, 2}, f16},
      {"c.bf16", "BF16", {6}, bf16},
      {"d.empty", "F32", {0, 4}, {}},
  };
}

std::string error_of(const std::vector<uint8_t>& bytes) {
  try {
    SafetensorsFile f(bytes.data(), bytes.size(), "t.safetensors");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(SafetensorsReader, RoundTripsDtypesShapesDataAndMetadata) {
  auto tensors = sample_tensors();
  auto bytes = safetensors_bytes(tensors, {{"format", "pt"}});
  SafetensorsFile f(bytes.data(), bytes.size());
  ASSERT_EQ(f.tensors().size(), 4u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  for (const auto& want : tensors) {
    const SafetensorsTensor* t = f.find(want.name);
    ASSERT_NE(t, nullptr) << want.name;
    EXPECT_EQ(t->shape, want.shape);
    EXPECT_EQ(t->nbytes, want.bytes.size());
    EXPECT_EQ(std::vector<uint8_t>(t->data, t->data + t->nbytes), want.bytes);
  }
  EXPECT_EQ(f.find("a.weight")->dtype, DType::kF32);
  EXPECT_EQ(f.find("b.half")->dtype, DType::kF16);
  EXPECT_EQ(f.find("c.bf16")->dtype, DType::kBF16);
  EXPECT_FLOAT_EQ(fp16_to_fp32(reinterpret_cast<const uint16_t*>(f.find("b.half")->data)[1]), -2.5f);
  EXPECT_EQ(f.find("missing"), nullptr);
}

TEST(SafetensorsReader, MapsAFileAndKeepsDataAliveAfterHandingTheMappingOver) {
  test::TempDir dir;
  auto tensors = sample_tensors();
  test::write_bytes(dir.file("m.safetensors"), safetensors_bytes(tensors));
  std::unique_ptr<MappedFile> keep;
  const uint8_t* data;
  {
    SafetensorsFile f(dir.file("m.safetensors"));
    data = f.find("a.weight")->data;
    keep = f.take_mapping();
  }
  float x[6];
  std::memcpy(x, data, sizeof(x));
  EXPECT_EQ(x[5], 6.0f);
  EXPECT_THROW(SafetensorsFile(dir.file("nope.safetensors")), InputError);
}

TEST(SafetensorsReader, EveryTruncationIsAnInputError) {
  auto bytes = safetensors_bytes(sample_tensors());
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    EXPECT_NE(error_of(cut), "") << "prefix of " << n << " bytes was accepted";
  }
  EXPECT_EQ(error_of(bytes), "");
}

TEST(SafetensorsReader, RejectsAbsurdAndOversizedHeaderLengths) {
  std::vector<uint8_t> b(16, 0);
  uint64_t n = 1ull << 60;
  std::memcpy(b.data(), &n, 8);
  EXPECT_NE(error_of(b).find("absurd header length"), std::string::npos);
  n = 9;  // one more than the 8 bytes that follow
  std::memcpy(b.data(), &n, 8);
  EXPECT_NE(error_of(b).find("truncated"), std::string::npos);
}

TEST(SafetensorsReader, RejectsMalformedHeaders) {
  struct Case {
    std::string header;
    size_t data_bytes;
    std::string expect;  // substring of the message
  };
  const std::vector<Case> cases = {
      {"not json", 0, "not a JSON object"},
      {"[1, 2]", 0, "not a JSON object"},
      {R"({"x": 3})", 0, "not described by an object"},
      {R"({"x": {"shape": [1], "data_offsets": [0, 4]}})", 4, "lacks dtype"},
      {R"({"x": {"dtype": "F32", "data_offsets": [0, 4]}})", 4, "lacks dtype, shape"},
      {R"({"x": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 4]}})", 4, "unknown dtype 'Q9'"},
      {R"({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4, "shape entry"},
      {R"({"x": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4, "shape entry"},
      {R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4, "two non-negative integers"},
      {R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, "4"]}})", 4, "two non-negative integers"},
      {R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 8]}})", 4, "outside"},
      {R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", 4, "outside"},
      {R"({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", 8, "need 8"},
      {R"({"x": {"dtype": "F16", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})", 4, "absurd shape"},
      {R"({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "y": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
       8, "overlap"},
      {R"({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
           "e": {"dtype": "F32", "shape": [0], "data_offsets": [8, 8]},
           "y": {"dtype": "F32", "shape": [1], "data_offsets": [12, 16]}})",
       16, "overlap"},
      {R"({"__metadata__": {"k": 1}})", 0, "not a string"},
      {R"({"__metadata__": [1]})", 0, "not an object"},
  };
  for (const auto& c : cases) {
    std::string err = error_of(safetensors_raw(c.header, c.data_bytes));
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.header << " -> '" << err << "'";
    EXPECT_NE(err.find("t.safetensors"), std::string::npos) << err;
  }
}

TEST(SafetensorsReader, NonFloatDtypesAreReadAndMarked) {
  // Quantized checkpoints keep I32 / F8_E4M3 parts: read, sized by their
  // element bytes, and marked non-float for the loader to place or refuse.
  auto bytes = safetensors_raw(R"({"q": {"dtype": "I32", "shape": [2], "data_offsets": [0, 8]},
                                   "f": {"dtype": "F8_E4M3", "shape": [3], "data_offsets": [8, 11]},
                                   "h": {"dtype": "BF16", "shape": [1], "data_offsets": [12, 14]}})",
                               16);
  SafetensorsFile f(bytes.data(), bytes.size(), "t.safetensors");
  ASSERT_NE(f.find("q"), nullptr);
  EXPECT_EQ(f.find("q")->st_dtype, "I32");
  EXPECT_FALSE(f.find("q")->is_float);
  EXPECT_EQ(f.find("f")->nbytes, 3u);
  EXPECT_FALSE(f.find("f")->is_float);
  EXPECT_TRUE(f.find("h")->is_float);
  EXPECT_EQ(f.find("h")->dtype, DType::kBF16);
  auto wrong = safetensors_raw(R"({"q": {"dtype": "I32", "shape": [2], "data_offsets": [0, 4]}})", 4);
  EXPECT_THROW(SafetensorsFile(wrong.data(), wrong.size(), "t.safetensors"), InputError);
}

TEST(SafetensorsReader, AcceptsHolesAndEmptyTensorsAnywhere) {
  auto ok = safetensors_raw(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]},
                               "e": {"dtype": "BF16", "shape": [0], "data_offsets": [0, 0]}})",
                            12);
  EXPECT_EQ(error_of(ok), "");
  EXPECT_EQ(safetensors_dtype_bytes("BF16"), 2u);
  EXPECT_EQ(safetensors_dtype_bytes("F64"), 8u);
  EXPECT_EQ(safetensors_dtype_bytes("nope"), 0u);
}

}  // namespace
}  // namespace parallm
