#!/usr/bin/env python3
"""Unpacks cudnn-frontend's headers (header-only, MIT) into the build tree.

PyPI's nvidia-cudnn-frontend wheel ships the library's include/ folder; this
fetches one pinned wheel, checks its SHA-256 and unpacks include/ only:

    tools/fetch_cudnn_frontend.py build/third_party/cudnn-frontend

Safe to re-run: an unpacked, matching version is left as it is. No
third-party code is committed to shardc.
"""
import hashlib
import io
import os
import sys
import urllib.request
import zipfile

VERSION = "1.32.0"
# Any of the version's wheels carries the same headers; this is CPython
# 3.11's for x86-64 Linux.
URL = ("https://files.pythonhosted.org/packages/11/02/"
       "660e2dd9f9d9f940e1641443771730612c3aadaafbc5ef7a93cc313d519d/"
       "nvidia_cudnn_frontend-1.32.0-cp311-cp311-manylinux_2_27_x86_64."
       "manylinux_2_28_x86_64.whl")
SHA256 = "c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: fetch_cudnn_frontend.py DIR")
    dest = sys.argv[1]
    stamp = os.path.join(dest, "VERSION")
    if os.path.exists(stamp) and open(stamp).read().strip() == VERSION:
        return
    print(f"setup: fetching cudnn-frontend {VERSION} headers from PyPI")
    try:
        data = urllib.request.urlopen(URL, timeout=120).read()
    except OSError as e:
        sys.exit(f"error: cannot download {URL}: {e}")
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256:
        sys.exit(f"error: {URL}: SHA-256 {digest}, expected {SHA256}")
    wheel = zipfile.ZipFile(io.BytesIO(data))
    count = 0
    for name in wheel.namelist():
        if name.startswith("include/") and not name.endswith("/"):
            wheel.extract(name, dest)
            count += 1
    with open(stamp, "w") as f:
        f.write(VERSION + "\n")
    print(f"setup: {count} headers in {dest}/include")


if __name__ == "__main__":
    main()
