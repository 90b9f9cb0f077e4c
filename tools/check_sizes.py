#!/usr/bin/env python3
"""Checks the source layout's size limits: lines a file and lines a function.

usage: tools/check_sizes.py [--list N] [--functions DIR...] [--files DIR...]
                            [--max-function 120] [--max-file 600]
                            [--exclude PATH...]

--functions DIR: every C++/CUDA function defined under DIR (.cpp .cu .h
.cuh .inc) is at most --max-function lines, counted as clang-tidy's
readability-function-size counts them: from the line of the body's opening
brace to the line of its closing brace. Lambdas and local classes count
toward the function that holds them.
--files DIR: every source under DIR is at most --max-file lines.
--list N prints the N longest functions found. Prints each breach as
`path:line: name: N lines (limit M)` and exits 1 if there is one.

The scanner is lexical (comments, strings and preprocessor lines removed,
braces matched); it recognises namespace, class, struct, union, enum and
extern blocks, and treats every other brace at their level whose head has a
parameter list as a function body.
"""
import argparse
import os
import re
import sys

SOURCES = (".cpp", ".cu", ".h", ".cuh", ".inc", ".cc")


def strip(text):
  """Blanks comments, string and char literals and preprocessor lines,
  keeping every newline so that line numbers hold."""
  out = []
  i, n = 0, len(text)
  line_start = True
  while i < n:
    c = text[i]
    if line_start and c in " \t":
      out.append(c)
      i += 1
      continue
    if line_start and c == "#":
      # a preprocessor line, with its continuations
      while i < n and text[i] != "\n":
        if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
          out.append("\n")
          i += 2
          continue
        i += 1
      continue
    line_start = False
    if c == "\n":
      line_start = True
      out.append(c)
      i += 1
    elif text.startswith("//", i):
      while i < n and text[i] != "\n":
        i += 1
    elif text.startswith("/*", i):
      j = text.find("*/", i + 2)
      j = n if j < 0 else j + 2
      out.append("\n" * text.count("\n", i, j))
      i = j
    elif c == "R" and text.startswith('"', i + 1) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
      m = re.match(r'R"([^(\s]*)\(', text[i:])
      if not m:
        out.append(c)
        i += 1
        continue
      end = ")" + m.group(1) + '"'
      j = text.find(end, i + m.end())
      j = n if j < 0 else j + len(end)
      out.append('""' + "\n" * text.count("\n", i, j))
      i = j
    elif c in "\"'":
      if c == "'" and i > 0 and text[i - 1].isalnum():
        out.append(" ")  # a digit separator: 1'000
        i += 1
        continue
      j = i + 1
      while j < n and text[j] != c and text[j] != "\n":
        j += 2 if text[j] == "\\" else 1
      out.append(c + c)
      i = j + 1
    else:
      out.append(c)
      i += 1
  return "".join(out)


CONTAINER = re.compile(r"\b(namespace|class|struct|union|enum|extern)\b")


def drop_parens(s):
  depth, out = 0, []
  for c in s:
    if c == "(":
      depth += 1
    elif c == ")":
      depth -= 1
    elif depth == 0:
      out.append(c)
  return "".join(out)


def classify(head):
  """What a brace opened after `head` (the text since the last ; { or }
  at its level) begins: 'container', 'function' or 'other'."""
  h = " ".join(head.split())
  if not h:
    return "other"
  outer = drop_parens(h)
  if CONTAINER.search(outer) and "(" not in h.split("{")[0].split(":")[0]:
    return "container"
  if re.search(r"=\s*\[[^\]]*\]\s*(\(.*\))?[^=]*$", h):
    return "function"  # a lambda bound at namespace or class level
  if "=" in outer.replace("==", "").replace("operator=", ""):
    return "other"  # an initializer
  if ")" not in h:
    return "other"
  # a constructor's member initializer `y{...}` inside its init list
  if re.search(r"\)\s*:\s*.*\w\s*$", h) and not re.search(r"\)\s*(const|override|noexcept|final|mutable)?\s*$", h):
    if re.search(r"[,:]\s*[\w:<>]+\s*$", h):
      return "other"
  return "function"


def name_of(head):
  h = " ".join(head.split())
  h = re.split(r"\)\s*:\s*(?=\w)", h)[0]  # drop a constructor's init list
  m = None
  for m in re.finditer(r"([~\w:]+(?:<[^()]*>)?|operator\s*\S+)\s*\(", h):
    if m.group(1) not in ("if", "for", "while", "switch", "return", "sizeof", "decltype",
                          "alignof", "alignas", "noexcept", "__launch_bounds__",
                          "__attribute__"):
      break
  return m.group(1) if m else h[:60]


def functions(path):
  """Yields (name, first line, lines) of every function body in a file."""
  with open(path, encoding="utf-8", errors="replace") as f:
    text = strip(f.read())
  # a stack of frames: kind, line of '{', head, start of the next head
  stack = [("container", 0, "")]
  head_start = 0
  line = 1
  for i, c in enumerate(text):
    if c == "\n":
      line += 1
    elif c == ";":
      if stack[-1][0] == "container":
        head_start = i + 1
    elif c == "{":
      kind = stack[-1][0]
      if kind == "container":
        head = text[head_start:i]
        kind = classify(head)
        stack.append((kind, line, head))
        if kind != "other":  # an initializer's braces stay in the head
          head_start = i + 1
      else:
        stack.append(("inner", line, ""))
    elif c == "}":
      kind, first, head = stack.pop() if len(stack) > 1 else ("container", 0, "")
      if kind == "function":
        yield name_of(head), first, line - first + 1
      if stack[-1][0] == "container" and kind != "other":
        head_start = i + 1


def sources(paths, exclude):
  for root in paths:
    if os.path.isfile(root):
      yield root
      continue
    for d, dirs, files in os.walk(root):
      dirs.sort()
      if any(os.path.normpath(d).startswith(os.path.normpath(e)) for e in exclude):
        continue
      for f in sorted(files):
        if f.endswith(SOURCES):
          yield os.path.join(d, f)


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--functions", nargs="*", default=[])
  ap.add_argument("--files", nargs="*", default=[])
  ap.add_argument("--max-function", type=int, default=120)
  ap.add_argument("--max-file", type=int, default=600)
  ap.add_argument("--exclude", nargs="*", default=[])
  ap.add_argument("--list", type=int, default=0)
  a = ap.parse_args()
  bad = 0
  found = []
  for p in sources(a.functions, a.exclude):
    for name, first, n in functions(p):
      found.append((n, p, first, name))
      if n > a.max_function:
        print(f"{p}:{first}: {name}: {n} lines (limit {a.max_function})")
        bad += 1
  for p in sources(a.files, a.exclude):
    with open(p, encoding="utf-8", errors="replace") as f:
      n = sum(1 for _ in f)
    if n > a.max_file:
      print(f"{p}: {n} lines (limit {a.max_file})")
      bad += 1
  for n, p, first, name in sorted(found, reverse=True)[: a.list]:
    print(f"  {n:5d}  {p}:{first}: {name}")
  if a.functions:
    print(f"check_sizes: {len(found)} functions under {' '.join(a.functions)}, "
          f"the longest {max([f[0] for f in found], default=0)} lines")
  return 1 if bad else 0


if __name__ == "__main__":
  sys.exit(main())
