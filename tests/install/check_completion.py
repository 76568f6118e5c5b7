#!/usr/bin/env python3
"""The bash completion script, sourced in `bash --norc`: it registers itself for softrdma, and
completes commands, run/lint options and option values, help topics and the program after
`run --`. What it offers is checked against the binary: the commands `softrdma help` lists, and
every option and value it offers is one `softrdma run` accepts.

usage: check_completion.py COMPLETION_SCRIPT SOFTRDMA"""
import os
import shlex
import subprocess
import sys

from installed import clean_env, expect, failures

script, softrdma = sys.argv[1:3]
env = clean_env()
env["PATH"] = os.path.dirname(os.path.abspath(softrdma)) + ":" + env["PATH"]


def bash(code):
    return subprocess.run(["bash", "--norc", "--noprofile", "-c", f"source {shlex.quote(script)}; {code}"],
                          env=env, capture_output=True, text=True, timeout=30)


def complete(*words):
    """COMPREPLY for the command line `words`, the cursor at the end of the last one."""
    line = " ".join(shlex.quote(w) for w in words)
    r = bash(f'COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _softrdma; printf "%s\\n" "${{COMPREPLY[@]}}"')
    expect(r.returncode == 0, f"completing {list(words)} runs", r.stderr)
    return [w for w in r.stdout.splitlines() if w]


def run(*args):
    return subprocess.run([softrdma, "run", *args], env=env, capture_output=True, text=True, timeout=30)


r = bash("complete -p softrdma")
expect(r.returncode == 0 and r.stdout.strip() == "complete -F _softrdma softrdma",
       "sourcing the script registers _softrdma for softrdma", r.stdout + r.stderr)

usage = subprocess.run([softrdma, "help"], env=env, capture_output=True, text=True).stdout
commands = {l.split()[1] for l in usage.splitlines() if l.startswith("  softrdma ")}
expect({"run", "devices", "lint"} <= commands, "softrdma help lists the commands", usage)
got = complete("softrdma", "")
expect(set(got) == commands | {"--help", "--version"}, "an empty word offers every command of softrdma help",
       str(got))
expect(complete("softrdma", "li") == ["lint"], "'li' completes to lint", str(complete("softrdma", "li")))
expect(complete("softrdma", "help", "sa") == ["sample-trace"], "help 'sa' completes to sample-trace")
expect(complete("softrdma", "lint", "--st") == ["--strict"], "lint '--st' completes to --strict")
got = complete("softrdma", "run", "--pc")
expect(got == ["--pcap", "--pcap-filter"], "run '--pc' offers --pcap and --pcap-filter", str(got))

# Every option offered is one softrdma run knows (it may want a value, never "unknown option").
offered = [o for o in complete("softrdma", "run", "--") if o not in ("--", "--help")]
expect(len(offered) >= 13, "run '--' offers the run options", str(offered))
for opt in offered:
    r = run(opt)
    expect(r.returncode == 2 and "unknown option" not in r.stderr, f"softrdma run knows {opt}", r.stderr)

# Every value offered is accepted; a wrong one is not (so the check can tell).
for opt in ("--device", "--transport", "--local", "--view"):
    values = complete("softrdma", "run", opt, "")
    expect(len(values) >= 2, f"{opt} offers its values", str(values))
    for v in values:
        r = run(opt, v, "--", "true")
        # --view on is valid but fails where no private view can be had: that says so itself.
        expect(r.returncode == 0 or r.stderr.startswith("softrdma run: --view on:"),
               f"softrdma run {opt} {v} is accepted", r.stderr)
    r = run(opt, "no-such-value", "--", "true")
    expect(opt == "--device" or r.returncode == 2, f"softrdma run {opt} no-such-value is refused", r.stderr)
expect(complete("softrdma", "run", "--device", "softi") == ["softiwarp0"], "--device 'softi' completes")

got = complete("softrdma", "run", "--stats", "--", "ibv_rc_pingp")
expect("ibv_rc_pingpong" in got, "after run --, the program is completed from PATH", str(got))

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
