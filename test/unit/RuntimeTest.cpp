//===- RuntimeTest.cpp - loaders, checkpoints and initialization ----------===//
#include "runtime/abi/abi.h"
#include "runtime/formats/data.h"
#include "runtime/formats/files.h"
#include "runtime/text.h"
#include "runtime/formats/hf_io.h"
#include "runtime/program/model.h"
#include "runtime/trainer/peaks.h"
#include "runtime/formats/safetensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

using namespace shardc::runtime;

namespace {

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "/shardc_" + name;
}

template <typename Token>
void writeTokenFile(const std::string &path, int32_t magic, int32_t version,
                    int32_t declared, const std::vector<Token> &tokens) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = declared;
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(header.data()), 1024);
  out.write(reinterpret_cast<const char *>(tokens.data()),
            std::streamsize(sizeof(Token) * tokens.size()));
}
void writeTokenFile(const std::string &path, int32_t magic, int32_t version,
                    int32_t declared, const std::vector<uint16_t> &tokens) {
  writeTokenFile<uint16_t>(path, magic, version, declared, tokens);
}

std::string errorOf(const std::function<void()> &fn) {
  try {
    fn();
  } catch (const std::runtime_error &e) {
    return e.what();
  }
  return "";
}

TEST(TokenData, BatchLayoutFollowsLlmc) {
  std::vector<uint16_t> tokens(100);
  for (int k = 0; k < 100; ++k)
    tokens[k] = uint16_t(k);
  std::string path = tempPath("tokens.bin");
  writeTokenFile(path, 20240520, 1, 100, tokens);
  TokenData d = TokenData::open(path, 1000);
  const int64_t B = 2, T = 4;
  std::vector<int32_t> x(B * T), y(B * T);
  d.batch(/*step=*/3, B, 0, B, T, x.data(), y.data());
  // Row b of step s starts at token (s*B + b) * T; y is x shifted by one.
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      EXPECT_EQ(x[b * T + t], (3 * B + b) * T + t);
      EXPECT_EQ(y[b * T + t], (3 * B + b) * T + t + 1);
    }
  // A data-parallel rank's rows are the same rows of the global batch.
  std::vector<int32_t> x1(T), y1(T);
  d.batch(3, B, /*firstRow=*/1, 1, T, x1.data(), y1.data());
  EXPECT_EQ(std::vector<int32_t>(x.begin() + T, x.end()), x1);
}

TEST(TokenData, BadHeadersAreNamed) {
  std::string path = tempPath("bad.bin");
  writeTokenFile(path, 12345, 1, 3, {1, 2, 3});
  EXPECT_NE(errorOf([&] { TokenData::open(path, 10); }).find("bad header: magic 12345"),
            std::string::npos);
  writeTokenFile(path, 20240520, 7, 3, {1, 2, 3});
  EXPECT_NE(errorOf([&] { TokenData::open(path, 10); }).find("version 7"),
            std::string::npos);
  writeTokenFile(path, 20240520, 1, 5, {1, 2, 3});
  EXPECT_NE(errorOf([&] { TokenData::open(path, 10); }).find("declares 5 tokens"),
            std::string::npos);
  // A token outside the vocabulary: found when its batch is read.
  writeTokenFile(path, 20240520, 1, 3, {1, 12, 3});
  TokenData d = TokenData::open(path, 10);
  std::vector<int32_t> x(2), y(2);
  EXPECT_NE(errorOf([&] { d.batch(0, 1, 0, 1, 2, x.data(), y.data()); })
                .find("token 12 at position 1 is outside the model's vocabulary of 10"),
            std::string::npos);
}

