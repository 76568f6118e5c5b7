#!/usr/bin/env bash
# `make demo`: the main job on an embedded default. Until the engine lands, it
# builds a capture with wire/ (every RoCEv2 opcode and an iWARP stream), shows
# it through tshark and checks it with `softrdma lint`.
set -euo pipefail
build=${1:-build}
out=$build/demo
mkdir -p "$out"
bin=$build/bin/softrdma

echo "== softrdma sample-trace $out/sample.pcap"
"$bin" sample-trace "$out/sample.pcap"

echo
echo "== tshark summary (first 12 frames)"
tshark -n -r "$out/sample.pcap" --disable-protocol rpcordma 2>/dev/null | head -12
echo "   ... $(tshark -n -r "$out/sample.pcap" 2>/dev/null | wc -l) frames in all"

echo
echo "== softrdma lint $out/sample.pcap"
"$bin" lint "$out/sample.pcap"

echo
echo "== softrdma lint on a capture with a corrupted ICRC (expected to fail)"
conf=$(cd "$(dirname "$0")/.." && pwd)/../shared/conformance
if [ -f "$conf/roce-good-badicrc-truncated.pcap" ]; then
  "$bin" lint "$conf/roce-good-badicrc-truncated.pcap" || echo "(exit $? : violations found, as expected)"
fi
