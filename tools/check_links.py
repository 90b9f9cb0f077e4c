#!/usr/bin/env python3
"""Checks the relative links of markdown files.

usage: tools/check_links.py [--max-lines N FILE] FILE.md...

Every inline link or image, [text](target) and ![alt](target), whose target
is not a URL (http:, https:, mailto:) must name a file or directory that
exists relative to the file that links it; the part after '#' is not
checked, and a link that is only '#anchor' is skipped. Links inside code
(indented blocks, fenced blocks, `spans`) are not links. With --max-lines,
FILE must have at most N lines. Prints 'links: N checked in M files, all
resolve' and exits 0, or one 'FILE:LINE: broken link 'target'' a link (and
the over-long file) and exits 1.
"""
import argparse
import os
import re
import sys

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def links(path):
    """(line number, target) of each link outside code."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            if fenced or line.startswith("    ") or line.startswith("\t"):
                continue
            text = re.sub(r"`[^`]*`", "", line)
            for m in LINK.finditer(text):
                yield n, m.group(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-lines", nargs=2, metavar=("N", "FILE"), action="append",
                    default=[])
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    broken, checked = [], 0
    for n, path in a.max_lines:
        with open(path, encoding="utf-8") as f:
            count = sum(1 for _ in f)
        if count > int(n):
            broken.append(f"{path}: {count} lines, more than {n}")
    for path in a.files:
        for n, target in links(path):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            checked += 1
            file = target.split("#", 1)[0]
            if not os.path.exists(os.path.join(os.path.dirname(path), file)):
                broken.append(f"{path}:{n}: broken link '{target}'")
    for b in broken:
        print(b)
    if broken:
        sys.exit(1)
    print(f"links: {checked} checked in {len(a.files)} files, all resolve")


if __name__ == "__main__":
    main()
