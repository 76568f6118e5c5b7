#!/usr/bin/env bash
# `make demo`: the main job on an embedded default. Real verbs and rdma_cm programs from
# Debian's packages run over softrdma on loopback (no RDMA hardware, no kernel
# module), each process tracing what it sends and receives; the traces are
# merged, summarised with tshark and checked with `softrdma lint`.
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
  "$bin" run --pcap "$out/traces/$name-%p.pcapng" -- "$@" > "$out/$name.server.log" 2>&1 &
  local srv=$!
  sleep 0.5
  "$bin" run --pcap "$out/traces/$name-%p.pcapng" -- "$@" 127.0.0.1 > "$out/$name.client.log" 2>&1
  local crc=$?
  wait $srv
  local src=$?
  tail -n 4 "$out/$name.client.log" | sed 's/^/   /'
  if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
    echo "   FAILED (client $crc, server $src): see $out/$name.*.log"
    return 1
  fi
}

# rdma_cm: rping connects through librdmacm (CM MADs on QP1), then pings with SEND/READ/WRITE.
run_rping() {
  local p; p=$(port)
  echo "== rping (rdma_cm): -s / -c -a 127.0.0.1 -p $p -C 10"
  "$bin" run --pcap "$out/traces/rping-%p.pcapng" -- rping -s -a 127.0.0.1 -p "$p" -C 10 \
    > "$out/rping.server.log" 2>&1 &
  local srv=$!
  sleep 0.5
  "$bin" run --pcap "$out/traces/rping-%p.pcapng" -- rping -c -v -a 127.0.0.1 -p "$p" -C 10 \
    > "$out/rping.client.log" 2>&1
  local crc=$?
  wait $srv
  local src=$?
  tail -n 2 "$out/rping.client.log" | cut -c1-60 | sed 's/^/   /'
  if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
    echo "   FAILED (client $crc, server $src): see $out/rping.*.log"
    return 1
  fi
}

status=0
rm -rf "$out/traces"
mkdir -p "$out/traces"
echo "== softrdma devices"
"$bin" devices || status=1
echo
run_pair rc_pingpong ibv_rc_pingpong -g 1 -p "$(port)" || status=1
run_pair ud_pingpong ibv_ud_pingpong -g 1 -p "$(port)" || status=1
run_pair ib_write_bw ib_write_bw -p "$(port)" -s 65536 -n 2000 || status=1
run_pair ib_read_lat ib_read_lat -p "$(port)" -s 64 -n 2000 || status=1
run_rping || status=1

echo
echo "== softrdma trace merge $out/traces/*.pcapng -o $out/demo.pcapng"
"$bin" trace merge "$out"/traces/*.pcapng -o "$out/demo.pcapng" || status=1
echo "== tshark summary of the merged trace (first 12 frames of $(tshark -n -r "$out/demo.pcapng" 2>/dev/null | wc -l))"
tshark -n -r "$out/demo.pcapng" --disable-protocol rpcordma 2>/dev/null | head -12
echo "== opcodes in the trace"
tshark -n -r "$out/demo.pcapng" -T fields -e infiniband.bth.opcode 2>/dev/null | sort -n | uniq -c |
  awk '{printf "   %8d x opcode %s\n", $1, $2}'
echo "== softrdma lint $out/demo.pcapng"
"$bin" lint "$out/demo.pcapng" | tail -3 || status=1

echo
echo "== softrdma sample-trace $out/sample.pcap (every RoCEv2 opcode, an iWARP stream)"
"$bin" sample-trace "$out/sample.pcap" || status=1
echo "== tshark summary (first 8 frames)"
tshark -n -r "$out/sample.pcap" --disable-protocol rpcordma 2>/dev/null | head -8
echo "== softrdma lint $out/sample.pcap"
"$bin" lint "$out/sample.pcap" | tail -1 || status=1
echo
echo "Wireshark: open $out/demo.pcapng; the softrdma plugin (ICRC check, annotations) loads with"
echo "  WIRESHARK_PLUGIN_DIR=$build/lib/wireshark/plugins wireshark $out/demo.pcapng   (as a normal user)"
exit $status
