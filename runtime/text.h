//===- text.h - names from input files, made safe to print ---------*- C++ -*-===//
//
// Tensor, node and file names come from the files a user hands to shardc or
// to a trainer, and any of them may hold a newline or an escape sequence
// ("\x1b[31m") that would split a one-line error or drive the terminal.
// Every message and log line that quotes such a name goes through
// printable(). Header-only and without MLIR, for the compiler and the
// runtime alike.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_TEXT_H
#define SHARDC_RUNTIME_TEXT_H

#include <cstdint>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>

namespace shardc::runtime {

/// `text` with every byte a terminal could act on written as \XX (two
/// upper-case hex digits): C0 controls (newline, tab, ESC), DEL, the C1
/// controls U+0080..U+009F, and bytes that are not valid UTF-8. Printable
/// ASCII (the backslash included) and other UTF-8 characters are kept, so
/// the result is one line and printable() of it is itself.
inline std::string printable(std::string_view text) {
  static const char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  auto escape = [&](unsigned char c) {
    out += '\\';
    out += hex[c >> 4];
    out += hex[c & 15];
  };
  size_t n = text.size();
  for (size_t k = 0; k < n;) {
    auto c = static_cast<unsigned char>(text[k]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7F)
        escape(c);
      else
        out += char(c);
      ++k;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte, then its
    // continuation bytes, its code point (no overlong forms, no surrogates).
    size_t len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (c > 0xF4)
      len = 0;
    uint32_t cp = len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    bool valid = len != 0 && k + len <= n;
    for (size_t j = 1; valid && j < len; ++j) {
      auto d = static_cast<unsigned char>(text[k + j]);
      valid = (d & 0xC0) == 0x80;
      cp = (cp << 6) | (d & 0x3F);
    }
    if (valid)
      valid = !(len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) &&
              !(len == 4 && (cp < 0x10000 || cp > 0x10FFFF));
    if (!valid) {
      escape(c);
      ++k;
      continue;
    }
    if (cp <= 0x9F) // C1 controls (a 2-byte sequence)
      for (size_t j = 0; j < len; ++j)
        escape(static_cast<unsigned char>(text[k + j]));
    else
      out.append(text.substr(k, len));
    k += len;
  }
  return out;
}

#if __cpp_exceptions
/// The one-line message for the exception being handled (call it inside a
/// catch block) that ends shardc or a trainer, `doing` saying what was
/// under way ("importing model.onnx"): the library's own texts
/// (std::bad_alloc, vector::_M_default_append) are not shown as they are;
/// the project's errors (std::runtime_error and the rest) keep their
/// message. By catch clauses, not dynamic_cast: shardc has no RTTI.
inline std::string describeCurrentException(const std::string &doing) {
  try {
    throw;
  } catch (const std::bad_alloc &) {
    return "out of memory while " + printable(doing);
  } catch (const std::length_error &) {
    return "a size too large to allocate while " + printable(doing) +
           " (a corrupt or hostile input?)";
  } catch (const std::logic_error &e) {
    return "internal error while " + printable(doing) + ": " +
           printable(e.what());
  } catch (const std::exception &e) {
    return printable(e.what());
  } catch (...) {
    return "unknown failure while " + printable(doing);
  }
}
#endif

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_TEXT_H
