#!/usr/bin/env bash
# Issue 7's benchmark: ib_write_bw (64 KiB) and ib_write_lat (2 B) through unmodified perftest on
# each backend, server and client in two network namespaces joined by a veth pair (created here
# with 10.97.10.1/24 and 10.97.10.2/24, always deleted). A backend that cannot start here is
# listed with the reason. Figures, not assertions. Needs root.
#   bench/backends.sh [BUILD_DIR] [SECONDS]
set -euo pipefail
build=${1:-build}
secs=${2:-3}
softrdma=$(realpath "$build/bin/softrdma")
ns=sr7-bench-$$
a=$ns-a b=$ns-b
addr_a=10.97.10.1 addr_b=10.97.10.2

if [ "$(id -u)" != 0 ]; then echo "bench/backends.sh: needs root (namespaces)"; exit 1; fi
cleanup() { ip netns del "$a" 2>/dev/null || true; ip netns del "$b" 2>/dev/null || true; }
trap cleanup EXIT
ip netns add "$a"
ip netns add "$b"
ip link add veth0 netns "$a" type veth peer name veth1 netns "$b"
ip -n "$a" addr add $addr_a/24 dev veth0
ip -n "$b" addr add $addr_b/24 dev veth1
for n in "$a" "$b"; do ip -n "$n" link set lo up; done
ip -n "$a" link set veth0 up
ip -n "$b" link set veth1 up

netdev() {  # netdev BACKEND SIDE
  local ifc=veth0 addr=$addr_a
  [ "$2" = b ] && ifc=veth1 addr=$addr_b
  case "$1" in
    udp) echo "udp:$addr" ;;
    dpdk) echo "dpdk:net_af_packet$2,iface=$ifc@$addr" ;;
    *) echo "$1:$ifc" ;;
  esac
}

gso() {  # gso SEGS: DPDK's af_packet PMD needs the kernel to segment UDP GSO before the veth
  ip -n "$a" link set dev veth0 gso_max_segs "$1"
  ip -n "$b" link set dev veth1 gso_max_segs "$1"
}

run_pair() {  # run_pair SERVER CLIENT PROGRAM SIZE -> MB/s (bw) or average usec (lat)
  local port=$((18600 + RANDOM % 1000))
  ip netns exec "$a" "$softrdma" run --netdev "$(netdev "$1" a)" -- \
    timeout 120 "$3" -p $port -s "$4" -D "$secs" >/dev/null 2>&1 &
  local srv=$!
  sleep 1
  local out
  out=$(ip netns exec "$b" "$softrdma" run --netdev "$(netdev "$2" b)" -- \
    timeout 120 "$3" -p $port -s "$4" -D "$secs" $addr_a 2>&1 || true)
  wait $srv 2>/dev/null || true
  case "$3" in
    *_bw) echo "$out" | awk -v s="$4" '$1==s && NF>=4 {print $4; exit}' ;;
    *) echo "$out" | awk -v s="$4" '$1==s && NF>=3 {print $3; exit}' ;;
  esac
}

printf '%-22s %18s %18s\n' "server/client" "write_bw 64K MB/s" "write_lat 2B us"
for pair in udp/udp af_packet/af_packet af_xdp/af_xdp dpdk/dpdk af_packet/udp af_xdp/udp dpdk/udp; do
  s=${pair%/*} c=${pair#*/}
  why=""
  for side in a:$s b:$c; do
    n=${side%%:*} k=${side#*:}
    if ! out=$(SOFTRDMA_NETDEV=$(netdev "$k" "$n") ip netns exec "$ns-$n" "$softrdma" devices 2>&1); then
      why="$k cannot start: ${out#softrdma: }"
      break
    fi
  done
  if [ -n "$why" ]; then
    printf '%-22s %s\n' "$pair" "skipped ($why)"
    continue
  fi
  case "$pair" in *dpdk*) gso 1 ;; *) gso 65535 ;; esac
  bw=$(run_pair "$s" "$c" ib_write_bw 65536)
  lat=$(run_pair "$s" "$c" ib_write_lat 2)
  printf '%-22s %18s %18s\n' "$pair" "${bw:-failed}" "${lat:-failed}"
done
