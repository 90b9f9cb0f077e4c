//===- safetensors.cpp - reading and writing safetensors files ------------===//
//
// Format: u64 little-endian header size N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
// then the tensor bytes (offsets relative to the end of the header).
//
//===----------------------------------------------------------------------===//
#include "runtime/formats/safetensors.h"
#include "runtime/math.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <stdexcept>

using namespace shardc::runtime;
using nlohmann::json;

std::vector<uint64_t> shardc::runtime::writeSafetensors(
    const std::string &path, const std::vector<NamedTensor> &tensors,
    const std::map<std::string, std::string> &metadata) {
  json header = json::object();
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const NamedTensor &t : tensors) {
    uint64_t n = 1;
    for (int64_t d : t.shape)
      n *= uint64_t(d);
    header[t.name] = {{"dtype", "F32"},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + 4 * n}}};
    offsets.push_back(offset);
    offset += 4 * n;
  }
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  std::string text = header.dump();
  while (text.size() % 8 != 0)
    text.push_back(' ');
  for (uint64_t &o : offsets)
    o += 8 + text.size();

  DurableFile out(path);
  uint64_t size = text.size();
  unsigned char le[8];
  for (int k = 0; k < 8; ++k)
    le[k] = (size >> (8 * k)) & 0xff;
  out.write(le, 8);
  out.write(text.data(), text.size());
  for (const NamedTensor &t : tensors) {
    uint64_t n = 1;
    for (int64_t d : t.shape)
      n *= uint64_t(d);
    out.write(t.data, 4 * n);
  }
  out.commit();
  return offsets;
}

int64_t SafetensorsEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

SafetensorsFile::SafetensorsFile(const std::string &path) : path_(path) {
  file_ = std::make_shared<FileHandle>(openRegularForRead(path));
  int fd = file_->fd();
  uint64_t size = uint64_t(fileSize(fd, path));
  auto bad = [&](const std::string &why) {
    return std::runtime_error(path + ": not a valid safetensors file: " + why);
  };
  unsigned char le[8];
  if (size < 8)
    throw bad("shorter than its 8-byte header size");
  readAt(fd, path, 0, le, 8);
  uint64_t headerSize = 0;
  for (int k = 0; k < 8; ++k)
    headerSize |= uint64_t(le[k]) << (8 * k);
  if (headerSize > size - 8)
    throw bad("header size " + std::to_string(headerSize) +
              " exceeds the file of " + std::to_string(size) + " bytes");
  std::string text(headerSize, '\0');
  readAt(fd, path, 8, text.data(), headerSize);
  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception &e) {
    throw bad(std::string("header is not JSON: ") + e.what());
  }
  if (!header.is_object())
    throw bad("header is not a JSON object");
  uint64_t dataStart = 8 + headerSize, dataSize = size - dataStart;
  for (auto &[name, info] : header.items()) {
    if (name == "__metadata__") {
      if (info.is_object())
        for (auto &[k, v] : info.items())
          if (v.is_string())
            metadata_[k] = v.get<std::string>();
      continue;
    }
    SafetensorsEntry t;
    uint64_t begin, end;
    try {
      t.dtype = info.at("dtype").get<std::string>();
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
      if (d > 0 && n > (uint64_t(1) << 62) / uint64_t(d))
        throw bad("entry '" + name + "' has more than 2^62 elements");
      n *= uint64_t(d);
    }
    t.elementBytes =
        t.dtype == "F32" ? 4 : (t.dtype == "F16" || t.dtype == "BF16") ? 2 : 0;
    if (!t.elementBytes)
      throw bad("entry '" + name + "' has unsupported dtype " + t.dtype +
                " (F32, F16, BF16)");
    if (end < begin || end > dataSize || end - begin != n * t.elementBytes)
      throw bad("entry '" + name + "' has data offsets outside the file or "
                "not matching its shape");
    t.begin = dataStart + begin;
    t.end = dataStart + end;
    entries_.emplace(name, std::move(t));
  }
}

const SafetensorsEntry *SafetensorsFile::find(const std::string &name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

void SafetensorsFile::readBytes(uint64_t begin, uint64_t end, void *dst) const {
  readAt(file_->fd(), path_, begin, dst, end - begin);
}

void SafetensorsFile::readF32(const std::string &name, int64_t first,
                              int64_t count, float *dst) const {
  const SafetensorsEntry *e = find(name);
  if (!e)
    throw std::runtime_error(path_ + ": no tensor '" + name + "'");
  if (first < 0 || count < 0 || first + count > e->numel())
    throw std::runtime_error(path_ + ": elements [" + std::to_string(first) +
                             ", " + std::to_string(first + count) +
                             ") are outside tensor '" + name + "'");
  uint64_t begin = e->begin + uint64_t(first * e->elementBytes);
  if (e->elementBytes == 4) {
    readBytes(begin, begin + uint64_t(4 * count), dst);
    return;
  }
  std::vector<uint16_t> raw(static_cast<size_t>(count));
  readBytes(begin, begin + uint64_t(2 * count), raw.data());
  bool half = e->dtype == "F16";
  for (int64_t k = 0; k < count; ++k)
    dst[k] = half ? halfToFloat(raw[k]) : bf16ToFloat(raw[k]);
}

std::map<std::string, LoadedTensor>
shardc::runtime::readSafetensors(const std::string &path) {
  SafetensorsFile file(path);
  std::map<std::string, LoadedTensor> out;
  for (const auto &[name, e] : file.entries()) {
    LoadedTensor t;
    t.shape = e.shape;
    t.data.resize(size_t(e.numel()));
    file.readF32(name, 0, e.numel(), t.data.data());
    out.emplace(name, std::move(t));
  }
  return out;
}
