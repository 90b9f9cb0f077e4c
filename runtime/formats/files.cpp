//===- files.cpp - durable writes and checked reads -----------------------===//
#include "runtime/formats/files.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

using namespace shardc::runtime;

namespace {

std::runtime_error systemError(const std::string &path, const char *what) {
  return std::runtime_error(path + ": " + what + ": " + std::strerror(errno));
}

} // namespace

FileHandle &FileHandle::operator=(FileHandle &&o) noexcept {
  if (this != &o) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

FileHandle::~FileHandle() {
  if (fd_ >= 0)
    ::close(fd_);
}

/// What a file that is not regular is, for messages.
static const char *fileKind(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a plain file";
}

std::string shardc::runtime::formatBytes(double bytes) {
  const char *units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024)
    return std::to_string(uint64_t(bytes)) + " bytes";
  double v = bytes;
  int u = -1;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text, v == double(uint64_t(v)) ? "%.0f %s" : "%.1f %s",
                v, units[u]);
  return text;
}

FileHandle shardc::runtime::openInputFile(const std::string &path,
                                          uint64_t maxBytes,
                                          const std::string &limitText,
                                          std::string &error,
                                          uint64_t *size) noexcept {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused
  // below as not a regular file.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    error = path + ": cannot open: " + std::strerror(errno);
    return FileHandle();
  }
  FileHandle h(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    error = path + ": cannot stat: " + std::strerror(errno);
    return FileHandle();
  }
  if (!S_ISREG(st.st_mode)) {
    error = path + ": not a regular file (" + fileKind(st.st_mode) + ")";
    return FileHandle();
  }
  if (uint64_t(st.st_size) > maxBytes) {
    error = path + ": " + std::to_string(uint64_t(st.st_size)) +
            " bytes exceeds " + limitText;
    return FileHandle();
  }
  int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  if (size)
    *size = uint64_t(st.st_size);
  return h;
}

bool shardc::runtime::readAtNoThrow(int fd, const std::string &path,
                                    uint64_t offset, void *dst, uint64_t bytes,
                                    std::string &error) noexcept {
  char *p = static_cast<char *>(dst);
  while (bytes > 0) {
    size_t chunk = size_t(std::min<uint64_t>(bytes, uint64_t(1) << 30));
    ssize_t n = ::pread(fd, p, chunk, off_t(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      error = path + ": read failed: " + std::strerror(errno);
      return false;
    }
    if (n == 0) {
      error = path + ": truncated: ends before byte " +
              std::to_string(offset + bytes);
      return false;
    }
    p += n;
    offset += uint64_t(n);
    bytes -= uint64_t(n);
  }
  return true;
}

bool shardc::runtime::readInputFile(const std::string &path, uint64_t maxBytes,
                                    const std::string &limitText,
                                    std::string &out,
                                    std::string &error) noexcept {
  uint64_t size = 0;
  FileHandle h = openInputFile(path, maxBytes, limitText, error, &size);
  if (!h)
    return false;
  out.assign(size_t(size), '\0');
  return readAtNoThrow(h.fd(), path, 0, out.data(), size, error);
}

FileHandle shardc::runtime::openRegularForRead(const std::string &path) {
  std::string error;
  FileHandle h = openInputFile(path, UINT64_MAX, "", error);
  if (!h)
    throw std::runtime_error(error);
  return h;
}

int64_t shardc::runtime::fileSize(int fd, const std::string &path) {
  struct stat st;
  if (::fstat(fd, &st) != 0)
    throw systemError(path, "cannot stat");
  return int64_t(st.st_size);
}

void shardc::runtime::readAt(int fd, const std::string &path, uint64_t offset,
                             void *dst, uint64_t bytes) {
  std::string error;
  if (!readAtNoThrow(fd, path, offset, dst, bytes, error))
    throw std::runtime_error(error);
}

void shardc::runtime::writeAll(int fd, const std::string &path,
                               const void *src, uint64_t bytes) {
  const char *p = static_cast<const char *>(src);
  while (bytes > 0) {
    size_t chunk = size_t(std::min<uint64_t>(bytes, uint64_t(1) << 30));
    ssize_t n = ::write(fd, p, chunk);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw systemError(path, "write failed");
    p += n;
    bytes -= uint64_t(n);
  }
}

void shardc::runtime::syncFile(int fd, const std::string &path) {
  if (::fsync(fd) != 0)
    throw systemError(path, "fsync failed");
}

void shardc::runtime::syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    throw systemError(dir, "cannot open directory");
  FileHandle h(fd);
  // Some file systems do not sync directories (EINVAL): nothing to do there.
  if (::fsync(fd) != 0 && errno != EINVAL)
    throw systemError(dir, "fsync failed");
}