// Llama 3's format: uint32 tokens, ids above 65535.
TEST(TokenData, Llama3Format) {
  std::vector<uint32_t> tokens = {70000, 128255, 5, 65536, 9};
  std::string path = tempPath("llama3.bin");
  writeTokenFile<uint32_t>(path, 20240801, 7, 5, tokens);
  TokenData d = TokenData::open(path, 128256);
  std::vector<int32_t> x(4), y(4);
  d.batch(0, 1, 0, 1, 4, x.data(), y.data());
  EXPECT_EQ(x, (std::vector<int32_t>{70000, 128255, 5, 65536}));
  EXPECT_EQ(y, (std::vector<int32_t>{128255, 5, 65536, 9}));
  writeTokenFile<uint32_t>(path, 20240801, 7, 6, tokens);
  EXPECT_NE(errorOf([&] { TokenData::open(path, 128256); }).find("declares 6 tokens"),
            std::string::npos);
}

// Shards read as one stream: every batch equals the one file's, across
// the boundaries; shards of two formats and an empty glob are refused.
TEST(TokenData, ShardsAreOneStream) {
  std::vector<uint16_t> all(103);
  for (int k = 0; k < 103; ++k)
    all[size_t(k)] = uint16_t((k * 7) % 50);
  std::string one = tempPath("one.bin");
  writeTokenFile(one, 20240520, 1, 103, all);
  std::string dir = ::testing::TempDir() + "/shardc_shards";
  std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str());
  size_t cuts[] = {0, 30, 31, 103};
  for (int s = 0; s < 3; ++s)
    writeTokenFile(dir + "/part_00000" + std::to_string(s + 1) + ".bin", 20240520,
                   1, int32_t(cuts[s + 1] - cuts[s]),
                   std::vector<uint16_t>(all.begin() + long(cuts[s]),
                                         all.begin() + long(cuts[s + 1])));
  TokenData a = TokenData::open(one, 50);
  for (std::string spec : {dir, dir + "/part_*.bin",
                           dir + "/part_000001.bin," + dir + "/part_00000[23].bin"}) {
    TokenData b = TokenData::open(spec, 50);
    ASSERT_EQ(b.files().size(), 3u) << spec;
    EXPECT_EQ(b.size(), 103);
    for (int64_t step = 0; step < 12; ++step) {
      std::vector<int32_t> xa(3 * 8), ya(3 * 8), xb(3 * 8), yb(3 * 8);
      a.batch(step, 3, 0, 3, 8, xa.data(), ya.data());
      b.batch(step, 3, 0, 3, 8, xb.data(), yb.data());
      EXPECT_EQ(xa, xb);
      EXPECT_EQ(ya, yb);
    }
  }
  writeTokenFile<uint32_t>(dir + "/part_000004.bin", 20240801, 7, 2, {1, 2});
  EXPECT_NE(errorOf([&] { TokenData::open(dir, 50); })
                .find("part_000004.bin is in the Llama 3 (uint32 tokens) format but"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { TokenData::open(dir + "/nothing_*.bin", 50); })
                .find("the pattern matches no file"),
            std::string::npos);
}

// --shuffle: each pass over the data reads every window once, in an order
// the seed fixes (another seed, another order).
TEST(TokenData, ShuffleIsASeededPermutationPerPass) {
  std::vector<uint16_t> tokens(1 + 37 * 4);
  for (size_t k = 0; k < tokens.size(); ++k)
    tokens[k] = uint16_t(k % 1000);
  std::string path = tempPath("shuffle.bin");
  writeTokenFile(path, 20240520, 1, int32_t(tokens.size()), tokens);
  auto order = [&](uint64_t seed, int64_t pass) {
    TokenData d = TokenData::open(path, 1000);
    d.setShuffle(true, seed);
    std::vector<int32_t> firsts;
    for (int64_t row = pass * 37; row < (pass + 1) * 37; ++row) {
      std::vector<int32_t> x(4), y(4);
      d.batch(row, 1, 0, 1, 4, x.data(), y.data());
      firsts.push_back(x[0] / 4);
    }
    return firsts;
  };
  std::vector<int32_t> a = order(1, 0), sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int w = 0; w < 37; ++w)
    EXPECT_EQ(sorted[size_t(w)], w);
  EXPECT_EQ(order(1, 0), a);
  EXPECT_NE(order(2, 0), a);
  EXPECT_NE(order(1, 1), a); // the next pass: another order
}

