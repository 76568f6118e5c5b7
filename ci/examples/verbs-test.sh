#!/bin/sh
# An example of a project's verbs test run on softrdma (docs/ci.md): an ibv_rc_pingpong pair
# through `softrdma run`, each side tracing to pcapng, and `softrdma lint` on the traces.
# Replace the pair with your own programs; keep `softrdma run` in front of each.
set -eu
out=${1:-/tmp/verbs-test}
mkdir -p "$out"
softrdma --version
softrdma devices

softrdma run --pcap "$out/rc-%p.pcapng" -- ibv_rc_pingpong -g 1 -n 100 &
server=$!
# The client connects once the server listens: retry until it does (at most 10 s).
tries=0
until softrdma run --pcap "$out/rc-%p.pcapng" -- ibv_rc_pingpong -g 1 -n 100 127.0.0.1; do
    tries=$((tries + 1))
    [ "$tries" -lt 20 ] || { echo "verbs-test: the client never connected" >&2; kill "$server"; exit 1; }
    sleep 0.5
done
wait "$server"

for trace in "$out"/rc-*.pcapng; do
    softrdma lint "$trace"
done
echo "verbs-test: passed"
