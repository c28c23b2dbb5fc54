#!/usr/bin/env python3
"""Checks kvrt's layering: every quoted #include of a library's code names a
header of its own folder or of a folder one of its (transitive) kvrt
dependencies builds. The libraries, their folders and dependencies come from
build/layers.txt, which cmake/KvrtLibrary.cmake writes from the kvrt_library()
calls, so the CMake DEPS are the only statement of the layering.

Usage: check_layers.py BUILD/layers.txt SOURCE_ROOT
Exit status 0 when every include is allowed, 1 with one line per violation.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def load(path):
    libs = {}
    for line in open(path):
        fields = line.split()
        if not fields:
            continue
        name, folder = fields[0], fields[1]
        deps, sources = [], []
        for f in fields[2:]:
            if f.startswith("deps="):
                deps = [d for d in f[5:].split(",") if d]
            elif f.startswith("sources="):
                sources = [s for s in f[8:].split(",") if s]
        libs[name] = {"folder": folder, "deps": deps, "sources": sources}
    return libs


def reached(libs, name, seen=None):
    seen = set() if seen is None else seen
    if name in seen or name not in libs:
        return seen
    seen.add(name)
    for d in libs[name]["deps"]:
        reached(libs, d, seen)
    return seen


def folder_of(include, folders):
    best = None
    for f in folders:
        if include.startswith(f + "/") and (best is None or len(f) > len(best)):
            best = f
    return best


def main():
    libs = load(sys.argv[1])
    root = sys.argv[2]
    folders = {lib["folder"] for lib in libs.values()}
    allowed = {}
    for name in libs:
        allowed[name] = {libs[d]["folder"] for d in reached(libs, name)}
    # A folder's headers may include what any library of that folder may.
    by_folder = {}
    for name, lib in libs.items():
        by_folder.setdefault(lib["folder"], set()).update(allowed[name])
    checks = []  # (file, allowed folders, who)
    for name, lib in libs.items():
        for s in lib["sources"]:
            if s.startswith(("build", "/")) or not os.path.exists(os.path.join(root, s)):
                continue  # generated sources: the generator's own includes
            checks.append((s, allowed[name], name))
    for folder, ok in by_folder.items():
        path = os.path.join(root, folder)
        if not os.path.isdir(path):
            continue
        for f in sorted(os.listdir(path)):
            if f.endswith((".hpp", ".cuh")):
                checks.append((os.path.join(folder, f), ok, folder + " headers"))
    bad = []
    for path, ok, who in checks:
        text = open(os.path.join(root, path), errors="replace").read()
        for inc in INCLUDE.findall(text):
            target = folder_of(inc, folders)
            if target is None or target in ok:
                continue
            bad.append(f"{path}: includes {inc}, but {who} does not depend on {target}")
    for b in bad:
        print(b)
    print(f"layers: {len(checks)} files checked, {len(bad)} includes outside their library's dependencies")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