std::string shardc::runtime::parentDirectory(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

void shardc::runtime::makeDirectories(const std::string &dir) {
  if (dir.empty() || isDirectory(dir))
    return;
  std::string parent = parentDirectory(dir);
  if (parent != dir && parent != "." && parent != "/")
    makeDirectories(parent);
  if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST)
    throw systemError(dir, "cannot create directory");
  if (!isDirectory(dir))
    throw std::runtime_error(dir + ": exists and is not a directory");
}

void shardc::runtime::removeTree(const std::string &path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0)
    return;
  if (S_ISDIR(st.st_mode)) {
    for (const std::string &name : listDirectory(path))
      removeTree(path + "/" + name);
    if (::rmdir(path.c_str()) != 0 && errno != ENOENT)
      throw systemError(path, "cannot remove directory");
  } else if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    throw systemError(path, "cannot remove");
  }
}

bool shardc::runtime::pathExists(const std::string &path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

bool shardc::runtime::isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string>
shardc::runtime::listDirectory(const std::string &dir) {
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    throw systemError(dir, "cannot list directory");
  std::vector<std::string> names;
  while (struct dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..")
      names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

std::string shardc::runtime::readTextFile(const std::string &path) {
  std::string text, error;
  if (!readInputFile(path, kMaxTextFileBytes,
                     "the " + formatBytes(kMaxTextFileBytes) +
                         " a text file may have",
                     text, error))
    throw std::runtime_error(error);
  return text;
}

DurableFile::DurableFile(const std::string &path)
    : path_(path), tmp_(path + ".tmp." + std::to_string(::getpid())) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw std::runtime_error(path + ": exists and is not a regular file; "
                                    "refusing to replace it");
  // Temporaries of writers that were killed (kill -9 leaves no chance to
  // clean up): their process is gone.
  std::string dir = parentDirectory(path), base = path.substr(
      path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1) + ".tmp.";
  if (isDirectory(dir))
    for (const std::string &name : listDirectory(dir))
      if (name.rfind(base, 0) == 0) {
        std::string pid = name.substr(base.size());
        if (!pid.empty() && pid.find_first_not_of("0123456789") ==
                                std::string::npos &&
            ::kill(pid_t(std::stoll(pid)), 0) != 0 && errno == ESRCH)
          ::unlink((dir + "/" + name).c_str());
      }
  int fd = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0)
    throw systemError(tmp_, "cannot open for writing");
  fd_ = FileHandle(fd);
}

DurableFile::~DurableFile() {
  if (!committed_) {
    fd_ = FileHandle();
    ::unlink(tmp_.c_str());
  }
}

void DurableFile::write(const void *src, uint64_t bytes) {
  writeAll(fd_.fd(), tmp_, src, bytes);
}

void DurableFile::commit() {
  syncFile(fd_.fd(), tmp_);
  if (::close(fd_.release()) != 0)
    throw systemError(tmp_, "close failed");
  if (::rename(tmp_.c_str(), path_.c_str()) != 0)
    throw systemError(path_, "cannot rename the temporary file into place");
  committed_ = true;
  syncDirectory(parentDirectory(path_));
}

void shardc::runtime::writeFileDurably(const std::string &path,
                                       const std::string &text) {
  DurableFile f(path);
  f.write(text.data(), text.size());
  f.commit();
}