TEST(Safetensors, RoundTripAndHeader) {
  std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, 8.0f};
  std::vector<float> b = {42.0f};
  std::string path = tempPath("w.safetensors");
  writeSafetensors(path, {{"x.weight", {2, 3}, a.data()}, {"y", {1}, b.data()}});
  auto loaded = readSafetensors(path);
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded["x.weight"].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(loaded["x.weight"].data, a);
  EXPECT_EQ(loaded["y"].data, b);
  // The data section starts 8-byte aligned after the header, as the format
  // requires.
  std::ifstream in(path, std::ios::binary);
  uint64_t headerSize = 0;
  in.read(reinterpret_cast<char *>(&headerSize), 8);
  EXPECT_EQ(headerSize % 8, 0u);
}

TEST(Safetensors, TruncatedFileIsAnError) {
  std::vector<float> a(64, 1.0f);
  std::string path = tempPath("t.safetensors");
  writeSafetensors(path, {{"w", {64}, a.data()}});
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  for (size_t keep : {size_t(3), size_t(20), bytes.size() - 4}) {
    std::ofstream(path, std::ios::binary).write(bytes.data(), keep);
    EXPECT_NE(errorOf([&] { readSafetensors(path); }).find("not a valid safetensors"),
              std::string::npos)
        << "kept " << keep << " bytes";
  }
}

TEST(Safetensors, ReadsAnElementRange) {
  std::vector<float> a(1000);
  for (size_t k = 0; k < a.size(); ++k)
    a[k] = float(k) * 0.5f;
  std::string path = tempPath("r.safetensors");
  std::vector<uint64_t> offsets = writeSafetensors(
      path, {{"a", {10, 100}, a.data()}, {"b", {1}, a.data()}});
  SafetensorsFile f(path);
  const SafetensorsEntry *e = f.find("a");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->begin, offsets[0]);
  EXPECT_EQ(e->end - e->begin, 4000u);
  std::vector<float> got(150);
  f.readF32("a", 420, 150, got.data());
  EXPECT_EQ(got, std::vector<float>(a.begin() + 420, a.begin() + 570));
  EXPECT_NE(errorOf([&] { f.readF32("a", 900, 101, got.data()); })
                .find("outside tensor 'a'"),
            std::string::npos);
}

TEST(HfIo, ByteSizesAsTransformersReadsThem) {
  EXPECT_EQ(parseByteSize("--max-shard-size", "5GB"), 5000000000);
  EXPECT_EQ(parseByteSize("--max-shard-size", "500MB"), 500000000);
  EXPECT_EQ(parseByteSize("--max-shard-size", "10KB"), 10000);
  EXPECT_EQ(parseByteSize("--max-shard-size", "10kb"), 10000);
  EXPECT_EQ(parseByteSize("--max-shard-size", "2GiB"), int64_t(2) << 30);
  EXPECT_EQ(parseByteSize("--max-shard-size", "1048576"), 1048576);
  for (const char *bad : {"", "GB", "0", "-5MB", "5XB", "5 GB", "1e30"})
    EXPECT_NE(errorOf([&] { parseByteSize("--max-shard-size", bad); })
                  .find("--max-shard-size expects a size"),
              std::string::npos)
        << "'" << bad << "'";
}

