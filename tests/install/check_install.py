#!/usr/bin/env python3
"""`cmake --install` into a staging DESTDIR, then softrdma used from the installed tree only:
--version and --help, `softrdma devices`, an ibv_rc_pingpong pair through `softrdma run`
(mapping the installed libibverbs, not the build tree's), sample-trace + lint, the man page;
and a program started without `softrdma run` still loads the system's libibverbs.

usage: check_install.py BUILD_DIR WORK_DIR VERSION"""
import os
import re
import shutil
import subprocess
import sys

from installed import check_pingpong_pair, clean_env, expect, failures, system_libibverbs

build, work, version = sys.argv[1:4]

shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
dest = os.path.join(work, "dest")
prefix = "/opt/softrdma-check"
r = subprocess.run(["cmake", "--install", build, "--prefix", prefix], env={**os.environ, "DESTDIR": dest},
                   capture_output=True, text=True)
if not expect(r.returncode == 0, "cmake --install", r.stdout + r.stderr):
    sys.exit(1)
root = dest + prefix
softrdma = os.path.join(root, "bin", "softrdma")
installed = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)
print("installed:", ", ".join(installed))
libdir = [f for f in installed if f.endswith("/softrdma/libibverbs.so.1")]
expect(len(libdir) == 1, "libibverbs.so.1 in a private lib/.../softrdma/ directory", str(installed))
expect(not any(re.fullmatch(r"lib(/[a-z0-9_]+-linux-gnu[a-z0-9_]*)?/lib(ibverbs|rdmacm)\.so.*", f)
               for f in installed),
       "no drop-in library on a standard library path", str(installed))
expect(any(f.endswith("softrdma/librdmacm.so.1") for f in installed), "librdmacm.so.1 installed")
expect("share/man/man1/softrdma.1" in installed, "the man page installed")
expect("share/bash-completion/completions/softrdma" in installed, "the bash completion installed")

# Nothing of the build tree on any path, and no library path of ours.
env = clean_env()

r = subprocess.run([softrdma, "--version"], env=env, capture_output=True, text=True)
expect(r.returncode == 0 and r.stdout.strip() == f"softrdma {version}", "--version", r.stdout + r.stderr)
for args in (["run", "--help"], ["help", "lint"], ["lint", "-h"], ["help"]):
    r = subprocess.run([softrdma, *args], env=env, capture_output=True, text=True)
    expect(r.returncode == 0 and r.stdout.startswith("usage: softrdma"), f"softrdma {' '.join(args)}",
           r.stdout + r.stderr)
r = subprocess.run([softrdma, "run", "--bogus"], env=env, capture_output=True, text=True)
expect(r.returncode == 2 and "unknown option" in r.stderr, "a bad option still exits 2", r.stderr)
page = os.path.join(root, "share/man/man1/softrdma.1")
r = subprocess.run(["man", "-l", page], env={**env, "MANPAGER": "cat", "MANWIDTH": "100"},
                   capture_output=True, text=True)
expect(r.returncode == 0 and "softrdma run" in r.stdout and f"softrdma {version}" in r.stdout,
       "man -l softrdma.1", r.stderr[-2000:])
# The page has every command, option and variable the binary's usage has, and the config file.
r = subprocess.run(["man", "-l", page], env={**env, "MANPAGER": "cat", "MANWIDTH": "1000"},  # no hyphenation
                   capture_output=True, text=True)
page_text = re.sub(r"\s+", " ", r.stdout)
usage = subprocess.run([softrdma, "help"], env=env, capture_output=True, text=True).stdout
names = {l.split()[1] for l in usage.splitlines() if l.startswith("  softrdma ")}
for c in sorted(names):
    names |= set(re.findall(r"--[a-z][a-z-]*|SOFTRDMA_[A-Z_]+",
                            subprocess.run([softrdma, "help", c], env=env, capture_output=True, text=True).stdout))
missing = [n for n in sorted(names | {"SOFTRDMA_CONFIG", "SOFTRDMA_LIBDIR", "CONFIGURATION FILE"})
           if n not in page_text]
expect(len(names) > 20 and not missing, "the man page names every command, option and variable", str(missing))

r = subprocess.run([softrdma, "devices"], env=env, capture_output=True, text=True, timeout=30)
expect(r.returncode == 0 and "softroce0" in r.stdout, "softrdma devices", r.stdout + r.stderr)
expect(r.stdout.startswith(f"softrdma {version}\n"), "softrdma devices starts with the version", r.stdout)

# An ibv_rc_pingpong pair from the installed tree.
mapped = check_pingpong_pair(softrdma, env, root)
tree = os.path.realpath(build) + "/"
outside = [m for m in mapped if m.startswith(tree) and not m.startswith(root + "/")]
expect(not outside, "nothing of the build tree mapped (the staging tree aside)", str(outside))

# Traces and lint from the installed tree.
cap = os.path.join(work, "sample.pcap")
r = subprocess.run([softrdma, "sample-trace", cap], env=env, capture_output=True, text=True)
expect(r.returncode == 0, "sample-trace", r.stderr)
r = subprocess.run([softrdma, "lint", cap], env=env, capture_output=True, text=True)
expect(r.returncode == 0, "lint of the sample trace exits 0", r.stdout + r.stderr)

# Without `softrdma run`, a program keeps the system's libibverbs.
line = system_libibverbs(env)
expect(line and root not in line and tree not in line,
       "ibv_devices alone loads the system's libibverbs", line)

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
