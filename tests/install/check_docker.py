#!/usr/bin/env python3
"""The CI recipe of docs/ci.md (ci/examples/): the workflow parses and builds the image from the
Dockerfile; the example verbs test passes on this host with the build's softrdma; then, where a
container engine works, the Dockerfile is built with the .deb cpack makes and the container runs
the test. Without a working engine that last part is skipped (exit 77) saying what was missing.

usage: check_docker.py SOURCE_DIR BUILD_DIR WORK_DIR VERSION"""
import os
import shutil
import subprocess
import sys

import yaml

from installed import clean_env, expect, failures

source, build, work, version = sys.argv[1:5]
SKIP = 77
examples = os.path.join(source, "ci", "examples")


def run(*cmd, **kw):
    return subprocess.run(list(cmd), capture_output=True, text=True, **kw)


def done():
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)

# The workflow: valid YAML, a job that builds the image from the Dockerfile's directory and runs it.
with open(os.path.join(examples, "github-actions.yml")) as f:
    flow = yaml.safe_load(f)
steps = [s.get("run", "") for job in flow["jobs"].values() for s in job["steps"]]
expect(any(s.startswith("docker build") for s in steps) and any(s.startswith("docker run") for s in steps),
       "the workflow builds the image and runs it", str(steps))
expect(any("make -C softrdma deb" in s for s in steps), "the workflow builds the .deb with make deb", str(steps))

# The example test itself, on this host with the build's softrdma first on PATH.
env = clean_env()
env["PATH"] = os.path.join(build, "bin") + ":" + env["PATH"]
r = run("sh", os.path.join(examples, "verbs-test.sh"), os.path.join(work, "host"), env=env, timeout=60)
expect(r.returncode == 0 and "verbs-test: passed" in r.stdout, "verbs-test.sh passes on this host",
       r.stdout[-3000:] + r.stderr[-3000:])
done()

engine = shutil.which("docker") or shutil.which("podman")
if not engine:
    print("SKIP: no container engine: neither docker nor podman is on PATH")
    sys.exit(SKIP)
r = run(engine, "info", timeout=60)
if r.returncode != 0:
    why = next((l.strip() for l in (r.stderr + r.stdout).splitlines() if "rror" in l or "annot" in l),
               (r.stderr or r.stdout).strip()[-300:])
    print(f"SKIP: `{engine} info` failed, the engine has no daemon/runtime to use: {why}")
    sys.exit(SKIP)
base = run(engine, "image", "inspect", "debian:12")
if base.returncode != 0 and run(engine, "pull", "debian:12", timeout=600).returncode != 0:
    print(f"SKIP: {engine} works but cannot pull debian:12 (no registry access)")
    sys.exit(SKIP)

arch = run("dpkg", "--print-architecture").stdout.strip()
context = os.path.join(work, "context")
shutil.copytree(examples, context)
r = run("cpack", "--config", os.path.join(build, "CPackConfig.cmake"), "-G", "DEB", "-B", os.path.join(work, "pkg"))
deb = os.path.join(work, "pkg", f"softrdma_{version}_{arch}.deb")
if not expect(r.returncode == 0 and os.path.exists(deb), "cpack builds the .deb", r.stdout[-2000:] + r.stderr[-2000:]):
    done()
shutil.copy(deb, context)
tag = f"softrdma-ci-check:{version}"
try:
    r = run(engine, "build", "-t", tag, context, timeout=900)
    if expect(r.returncode == 0, f"{engine} build of ci/examples/Dockerfile", r.stdout[-3000:] + r.stderr[-3000:]):
        r = run(engine, "run", "--rm", tag, timeout=300)
        expect(r.returncode == 0 and "verbs-test: passed" in r.stdout and f"softrdma {version}" in r.stdout,
               "the container runs the verbs test on the installed softrdma", r.stdout[-3000:] + r.stderr[-3000:])
finally:
    run(engine, "image", "rm", "-f", tag)
done()
print("ok")