TEST(HfIo, CheckpointForms) {
  std::vector<float> a = {1, 2, 3, 4}, b = {5, 6};
  std::string dir = tempPath("hf_ckpt");
  removeTree(dir);
  makeDirectories(dir + "/one");
  makeDirectories(dir + "/split");
  writeSafetensors(dir + "/one/model.safetensors",
                   {{"a", {2, 2}, a.data()}, {"b", {2}, b.data()}});
  writeSafetensors(dir + "/split/model-00001-of-00002.safetensors",
                   {{"a", {2, 2}, a.data()}});
  writeSafetensors(dir + "/split/model-00002-of-00002.safetensors",
                   {{"b", {2}, b.data()}});
  std::string index = dir + "/split/model.safetensors.index.json";
  auto writeIndex = [&](const std::string &map) {
    writeFileDurably(index, "{\"metadata\": {\"total_size\": 24}, "
                            "\"weight_map\": {" + map + "}}");
  };
  writeIndex("\"a\": \"model-00001-of-00002.safetensors\", "
             "\"b\": \"model-00002-of-00002.safetensors\"");
  for (const std::string &path :
       {dir + "/one", dir + "/one/model.safetensors", dir + "/split", index}) {
    HfCheckpoint ckpt(path);
    const SafetensorsFile *fa = ckpt.find("a"), *fb = ckpt.find("b");
    ASSERT_TRUE(fa && fb) << path;
    EXPECT_EQ(ckpt.find("c"), nullptr);
    std::vector<float> got(2);
    fa->readF32("a", 2, 2, got.data());
    EXPECT_EQ(got, (std::vector<float>{3, 4})) << path;
    fb->readF32("b", 0, 2, got.data());
    EXPECT_EQ(got, b) << path;
  }
  // The index maps b to the file without it; then to a missing file.
  writeIndex("\"a\": \"model-00001-of-00002.safetensors\", "
             "\"b\": \"model-00001-of-00002.safetensors\"");
  EXPECT_NE(errorOf([&] { HfCheckpoint{dir + "/split"}; })
                .find("model-00001-of-00002.safetensors: has no tensor 'b', "
                      "which " + index + " maps to it"),
            std::string::npos);
  writeIndex("\"a\": \"model-00003-of-00002.safetensors\"");
  EXPECT_NE(errorOf([&] { HfCheckpoint{index}; })
                .find("model-00003-of-00002.safetensors: missing: " + index),
            std::string::npos);
  writeIndex("\"a\": \"../one/model.safetensors\"");
  EXPECT_NE(errorOf([&] { HfCheckpoint{index}; }).find("is not a file name"),
            std::string::npos);
  writeFileDurably(index, "{\"metadata\": {}}");
  EXPECT_NE(errorOf([&] { HfCheckpoint{index}; }).find("no \"weight_map\""),
            std::string::npos);
  writeFileDurably(index, "{\"weight_map\": ");
  EXPECT_NE(errorOf([&] { HfCheckpoint{index}; }).find("not valid JSON"),
            std::string::npos);
  makeDirectories(dir + "/empty");
  EXPECT_NE(errorOf([&] { HfCheckpoint{dir + "/empty"}; })
                .find("a directory without model.safetensors"),
            std::string::npos);
  removeTree(dir);
}

TEST(Files, DurableFileIsAllOrNothing) {
  std::string path = tempPath("durable.txt");
  removeTree(path + ".tmp.999999999-not-a-pid"); // from an earlier run
  writeFileDurably(path, "old");
  {
    DurableFile f(path);
    f.write("new, never committed", 20);
  } // an error before commit: the temporary goes, the old file stays
  EXPECT_EQ(readTextFile(path), "old");
  std::string dir = parentDirectory(path);
  for (const std::string &name : listDirectory(dir))
    EXPECT_EQ(name.find("durable.txt.tmp."), std::string::npos) << name;
  writeFileDurably(path, "new");
  EXPECT_EQ(readTextFile(path), "new");
  // The temporary of a writer that was killed is removed by the next one.
  std::string stale = path + ".tmp.999999999";
  writeFileDurably(stale + "-not-a-pid", "x"); // not ours to remove
  { std::ofstream(stale) << "partial"; }
  writeFileDurably(path, "newer");
  EXPECT_FALSE(pathExists(stale));
  EXPECT_TRUE(pathExists(stale + "-not-a-pid"));
  // Never onto a device node or a directory.
  EXPECT_NE(errorOf([] { DurableFile f("/dev/null"); })
                .find("not a regular file"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { readTextFile(dir); }).find("not a regular file"),
            std::string::npos);
}

