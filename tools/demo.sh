#!/usr/bin/env bash
# `make demo`: the main job on an embedded default. Real verbs programs from
# Debian's packages run over softrdma on loopback (no RDMA hardware, no kernel
# module), then a capture built by wire/ is checked with `softrdma lint`.
set -uo pipefail
build=${1:-build}
bin=$build/bin/softrdma
out=$build/demo
mkdir -p "$out"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# run_pair NAME SERVER-ARGS... : starts the server, then the client toward 127.0.0.1.
run_pair() {
  local name=$1; shift
  echo "== $name: $*"
  "$bin" run -- "$@" > "$out/$name.server.log" 2>&1 &
  local srv=$!
  sleep 0.5
  "$bin" run -- "$@" 127.0.0.1 > "$out/$name.client.log" 2>&1
  local crc=$?
  wait $srv
  local src=$?
  tail -n 4 "$out/$name.client.log" | sed 's/^/   /'
  if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
    echo "   FAILED (client $crc, server $src): see $out/$name.*.log"
    return 1
  fi
}

status=0
echo "== softrdma devices"
"$bin" devices || status=1
echo
run_pair rc_pingpong ibv_rc_pingpong -g 0 -p "$(port)" || status=1
run_pair ud_pingpong ibv_ud_pingpong -g 0 -p "$(port)" || status=1
run_pair ib_write_bw ib_write_bw -p "$(port)" -s 65536 -n 2000 || status=1
run_pair ib_read_lat ib_read_lat -p "$(port)" -s 64 -n 2000 || status=1

echo
echo "== softrdma sample-trace $out/sample.pcap (every RoCEv2 opcode, an iWARP stream)"
"$bin" sample-trace "$out/sample.pcap" || status=1
echo "== tshark summary (first 8 frames)"
tshark -n -r "$out/sample.pcap" --disable-protocol rpcordma 2>/dev/null | head -8
echo "== softrdma lint $out/sample.pcap"
"$bin" lint "$out/sample.pcap" || status=1
exit $status
