// The GGUF block types beyond q8_0 / q4_0 / q4_k / q6_k through the whole
// binary: `parallm make-model --dtype T` then `parallm generate` on the file,
// for each; and files whose tensor table names a type parallm cannot run, or
// a type its shape or size contradicts, patched here at the byte level: a
// one-line error naming the type, exit 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/command_output.h"
#include "loader/gguf_reader.h"
#include "loader/model_file.h"
#include "safetensors_test_writer.h"
#include "util/check.h"

namespace parallm {
namespace {

const std::string kBin = PARALLM_BINARY;

const DType kNewTypes[] = {DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kIQ4_NL,
                           DType::kQ2_K, DType::kQ3_K, DType::kQ5_K, DType::kIQ4_XS};

// The smallest preset whose rows hold whole blocks of t.
std::string preset_for(DType t) { return dtype_block_elems(t) == 256 ? "tiny-256" : "tiny"; }

std::string make(const test::TempDir& dir, const std::string& preset, const std::string& dtype) {
  const std::string out = dir.file(preset + "-" + dtype + ".gguf");
  const auto r =
      test::run_command(kBin + " make-model --preset " + preset + " --dtype " + dtype + " --seed 3 --out " + out);
  EXPECT_EQ(r.code, 0) << r.err;
  return out;
}

// The type field of tensor `name` in a GGUF v3 file's tensor table: after
// the name (u64 length + bytes), n_dims (u32) and ne[n_dims] (u64 each).
void patch_type(std::vector<uint8_t>* bytes, const std::string& name, uint32_t type) {
  std::string key;
  for (uint64_t len = name.size(), i = 0; i < 8; ++i) key.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  key += name;
  auto it = std::search(bytes->begin(), bytes->end(), key.begin(), key.end(),
                        [](uint8_t a, char b) { return a == static_cast<uint8_t>(b); });
  ASSERT_NE(it, bytes->end()) << name;
  size_t pos = static_cast<size_t>(it - bytes->begin()) + key.size();
  uint32_t n_dims;
  std::memcpy(&n_dims, bytes->data() + pos, 4);
  pos += 4 + 8 * n_dims;
  std::memcpy(bytes->data() + pos, &type, 4);
}

void write(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

test::CommandResult generate(const std::string& model) {
  return test::run_command(kBin + " generate --model " + model + " --prompt 'Once upon a time' -n 6 --threads 2");
}

TEST(GgufTypes, EveryNewTypeIsWrittenLoadedAndGenerates) {
  if (!std::filesystem::exists(kBin)) GTEST_SKIP() << "parallm binary not built";
  test::TempDir dir;
  for (DType t : kNewTypes) {
    SCOPED_TRACE(dtype_name(t));
    const std::string path = make(dir, preset_for(t), dtype_name(t));
    auto m = load_gguf_model(path);
    EXPECT_EQ(m->get("blk.0.attn_q.weight").dtype, t);
    EXPECT_EQ(m->get("blk.1.ffn_down.weight").dtype, t);
    EXPECT_EQ(m->get("token_embd.weight").dtype, t);
    EXPECT_EQ(m->get("blk.0.attn_norm.weight").dtype, DType::kF32);
    const auto r = generate(path);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_FALSE(r.out.empty());
  }
}

// A file whose tensor `name` is patched to ggml type `type`: generate exits 2
// with one line that holds every fragment.
void expect_refused(const std::string& src, const std::string& name, uint32_t type,
                    const std::vector<std::string>& fragments) {
  std::vector<uint8_t> bytes = test::read_bytes(src);
  patch_type(&bytes, name, type);
  const std::string path = src + ".patched.gguf";
  write(path, bytes);
  const auto r = generate(path);
  EXPECT_EQ(r.code, 2) << r.err;
  for (const auto& f : fragments) EXPECT_NE(r.err.find(f), std::string::npos) << "want '" << f << "' in: " << r.err;
  EXPECT_EQ(r.err.find("Assertion"), std::string::npos) << r.err;
}

TEST(GgufTypes, UnsupportedTypesAreRefusedByName) {
  if (!std::filesystem::exists(kBin)) GTEST_SKIP() << "parallm binary not built";
  test::TempDir dir;
  const std::string tiny = make(dir, "tiny", "f32"), wide = make(dir, "tiny-256", "f32");
  // Q8_1 (9): 36 bytes per 32 values, less than the f32 data in place.
  expect_refused(tiny, "blk.0.attn_q.weight", 9, {"blk.0.attn_q.weight", "Q8_1", "does not support", "q5_k", "iq4_xs"});
  // IQ2_XXS (16): 66 bytes per 256.
  expect_refused(wide, "blk.1.ffn_up.weight", 16, {"blk.1.ffn_up.weight", "IQ2_XXS", "does not support"});
  // MXFP4 (39), and an id no ggml release has.
  expect_refused(tiny, "output.weight", 39, {"output.weight", "MXFP4"});
  expect_refused(tiny, "output.weight", 77, {"output.weight", "ggml type 77"});
}

TEST(GgufTypes, TypesTheShapeOrSizeContradictAreRefused) {
  if (!std::filesystem::exists(kBin)) GTEST_SKIP() << "parallm binary not built";
  test::TempDir dir;
  const std::string tiny = make(dir, "tiny", "f32");
  // Rows of 64 values cannot hold 256-value super-blocks.
  expect_refused(tiny, "blk.0.attn_k.weight", 13, {"blk.0.attn_k.weight", "Q5_K", "64", "256"});
  expect_refused(tiny, "blk.0.attn_k.weight", 23, {"IQ4_XS", "256"});
  // A q5_k file cut short: its last tensor extends past the end.
  const std::string q5k = make(dir, "tiny-256", "q5_k");
  std::vector<uint8_t> bytes = test::read_bytes(q5k);
  bytes.resize(bytes.size() - 100);
  write(dir.file("cut.gguf"), bytes);
  const auto r = generate(dir.file("cut.gguf"));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
  // The last tensor of a q4_1 file declared f32: its data would need 6.4
  // times the bytes left in the file.
  const std::string q41 = make(dir, "tiny", "q4_1");
  bytes = test::read_bytes(q41);
  std::string last;
  {
    GgufFile g(q41);
    uint64_t end = 0;
    for (const auto& t : g.tensors()) {
      if (t.offset >= end) end = t.offset, last = t.name;
    }
  }
  patch_type(&bytes, last, 0);
  write(dir.file("big.gguf"), bytes);
  const auto r2 = generate(dir.file("big.gguf"));
  EXPECT_EQ(r2.code, 2) << r2.err;
  EXPECT_NE(r2.err.find("'" + last + "'"), std::string::npos) << r2.err;
  EXPECT_NE(r2.err.find("truncated"), std::string::npos) << r2.err;
}

}  // namespace
}  // namespace parallm