TEST(Init, CounterBasedNormalIsMeshInvariantAndCalibrated) {
  uint64_t key = streamKey(1337, "transformer.h.0.attn.c_attn.weight");
  // Indexed by the global element: the value of element k does not depend
  // on which other elements are drawn, nor in which order.
  double late = counterNormal(key, 123456);
  for (int k = 0; k < 1000; ++k)
    (void)counterNormal(key, k);
  EXPECT_EQ(counterNormal(key, 123456), late);
  EXPECT_NE(streamKey(1337, "a"), streamKey(1337, "b"));
  EXPECT_NE(streamKey(1337, "a"), streamKey(1338, "a"));
  const int n = 200000;
  double sum = 0, sq = 0;
  for (int k = 0; k < n; ++k) {
    double v = counterNormal(key, k);
    sum += v;
    sq += v * v;
  }
  double mean = sum / n, var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(var, 1.0, 0.01);
}

// mfu's peaks by device name: specific names before the family's; a
// device the table lacks (the emulated one) has none.
TEST(DevicePeak, ByName) {
  ASSERT_NE(devicePeak("NVIDIA H100 80GB HBM3"), nullptr);
  EXPECT_STREQ(devicePeak("NVIDIA H100 80GB HBM3")->model, "H100 SXM");
  EXPECT_DOUBLE_EQ(devicePeak("NVIDIA H100 80GB HBM3")->f32, 66.9e12);
  // mfu's peak is the program's compute dtype's.
  EXPECT_DOUBLE_EQ(devicePeak("NVIDIA H100 80GB HBM3")->of("bf16"), 989.4e12);
  EXPECT_DOUBLE_EQ(devicePeak("NVIDIA H100 80GB HBM3")->of("tf32"), 494.7e12);
  EXPECT_DOUBLE_EQ(devicePeak("NVIDIA H100 80GB HBM3")->of("f32"), 66.9e12);
  EXPECT_STREQ(devicePeak("NVIDIA H100 PCIe")->model, "H100 PCIe");
  EXPECT_STREQ(devicePeak("NVIDIA GH200 480GB")->model, "GH200");
  EXPECT_STREQ(devicePeak("NVIDIA H200")->model, "H200");
  EXPECT_STREQ(devicePeak("NVIDIA A100-SXM4-80GB")->model, "A100");
  EXPECT_EQ(devicePeak("shardc emulated CUDA device 0"), nullptr);
  EXPECT_EQ(devicePeak(""), nullptr);
}

