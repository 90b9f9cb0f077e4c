//===- safetensors.cpp - reading and writing safetensors files ------------===//
//
// Format: u64 little-endian header size N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
// then the tensor bytes (offsets relative to the end of the header).
//
//===----------------------------------------------------------------------===//
#include "runtime/safetensors.h"
#include "runtime/cpu/fastmath.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

using namespace shardc::runtime;
using nlohmann::json;

void shardc::runtime::writeSafetensors(
    const std::string &path, const std::vector<NamedTensor> &tensors,
    const std::map<std::string, std::string> &metadata) {
  json header = json::object();
  uint64_t offset = 0;
  for (const NamedTensor &t : tensors) {
    uint64_t n = 1;
    for (int64_t d : t.shape)
      n *= uint64_t(d);
    header[t.name] = {{"dtype", "F32"},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + 4 * n}}};
    offset += 4 * n;
  }
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  std::string text = header.dump();
  while (text.size() % 8 != 0)
    text.push_back(' ');

  std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::binary);
  if (!out)
    throw std::runtime_error(path + ": cannot open for writing");
  uint64_t size = text.size();
  unsigned char le[8];
  for (int k = 0; k < 8; ++k)
    le[k] = (size >> (8 * k)) & 0xff;
  out.write(reinterpret_cast<const char *>(le), 8);
  out.write(text.data(), text.size());
  for (const NamedTensor &t : tensors) {
    uint64_t n = 1;
    for (int64_t d : t.shape)
      n *= uint64_t(d);
    out.write(reinterpret_cast<const char *>(t.data), 4 * n);
  }
  out.close();
  if (!out)
    throw std::runtime_error(path + ": write failed");
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error(path + ": cannot rename " + tmp + " into place");
}

std::map<std::string, LoadedTensor>
shardc::runtime::readSafetensors(const std::string &path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    throw std::runtime_error(path + ": cannot open");
  uint64_t fileSize = uint64_t(in.tellg());
  in.seekg(0);
  auto bad = [&](const std::string &why) {
    return std::runtime_error(path + ": not a valid safetensors file: " + why);
  };
  unsigned char le[8];
  if (fileSize < 8 || !in.read(reinterpret_cast<char *>(le), 8))
    throw bad("shorter than its 8-byte header size");
  uint64_t headerSize = 0;
  for (int k = 0; k < 8; ++k)
    headerSize |= uint64_t(le[k]) << (8 * k);
  if (headerSize > fileSize - 8)
    throw bad("header size " + std::to_string(headerSize) +
              " exceeds the file");
  std::string text(headerSize, '\0');
  in.read(text.data(), headerSize);
  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception &e) {
    throw bad(std::string("header is not JSON: ") + e.what());
  }
  if (!header.is_object())
    throw bad("header is not a JSON object");
  uint64_t dataSize = fileSize - 8 - headerSize;
  std::map<std::string, LoadedTensor> out;
  for (auto &[name, info] : header.items()) {
    if (name == "__metadata__")
      continue;
    LoadedTensor t;
    std::string dtype;
    uint64_t begin, end;
    try {
      dtype = info.at("dtype").get<std::string>();
      t.shape = info.at("shape").get<std::vector<int64_t>>();
      begin = info.at("data_offsets").at(0).get<uint64_t>();
      end = info.at("data_offsets").at(1).get<uint64_t>();
    } catch (const json::exception &e) {
      throw bad("entry '" + name + "': " + e.what());
    }
    uint64_t n = 1;
    for (int64_t d : t.shape) {
      if (d < 0)
        throw bad("entry '" + name + "' has a negative dimension");
      n *= uint64_t(d);
    }
    uint64_t elt = dtype == "F32" ? 4 : (dtype == "F16" || dtype == "BF16") ? 2 : 0;
    if (!elt)
      throw bad("entry '" + name + "' has unsupported dtype " + dtype +
                " (F32, F16, BF16)");
    if (end < begin || end > dataSize || end - begin != n * elt)
      throw bad("entry '" + name + "' has data offsets outside the file or "
                "not matching its shape");
    std::vector<char> raw(end - begin);
    in.seekg(8 + headerSize + begin);
    if (!in.read(raw.data(), raw.size()))
      throw bad("entry '" + name + "' is truncated");
    t.data.resize(n);
    if (elt == 4) {
      std::memcpy(t.data.data(), raw.data(), raw.size());
    } else {
      for (uint64_t k = 0; k < n; ++k) {
        uint16_t h;
        std::memcpy(&h, raw.data() + 2 * k, 2);
        t.data[k] = dtype == "F16" ? halfToFloat(h) : bf16ToFloat(h);
      }
    }
    out.emplace(name, std::move(t));
  }
  return out;
}
