#!/usr/bin/env python3
"""The Debian package: built from the build tree with cpack, its Depends checked against what its
ELF files need, installed with dpkg into this system (as root: CI runs in a throwaway container,
and only a real install checks that dpkg accepts the Depends and that the files land where
programs find them), used from the installed paths (--version, man, devices and its version
line, an ibv_rc_pingpong pair through `softrdma run` tracing to pcapng, the traces' section
header naming the version (capinfos), lint of the traces, the system's libibverbs left alone), then purged, every file it listed gone. The state is restored in a `finally` (and on
SIGTERM/SIGINT); a run killed outright leaves a marker, and the next run purges what it left.
softrdma-wireshark is built and checked but not installed: other tests run tshark meanwhile.

usage: check_deb.py BUILD_DIR WORK_DIR VERSION
Exit 77 (skipped) when not root or when a softrdma package this test did not install is there."""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from installed import check_pingpong_pair, clean_env, expect, failures, system_libibverbs
from testlib import skip, wait_for  # tests/ is on sys.path through installed

build, work, version = sys.argv[1:4]
marker = os.path.normpath(os.path.join(work, "..", "softrdma-deb-installed-by-check_deb"))


def run(*cmd, **kw):
    return subprocess.run(list(cmd), capture_output=True, text=True, **kw)


def installed_version(pkg):
    r = run("dpkg-query", "-W", "-f=${Status} ${Version}", pkg)
    return r.stdout.split()[-1] if r.returncode == 0 and "install ok installed" in r.stdout else None


def dpkg(*args):
    """dpkg ARGS, retried for a while when another dpkg holds the lock."""
    last = []

    def through():
        last[:] = [run("dpkg", *args)]
        return last[0].returncode == 0 or "lock" not in last[0].stderr
    wait_for(through, 30, interval=1)
    return last[0]


def owner(path):
    """The package owning `path` (dpkg -S, also under its /usr-merged twin: /lib/x and
    /usr/lib/x are one file), or None."""
    twin = path.removeprefix("/usr") if path.startswith(("/usr/lib", "/usr/bin", "/usr/sbin")) else \
        "/usr" + path if path.startswith(("/lib", "/bin", "/sbin")) else path
    for p in (path, twin):
        r = run("dpkg", "-S", p)
        if r.returncode == 0:
            return r.stdout.split(":")[0].split(",")[0].strip()
    return None


def depends_names(deb):
    r = run("dpkg-deb", "-f", deb, "Depends")
    names = set()
    for alt in r.stdout.replace("|", ",").split(","):
        if alt.strip():
            names.add(alt.split("(")[0].strip())
    return names


def check_depends(deb, what):
    """Depends must name exactly the packages owning the libraries the package's ELF files need
    (DT_NEEDED), but for the libraries it ships itself."""
    x = os.path.join(work, "x-" + what)
    shutil.rmtree(x, ignore_errors=True)
    r = run("dpkg-deb", "-x", deb, x)
    if not expect(r.returncode == 0, f"dpkg-deb -x {what}", r.stderr):
        return
    files = [os.path.join(d, f) for d, _, fs in os.walk(x) for f in fs]
    shipped = {os.path.basename(f) for f in files}
    needed = set()
    for f in files:
        if os.path.islink(f):
            continue
        with open(f, "rb") as fh:
            if fh.read(4) != b"\x7fELF":
                continue
        for line in run("readelf", "-d", f).stdout.splitlines():
            if "(NEEDED)" in line:
                needed.add(line.split("[")[1].split("]")[0])
    ldconfig = {}
    for line in run("ldconfig", "-p").stdout.splitlines():
        if "=>" in line:
            ldconfig.setdefault(line.split()[0], line.split("=>")[1].strip())
    want = set()
    for lib in sorted(needed - shipped):
        pkg = owner(ldconfig[lib]) if lib in ldconfig else None
        if expect(pkg, f"{what}: the system library {lib} belongs to a package"):
            want.add(pkg)
    have = depends_names(deb)
    print(f"{what}: needs {sorted(needed)}; Depends {sorted(have)}")
    expect(want <= have, f"{what}: Depends names every runtime library's package", str(sorted(want - have)))
    expect(have <= want, f"{what}: Depends names nothing but runtime libraries' packages",
           str(sorted(have - want)))


def purge_and_check(listed):
    r = dpkg("--purge", "softrdma")
    expect(r.returncode == 0, "dpkg --purge softrdma", r.stdout + r.stderr)
    expect(installed_version("softrdma") is None, "softrdma is no longer installed")
    left = []
    for p in listed:
        if p == "/." or not os.path.lexists(p):  # "/.": dpkg -L's root entry
            continue
        if os.path.isdir(p) and not os.path.islink(p) and owner(p):
            continue  # a directory other packages share
        left.append(p)
    expect(not left, "nothing of the package is left after the purge", "\n".join(left))
    if installed_version("softrdma") is None:
        os.remove(marker)


