//===- files.h - durable writes and checked reads ------------------*- C++ -*-===//
//
// What the trainer's outputs go through: a write lands under a temporary
// name, is fsynced, renamed into place and its directory fsynced, and the
// temporary is removed on failure; so a file is either the old one or the
// whole new one, also across a crash or a kill. Errors are
// std::runtime_error naming the path and the system's reason.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_FORMATS_FILES_H
#define SHARDC_RUNTIME_FORMATS_FILES_H

#include <cstdint>
#include <climits>
#include <string>
#include <vector>

namespace shardc::runtime {

/// An open file descriptor, closed when it goes out of scope.
class FileHandle {
public:
  FileHandle() = default;
  explicit FileHandle(int fd) : fd_(fd) {}
  FileHandle(FileHandle &&o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  FileHandle &operator=(FileHandle &&o) noexcept;
  FileHandle(const FileHandle &) = delete;
  FileHandle &operator=(const FileHandle &) = delete;
  ~FileHandle();
  int fd() const { return fd_; }
  /// Gives up ownership: returns the descriptor without closing it.
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  explicit operator bool() const { return fd_ >= 0; }

private:
  int fd_ = -1;
};

/// Opens a regular file for reading (not a FIFO, device or directory).
FileHandle openRegularForRead(const std::string &path);

/// The one check for every input file, compiler and trainer alike: opens
/// `path` (after symlinks) when it is a regular file of at most `maxBytes`
/// bytes. A FIFO is refused without waiting for a writer, a device or a
/// directory without reading it. Throws nothing: on failure the handle is
/// invalid and `error` is one line naming the path (and, for the size,
/// `maxBytes` as `limitText` describes it, e.g. "the 2 GiB protobuf limit").
FileHandle openInputFile(const std::string &path, uint64_t maxBytes,
                         const std::string &limitText, std::string &error,
                         uint64_t *size = nullptr) noexcept;
/// The whole of such a file into `out`; false with `error` set otherwise.
bool readInputFile(const std::string &path, uint64_t maxBytes,
                   const std::string &limitText, std::string &out,
                   std::string &error) noexcept;
/// Reads exactly `bytes` at `offset` (pread loop); false with `error`
/// naming `path` when the file is shorter or the read fails.
bool readAtNoThrow(int fd, const std::string &path, uint64_t offset, void *dst,
                   uint64_t bytes, std::string &error) noexcept;
/// "1.5 GiB", "16 MiB", "100 bytes": a byte count for messages (up to
/// EiB; a double, so that sizes past 2^64 print too).
std::string formatBytes(double bytes);
/// Its size in bytes.
int64_t fileSize(int fd, const std::string &path);
/// Reads exactly `bytes` at `offset` (pread); throws naming `path` when the
/// file is shorter.
void readAt(int fd, const std::string &path, uint64_t offset, void *dst,
            uint64_t bytes);
/// Writes all of `bytes` (write loop).
void writeAll(int fd, const std::string &path, const void *src, uint64_t bytes);
/// fsync of an open file, and of a directory by its path.
void syncFile(int fd, const std::string &path);
void syncDirectory(const std::string &dir);

/// The directory part of a path ("." when it has none).
std::string parentDirectory(const std::string &path);
/// Whether `name` ends with `tail` (a file name's suffix: ".json").
inline bool endsWith(const std::string &name, const std::string &tail) {
  return name.size() >= tail.size() &&
         name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
}
/// mkdir -p.
void makeDirectories(const std::string &dir);
/// rm -r (no error if absent).
void removeTree(const std::string &path);
bool pathExists(const std::string &path);
bool isDirectory(const std::string &path);
/// The names in a directory (not . and ..), sorted.
std::vector<std::string> listDirectory(const std::string &dir);
/// The bounds of what is read whole: JSON and text (config.json, metadata,
/// indexes) and, the protobuf limit, an ONNX model file.
constexpr uint64_t kMaxTextFileBytes = uint64_t(1) << 30;
constexpr uint64_t kMaxConfigJsonBytes = uint64_t(16) << 20;
constexpr uint64_t kMaxProtobufBytes = uint64_t(INT32_MAX);

/// The whole of a (small) regular file.
std::string readTextFile(const std::string &path);

/// A file being written durably: bytes go to `path` + ".tmp.<pid>";
/// commit() fsyncs, renames it onto `path` and fsyncs the directory. If
/// commit() is not reached, the destructor removes the temporary.
class DurableFile {
public:
  explicit DurableFile(const std::string &path);
  ~DurableFile();
  void write(const void *src, uint64_t bytes);
  void commit();
  const std::string &path() const { return path_; }

private:
  std::string path_, tmp_;
  FileHandle fd_;
  bool committed_ = false;
};

/// writes `text` to `path` durably (DurableFile).
void writeFileDurably(const std::string &path, const std::string &text);

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_FORMATS_FILES_H