// --offload=cpu: the entries the manifest's arenas mark "host" run on the
// host, over the largest of their arenas; the device arena is the others'.
TEST(Manifest, OffloadHostEntries) {
  auto manifest = [](const std::string &offload, bool host) {
    return std::string(R"({"format": 14,
      "model": {"vocab_size": 10, "micro_batch": 2, "seq_len": 3},
      "params": [], "state": [], "io": [], "entries": ["micro_step",
      "opt_step"], "param_bytes": 0, "state_bytes": 0, "io_bytes": 0,
      "arena_bytes": 4096, "offload": ")") +
           offload + R"(", "arenas": [
        {"symbol": "shardc_micro_step", "arena_bytes": 4096},
        {"symbol": "shardc_opt_step", "arena_bytes": 192)" +
           (host ? R"(, "host": true, "entry": "opt_step")" : "") + "}]}";
  };
  Manifest m = Manifest::parse(manifest("cpu", true).c_str());
  EXPECT_TRUE(m.offloaded());
  EXPECT_TRUE(m.runsOnHost("opt_step"));
  EXPECT_FALSE(m.runsOnHost("micro_step"));
  EXPECT_EQ(m.hostArenaBytes, 192);
  EXPECT_EQ(m.arenaBytes, 4096);
  Manifest plain = Manifest::parse(manifest("none", false).c_str());
  EXPECT_FALSE(plain.offloaded());
  EXPECT_TRUE(plain.hostEntries.empty());
  EXPECT_NE(errorOf([&] { Manifest::parse(manifest("gpu", false).c_str()); })
                .find("offload 'gpu' is neither"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { Manifest::parse(manifest("none", true).c_str()); })
                .find("runs entries on the host without --offload=cpu"),
            std::string::npos);
}

TEST(Manifest, ParsesAndInitializes) {
  const char *json = R"({"format": 14,
    "model": {"family": "gpt2", "source": "t", "vocab_size": 10,
              "micro_batch": 2, "seq_len": 3},
    "params": [{"name": "w", "dtype": "f32", "shape": [4, 8], "offset": 0,
                "bytes": 128, "init": "normal", "std": 0.5},
               {"name": "g", "dtype": "f32", "shape": [8], "offset": 128,
                "bytes": 32, "init": "ones"}],
    "state": [], "io": [], "entries": ["micro_step", "opt_step"],
    "param_bytes": 192, "state_bytes": 0, "io_bytes": 0, "arena_bytes": 0})";
  Manifest m = Manifest::parse(json);
  EXPECT_EQ(m.numParams(), 40);
  std::vector<char> params(192);
  initParameters(m, 7, params.data());
  const float *w = reinterpret_cast<const float *>(params.data());
  const float *g = reinterpret_cast<const float *>(params.data() + 128);
  uint64_t key = streamKey(7, "w");
  for (int k = 0; k < 32; ++k)
    EXPECT_FLOAT_EQ(w[k], float(0.5 * counterNormal(key, k)));
  for (int k = 0; k < 8; ++k)
    EXPECT_EQ(g[k], 1.0f);
  EXPECT_NE(errorOf([] {
              std::string json = "{\"format\": " +
                                 std::to_string(shardc::abi::kFormatVersion) +
                                 "}";
              Manifest::parse(json.c_str());
            }).find("malformed model manifest"),
            std::string::npos);
  // A program compiled against another ABI is refused by name.
  EXPECT_NE(errorOf([] { Manifest::parse("{\"format\": 2}"); })
                .find("has format 2 but this runtime reads format " +
                      std::to_string(shardc::abi::kFormatVersion)),
            std::string::npos);
  // Slots are checked before the runtime multiplies or offsets by them: a
  // size that is not its shape's (here one that wrapped), or a slot past
  // its region's end, is refused by name.
  std::string wrapped = json;
  wrapped.replace(wrapped.find("[4, 8]"), 6, "[4611686018427387905, 64]");
  EXPECT_NE(errorOf([&] { Manifest::parse(wrapped.c_str()); })
                .find("parameter slot 'w' (f32 [4611686018427387905, 64], 128 bytes at 0) "
                      "does not fit its shape or its region"),
            std::string::npos);
  // An empty tensor fits anywhere in its region, at its end included.
  std::string empty = json;
  const std::string gSlot = "\"shape\": [8], \"offset\": 128,\n                \"bytes\": 32";
  empty.replace(empty.find(gSlot), gSlot.size(),
                "\"shape\": [0, 8], \"offset\": 192, \"bytes\": 0");
  EXPECT_EQ(Manifest::parse(empty.c_str()).params[1].bytes, 0);
  std::string outside = json;
  outside.replace(outside.find("\"offset\": 128"), 13, "\"offset\": 176");
  EXPECT_NE(errorOf([&] { Manifest::parse(outside.c_str()); })
                .find("parameter slot 'g' (f32 [8], 32 bytes at 176) does not fit"),
            std::string::npos);
}

} // namespace