def on_signal(signum, _frame):
    raise SystemExit(f"signal {signum}")


if os.geteuid() != 0:
    skip("installing a .deb with dpkg needs root")
have_version = installed_version("softrdma")
if have_version and os.path.exists(marker):
    print("purging the softrdma package an earlier run of this test left installed")
    dpkg("--purge", "softrdma")
elif have_version:
    skip(f"a softrdma package ({have_version}) is installed, not by this test; it would be "
         "replaced and purged")

shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
arch = run("dpkg", "--print-architecture").stdout.strip()
t0 = time.monotonic()
r = run("cpack", "--config", os.path.join(build, "CPackConfig.cmake"), "-G", "DEB", "-B", work)
print(f"cpack: {time.monotonic() - t0:.1f} s")
deb = os.path.join(work, f"softrdma_{version}_{arch}.deb")
if not expect(r.returncode == 0 and os.path.exists(deb), f"cpack builds {os.path.basename(deb)}",
              r.stdout[-3000:] + r.stderr[-3000:]):
    sys.exit(1)
expect(run("dpkg-deb", "-f", deb, "Version").stdout.strip() == version, "the package's Version is the project's")
check_depends(deb, "softrdma")
plugin_deb = os.path.join(work, f"softrdma-wireshark_{version}_{arch}.deb")
if os.path.exists(os.path.join(build, "lib", "wireshark")):
    if expect(os.path.exists(plugin_deb), "cpack builds softrdma-wireshark"):
        check_depends(plugin_deb, "softrdma-wireshark")
        plugindir = run("pkg-config", "--variable=plugindir", "wireshark").stdout.strip()
        files = [l.split()[-1].lstrip(".") for l in run("dpkg-deb", "-c", plugin_deb).stdout.splitlines()
                 if not l.startswith("d")]
        expect(files == [plugindir + "/epan/softrdma.so"],
               "softrdma-wireshark holds the plugin in the directory Debian's Wireshark searches", str(files))

signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)
listed = []
try:
    open(marker, "w").close()
    r = dpkg("-i", deb)
    if not expect(r.returncode == 0, "dpkg -i softrdma.deb", r.stdout + r.stderr):
        sys.exit(1)
    listed = [l for l in run("dpkg", "-L", "softrdma").stdout.splitlines() if l.startswith("/")]
    env = clean_env()
    softrdma = "/usr/bin/softrdma"
    expect(softrdma in listed and installed_version("softrdma") == version, "installed: /usr/bin/softrdma")
    r = run(softrdma, "--version", env=env)
    expect(r.returncode == 0 and r.stdout.strip() == f"softrdma {version}", "softrdma --version", r.stdout + r.stderr)
    r = run("man", "-w", "softrdma", env=env)
    expect(r.returncode == 0 and r.stdout.strip() in listed, "man softrdma finds the installed page",
           r.stdout + r.stderr)
    r = run(softrdma, "devices", env=env, timeout=30)
    expect(r.returncode == 0 and "softroce0" in r.stdout, "softrdma devices", r.stdout + r.stderr)
    expect(r.stdout.startswith(f"softrdma {version}\n"), "softrdma devices starts with the version", r.stdout)

    libdir = next((os.path.dirname(p) for p in listed if p.endswith("/softrdma/libibverbs.so.1")), None)
    if expect(libdir, "the package holds libibverbs.so.1 in a directory softrdma/ of its own", str(listed)):
        traces = os.path.join(work, "trace-%p.pcapng")
        check_pingpong_pair(softrdma, env, libdir, run_opts=("--pcap", traces))
        files = sorted(glob.glob(os.path.join(work, "trace-*.pcapng")))
        expect(len(files) == 2, "the pair wrote one trace per process", str(files))
        for f in files:
            r = run("capinfos", f, env=env)
            expect(re.search(rf"^Capture application: +softrdma {re.escape(version)}$", r.stdout, re.M),
                   f"the section header of {os.path.basename(f)} names softrdma {version}", r.stdout + r.stderr)
            r = run(softrdma, "lint", f, env=env)
            m = re.search(r"(\d+) RoCEv2 packets", r.stdout)
            expect(r.returncode == 0 and m and int(m.group(1)) > 0 and "(0 errors," in r.stdout, f"softrdma lint {os.path.basename(f)}",
                   r.stdout[-2000:] + r.stderr)
        line = system_libibverbs(env)
        path = line.split("=>")[1].split("(")[0].strip() if "=>" in line else ""
        expect(path and not path.startswith(libdir) and owner(os.path.realpath(path)) == "libibverbs1",
               "with the package installed, ibv_devices alone loads rdma-core's libibverbs", line)
        r = run("ldconfig", "-p")
        expect("/softrdma/" not in r.stdout, "the private directory is not on the system's library path")
finally:
    if os.path.exists(marker):
        purge_and_check(listed)

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
