//===- safetensors.cpp - reading and writing safetensors files ------------===//
//
// Format: u64 little-endian header size N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
// then the tensor bytes (offsets relative to the end of the header).
//
// Read as the reference implementation (PyPI safetensors) validates it: a
// header within the file and 100 MB, starting with '{', a JSON object
// with no key twice, whose entries have a known dtype, a shape of
// non-negative integers and two non-negative data_offsets; byte sizes by
// checked arithmetic; the tensors, sorted by offset, tile the data from 0
// to its end with no gap, overlap or trailing byte; __metadata__ maps
// strings to strings. Each refusal is one line naming the file, the tensor
// and the rule.
//
//===----------------------------------------------------------------------===//
#include "runtime/formats/safetensors.h"
#include "runtime/math.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>
#include <stdexcept>

using namespace shardc::runtime;
using nlohmann::json;

std::vector<uint64_t> shardc::runtime::writeSafetensors(
    const std::string &path, const std::vector<NamedTensor> &tensors,
    const std::map<std::string, std::string> &metadata) {
  return writeSafetensors(path, tensors, metadata,
                          [&](size_t k) { return tensors[k].data; });
}

std::vector<uint64_t> shardc::runtime::writeSafetensors(
    const std::string &path, const std::vector<NamedTensor> &tensors,
    const std::map<std::string, std::string> &metadata,
    const std::function<const float *(size_t)> &data) {
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
  for (size_t k = 0; k < tensors.size(); ++k) {
    uint64_t n = 1;
    for (int64_t d : tensors[k].shape)
      n *= uint64_t(d);
    out.write(data(k), 4 * n);
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

namespace {

/// The reference implementation's bound on the header (100 MB).
constexpr uint64_t kMaxHeaderBytes = 100000000;

/// The dtypes of the format, and their element bytes (0: not a whole
/// number of bytes); shardc reads F32, F16 and BF16.
int64_t dtypeBytes(const std::string &dtype) {
  static const std::map<std::string, int64_t> known = {
      {"BOOL", 1}, {"U8", 1},      {"I8", 1},      {"F8_E5M2", 1},
      {"F8_E4M3", 1}, {"F8_E8M0", 1}, {"I16", 2},  {"U16", 2},
      {"F16", 2},  {"BF16", 2},    {"I32", 4},     {"U32", 4},
      {"F32", 4},  {"F64", 8},     {"I64", 8},     {"U64", 8},
      {"C64", 8},  {"F4", 0},      {"F6_E2M3", 0}, {"F6_E3M2", 0}};
  auto it = known.find(dtype);
  return it == known.end() ? -1 : it->second;
}

/// A refusal of `path`: one printable line (the header's own bytes may be
/// anything).
std::runtime_error invalid(const std::string &path, const std::string &why) {
  std::string line;
  for (unsigned char c : why) {
    if (c >= 0x20 && c < 0x7f) {
      line.push_back(char(c));
    } else {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      line += hex;
    }
  }
  return std::runtime_error(path + ": not a valid safetensors file: " + line);
}

/// JSON text parsed with no key twice in any object (JSON would keep the
/// last silently).
json parseWithoutDuplicates(const std::string &path, const std::string &text) {
  std::vector<std::set<std::string>> keys;
  std::string twice;
  json::parser_callback_t noDuplicates = [&](int, json::parse_event_t event,
                                             json &parsed) {
    if (event == json::parse_event_t::object_start)
      keys.emplace_back();
    else if (event == json::parse_event_t::object_end && !keys.empty())
      keys.pop_back();
    else if (event == json::parse_event_t::key && !keys.empty() &&
             !keys.back().insert(parsed.get<std::string>()).second &&
             twice.empty())
      twice = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(text, noDuplicates);
  } catch (const json::exception &e) {
    throw invalid(path, std::string("the header is not JSON: ") + e.what());
  }
  if (!twice.empty())
    throw invalid(path, "the header names '" + twice + "' twice");
  return header;
}

/// The header of the file `path` of `size` bytes open at `fd`: its size
/// (bounded by the format and the file) and its JSON object.
json readHeader(int fd, const std::string &path, uint64_t size,
                uint64_t &headerSize) {
  unsigned char le[8];
  if (size < 8)
    throw invalid(path, "shorter than its 8-byte header size");
  readAt(fd, path, 0, le, 8);
  headerSize = 0;
  for (int k = 0; k < 8; ++k)
    headerSize |= uint64_t(le[k]) << (8 * k);
  if (headerSize > kMaxHeaderBytes)
    throw invalid(path, "a header of " + std::to_string(headerSize) +
                            " bytes is over the format's bound of " +
                            std::to_string(kMaxHeaderBytes));
  if (headerSize > size - 8)
    throw invalid(path, "header size " + std::to_string(headerSize) +
                            " exceeds the file of " + std::to_string(size) +
                            " bytes");
  std::string text(headerSize, '\0');
  readAt(fd, path, 8, text.data(), headerSize);
  if (text.find('\0') != std::string::npos)
    throw invalid(path, "the header holds a NUL byte at " +
                            std::to_string(text.find('\0')));
  json header = parseWithoutDuplicates(path, text);
  if (!header.is_object())
    throw invalid(path, "the header is not a JSON object");
  return header;
}

/// __metadata__: null (none, as the reference reads it) or strings to
/// strings.
void readMetadata(const std::string &path, const json &info,
                  std::map<std::string, std::string> &metadata) {
  if (info.is_null())
    return;
  if (!info.is_object())
    throw invalid(path, "__metadata__ is not an object of strings");
  for (auto &[k, v] : info.items()) {
    if (!v.is_string())
      throw invalid(path, "__metadata__ maps '" + k + "' to a non-string");
    metadata[k] = v.get<std::string>();
  }
}

/// The element count of a shape, by checked arithmetic, into `t.shape`.
uint64_t readShape(const json &shape, SafetensorsEntry &t,
                   const std::function<std::runtime_error(std::string)> &wrong) {
  uint64_t n = 1;
  for (const json &d : shape) {
    if (!d.is_number_unsigned())
      throw wrong("the shape holds " + d.dump() +
                  ", not a non-negative integer");
    uint64_t dim = d.get<uint64_t>();
    if (dim > uint64_t(INT64_MAX) || (dim > 0 && n > (uint64_t(1) << 62) / dim))
      throw wrong("more than 2^62 elements");
    n *= dim;
    t.shape.push_back(int64_t(dim));
  }
  return n;
}

/// Tensor `name`'s entry `info`, checked; its data offsets (from the data's
/// start at `dataStart`) in `begin` and `end`.
SafetensorsEntry readEntry(const std::string &path, const std::string &name,
                           const json &info, uint64_t dataStart,
                           uint64_t &begin, uint64_t &end) {
  std::function<std::runtime_error(std::string)> wrong =
      [&](const std::string &rule) {
        return invalid(path, "tensor '" + name + "': " + rule);
      };
  if (!info.is_object())
    throw wrong("its entry is not an object");
  auto dtype = info.find("dtype"), shape = info.find("shape"),
       offsets = info.find("data_offsets");
  if (dtype == info.end() || !dtype->is_string())
    throw wrong("no dtype string");
  if (shape == info.end() || !shape->is_array())
    throw wrong("no shape array");
  if (offsets == info.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned())
    throw wrong("data_offsets is not two non-negative integers");
  SafetensorsEntry t;
  t.dtype = dtype->get<std::string>();
  uint64_t n = readShape(*shape, t, wrong);
  int64_t eb = dtypeBytes(t.dtype);
  if (eb < 0)
    throw wrong("dtype '" + t.dtype + "' is not a safetensors dtype");
  if (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16")
    throw wrong("dtype " + t.dtype + " is not supported (F32, F16, BF16)");
  t.elementBytes = eb;
  begin = (*offsets)[0].get<uint64_t>();
  end = (*offsets)[1].get<uint64_t>();
  if (end < begin)
    throw wrong("data_offsets [" + std::to_string(begin) + ", " +
                std::to_string(end) + "] end before they begin");
  if (end - begin != n * uint64_t(eb))
    throw wrong("data_offsets hold " + std::to_string(end - begin) +
                " bytes; its shape and dtype make " +
                std::to_string(n * uint64_t(eb)));
  t.begin = dataStart + begin;
  t.end = dataStart + end;
  return t;
}

/// A tensor's bytes in the data.
struct Span {
  uint64_t begin, end;
  const std::string *name;
};

/// The tensors, by offset, tile the `dataSize` bytes of data exactly.
void checkTiling(const std::string &path, std::vector<Span> spans,
                 uint64_t dataSize) {
  std::sort(spans.begin(), spans.end(), [](const Span &a, const Span &b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  for (const Span &s : spans) {
    if (s.begin > covered)
      throw invalid(path, "tensor '" + *s.name + "': a gap of " +
                              std::to_string(s.begin - covered) +
                              " bytes before it (at " +
                              std::to_string(covered) + ")");
    if (s.begin < covered)
      throw invalid(path, "tensor '" + *s.name +
                              "' overlaps the tensor before it (at " +
                              std::to_string(s.begin) +
                              ", that one ends at " + std::to_string(covered) +
                              ")");
    covered = s.end;
  }
  if (covered > dataSize)
    throw invalid(path, "the tensors end at byte " + std::to_string(covered) +
                            " of the data, beyond the file's " +
                            std::to_string(dataSize));
  if (covered < dataSize)
    throw invalid(path, std::to_string(dataSize - covered) +
                            " bytes follow the last tensor (the data is " +
                            std::to_string(dataSize) + " bytes, the tensors " +
                            std::to_string(covered) + ")");
}

} // namespace

SafetensorsFile::SafetensorsFile(const std::string &path) : path_(path) {
  file_ = std::make_shared<FileHandle>(openRegularForRead(path));
  int fd = file_->fd();
  uint64_t size = uint64_t(fileSize(fd, path));
  uint64_t headerSize = 0;
  json header = readHeader(fd, path, size, headerSize);
  uint64_t dataStart = 8 + headerSize, dataSize = size - dataStart;
  std::vector<Span> spans;
  for (auto &[name, info] : header.items()) {
    if (name == "__metadata__") {
      readMetadata(path, info, metadata_);
      continue;
    }
    uint64_t begin = 0, end = 0;
    SafetensorsEntry t = readEntry(path, name, info, dataStart, begin, end);
    auto placed = entries_.emplace(name, std::move(t)).first;
    spans.push_back({begin, end, &placed->first});
  }
  checkTiling(path, std::move(spans), dataSize);
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