// Every row of the ABI table: a launch of the counts it defines is accepted;
// one integer too many, one buffer too few or one float too many is refused,
// and the message names the layout.
TEST(Abi, EveryKernelChecksItsCounts) {
  namespace A = shardc::abi;
  for (const A::KernelInfo &k : A::kKernels) {
    SCOPED_TRACE(A::kernelLayout(k));
    // Two units of the variable part where a kernel has one.
    std::vector<int64_t> ints(size_t(k.numInts), 1);
    int64_t units = k.count >= 0 ? 2 : 0;
    if (k.count >= 0)
      ints[size_t(k.count)] = units;
    ints.resize(size_t(k.numInts + k.tailPer * units + k.trailing), 1);
    int64_t buffers = k.numBuffers + k.buffersPer * units;
    EXPECT_EQ(A::checkKernelArgs(k, buffers, ints.data(), int64_t(ints.size()),
                                 k.numFloats),
              "");
    std::vector<int64_t> more = ints;
    more.push_back(1);
    EXPECT_NE(A::checkKernelArgs(k, buffers, more.data(), int64_t(more.size()),
                                 k.numFloats)
                  .find("integers"),
              std::string::npos);
    EXPECT_NE(A::checkKernelArgs(k, buffers - 1, ints.data(),
                                 int64_t(ints.size()), k.numFloats)
                  .find("buffers"),
              std::string::npos);
    EXPECT_NE(A::checkKernelArgs(k, buffers, ints.data(), int64_t(ints.size()),
                                 k.numFloats + 1)
                  .find("floats"),
              std::string::npos);
    EXPECT_EQ(A::lookupKernel(k.name), &k);
  }
  EXPECT_EQ(A::lookupKernel("no_such_kernel"), nullptr);
}

TEST(Text, PrintableEscapesControlsAndKeepsUtf8) {
  using shardc::runtime::printable;
  EXPECT_EQ(printable("\x1b[31mevil\nname"), "\\1B[31mevil\\0Aname");
  EXPECT_EQ(printable("a\\b\x7f"), "a\\b\\7F");
  // UTF-8 is kept, C1 controls (U+009B, CSI) and invalid bytes are not.
  EXPECT_EQ(printable("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(printable("x\xc2\x9by"), "x\\C2\\9By");
  EXPECT_EQ(printable("\xff\xc3"), "\\FF\\C3");
  // Idempotent: escaping twice changes nothing.
  std::string once = printable("\x1b\n\xc2\x9b\xff");
  EXPECT_EQ(printable(once), once);
}

// Under --tp, tp rank t's part of a tensor split on dim d is the slice
// [t * n, (t + 1) * n) of dim d of the whole tensor: against a naive walk
// of the whole tensor's multi-index, for each dim of a 3-D tensor and with
// FSDP's global shape standing for the part.
TEST(Runtime, TpWholeIndexIsThePartsSliceOfTheWholeTensor) {
  const std::vector<int64_t> whole = {4, 6, 2};
  const int64_t tp = 2;
  for (int64_t d = 0; d < 3; ++d) {
    TensorSlot p;
    p.tpDim = d;
    p.globalShape = whole;
    p.globalShape[size_t(d)] /= tp;
    p.shape = p.globalShape; // one FSDP shard: the part itself
    const std::vector<int64_t> &part = p.globalShape;
    for (int64_t t = 0; t < tp; ++t) {
      int64_t k = 0;
      for (int64_t i = 0; i < part[0]; ++i)
        for (int64_t j = 0; j < part[1]; ++j)
          for (int64_t l = 0; l < part[2]; ++l, ++k) {
            int64_t idx[3] = {i, j, l};
            idx[d] += t * part[size_t(d)];
            int64_t want = (idx[0] * whole[1] + idx[1]) * whole[2] + idx[2];
            EXPECT_EQ(tpWholeIndex(p, tp, t, k), want)
                << "dim " << d << " rank " << t << " element " << k;
          }
    }
  }
  // GPT-2's c_attn [2, 12] split on dim 1 in 3 blocks (q, k, v of 4
  // columns): rank t's part [2, 6] holds columns 2t, 2t+1 of each block.
  TensorSlot qkv;
  qkv.tpDim = 1;
  qkv.tpBlocks = 3;
  qkv.globalShape = {2, 6};
  qkv.shape = {1, 6}; // FSDP's shard of the part: the part's row 0 here
  for (int64_t t = 0; t < tp; ++t)
    for (int64_t k = 0; k < 12; ++k) {
      int64_t row = k / 6, col = k % 6, block = col / 2, off = col % 2;
      EXPECT_EQ(tpWholeIndex(qkv, tp, t, k), row * 12 + block * 4 + t * 2 + off)
          << "c_attn rank " << t << " element " << k;
    }
  // Not split (-1), or no tp: the element itself.
  TensorSlot whole1;
  whole1.shape = whole;
  EXPECT_EQ(tpWholeIndex(whole1, 2, 1, 17), 17);
}

// The whole rows a tp part's row range lies in (tpWholeRows), and the part
// taken out of them (tpTakePart), against a naive scan of every element's
// whole index: each dim of a 3-D tensor split by 2, c_attn's blocks, and
// every range of the part's rows.
TEST(Runtime, TpWholeRowsHoldThePartsRowsAndTakePartReadsThem) {
  std::vector<TensorSlot> slots;
  const std::vector<int64_t> whole = {4, 6, 2};
  for (int64_t d = 0; d < 3; ++d) {
    TensorSlot p;
    p.tpDim = d;
    p.globalShape = whole;
    p.globalShape[size_t(d)] /= 2;
    p.shape = p.globalShape;
    slots.push_back(p);
  }
  TensorSlot qkv;
  qkv.tpDim = 1;
  qkv.tpBlocks = 3;
  qkv.globalShape = qkv.shape = {2, 6};
  slots.push_back(qkv);
  const int64_t tp = 2;
  for (const TensorSlot &p : slots) {
    std::vector<int64_t> w = wholeShape(p, tp);
    int64_t wholeRow = 1, wholeElements = w[0];
    for (size_t d = 1; d < w.size(); ++d)
      wholeRow *= w[d], wholeElements *= w[d];
    std::vector<float> values(static_cast<size_t>(wholeElements));
    for (size_t e = 0; e < values.size(); ++e)
      values[e] = float(e);
    int64_t rows = p.globalShape[0], row = p.rowSize();
    for (int64_t t = 0; t < tp; ++t)
      for (int64_t first = 0; first < rows; ++first)
        for (int64_t end = first + 1; end <= rows; ++end) {
          int64_t lo = INT64_MAX, hi = -1;
          for (int64_t e = first * row; e < end * row; ++e) {
            lo = std::min(lo, tpWholeIndex(p, tp, t, e) / wholeRow);
            hi = std::max(hi, tpWholeIndex(p, tp, t, e) / wholeRow);
          }
          auto [a, b] = tpWholeRows(p, tp, t, first * row, end * row);
          EXPECT_EQ(a, lo) << "dim " << p.tpDim << " rank " << t;
          EXPECT_EQ(b, hi + 1) << "dim " << p.tpDim << " rank " << t;
          std::vector<float> got(size_t((end - first) * row));
          tpTakePart(p, tp, t, first * row, end * row,
                     values.data() + a * wholeRow, a * wholeRow, got.data());
          for (int64_t e = first * row; e < end * row; ++e)
            ASSERT_EQ(got[size_t(e - first * row)],
                      float(tpWholeIndex(p, tp, t, e)));
        }
  }
}
