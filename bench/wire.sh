#!/usr/bin/env bash
# softrdma between two hosts as a veth pair between two network namespaces shows them, against
# kernel TCP (qperf) over the same veth in the same run, at MTU 1500 and 9000 (issue 15).
# For udp, af_xdp and af_packet: ib_write_bw, ib_read_bw, ib_send_bw (64 KiB), ib_write_bw -q 8,
# and ib_write_lat 2 B; for softiwarp0 over the kernel's TCP (iwarp), softiwarp0 over lwIP on
# af_packet, af_xdp and dpdk at both ends (lwip_af_packet, lwip_af_xdp, lwip_dpdk: on addresses of
# their own, 10.97.15.3 and .4, that the kernel does not hold) and dpdk (its af_packet PMD)
# ib_write_bw and ib_write_lat. Prints
# MB/s or average µs, the CPU each side used (cores: user + system time over the run), and the
# ratio to TCP's figure; writes the figures to OUT.tsv and a plot of them to OUT.png.
# Figures, not assertions. Needs root. The namespaces, veth and addresses (10.97.15.1/24 and
# 10.97.15.2/24) are its own and always deleted.
#   bench/wire.sh [BUILD_DIR] [SECONDS] [OUT (default BUILD_DIR/bench-wire)]
# WIRE_PATHS="lwip_af_xdp iwarp" runs those paths only (and TCP, always); WIRE_MTUS="1500" those
# MTUs only.
set -euo pipefail
build=${1:-build}
secs=${2:-3}
out=${3:-$build/bench-wire}
softrdma=$(realpath "$build/bin/softrdma")
here=$(dirname "$(realpath "$0")")
ns=sr15-wire-$$
a=$ns-a b=$ns-b
addr_a=10.97.15.1 addr_b=10.97.15.2
lwip_a=10.97.15.3 lwip_b=10.97.15.4  # the userspace TCP's: no kernel holds them
work=$(mktemp -d)

if [ "$(id -u)" != 0 ]; then echo "bench/wire.sh: needs root (namespaces)"; exit 1; fi
for tool in qperf ib_write_bw ib_read_bw ib_send_bw ib_write_lat; do
  command -v $tool >/dev/null || { echo "bench/wire.sh: $tool is missing"; exit 1; }
done
cleanup() {
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$a"
ip netns add "$b"
ip link add veth0 netns "$a" type veth peer name veth1 netns "$b"
ip -n "$a" addr add $addr_a/24 dev veth0
ip -n "$b" addr add $addr_b/24 dev veth1
for n in "$a" "$b"; do ip -n "$n" link set lo up; done
ip -n "$a" link set veth0 up
ip -n "$b" link set veth1 up

mtu() {
  ip -n "$a" link set dev veth0 mtu "$1"
  ip -n "$b" link set dev veth1 mtu "$1"
}
gso() {  # gso SEGS SIZE: DPDK's af_packet PMD needs the kernel to segment UDP GSO before the veth
  # (SIZE too: a packet socket's GSO frames carry no segment count)
  ip -n "$a" link set dev veth0 gso_max_segs "$1" gso_max_size "$2"
  ip -n "$b" link set dev veth1 gso_max_segs "$1" gso_max_size "$2"
}

netdev() {  # netdev BACKEND SIDE
  local ifc=veth0 addr=$addr_a lw=$lwip_a
  [ "$2" = b ] && ifc=veth1 addr=$addr_b lw=$lwip_b
  case "$1" in
    udp | iwarp) echo "udp:$addr" ;;
    lwip_dpdk) echo "dpdk:net_af_packet$2,iface=$ifc@$lw" ;;
    lwip_*) echo "${1#lwip_}:$ifc:$lw" ;;
    dpdk) echo "dpdk:net_af_packet$2,iface=$ifc@$addr" ;;
    *) echo "$1:$ifc" ;;
  esac
}

# side NS CPU_FILE OUT_FILE CMD...: runs CMD in namespace NS; its CPU seconds (user + system of
# everything it started) go to CPU_FILE.
side() {
  local n=$1 cpu=$2 o=$3
  shift 3
  (
    ip netns exec "$n" "$@" >"$o" 2>&1 || true
    times >"$cpu.times"  # no pipe: a forked builtin would report its own (empty) children
    awk 'NR==2 { split($1, u, /[ms]/); split($2, s, /[ms]/); print u[1] * 60 + u[2] + s[1] * 60 + s[2] }' \
      "$cpu.times" >"$cpu"
  )
}
cores() { awk -v c="$(cat "$1" 2>/dev/null || echo 0)" -v s="$secs" 'BEGIN { printf "%.2f", c / s }'; }

result=""  # set by the runners: "VALUE CPU_A CPU_B"
qperf_run() {  # qperf_run TEST SIZE
  ip netns exec "$a" qperf >/dev/null 2>&1 &  # no timeout(1) in between: its CPU is read below
  local srv=$!
  sleep 0.5
  side "$b" "$work/cpu_b" "$work/out_b" timeout 120 qperf -t "$secs" -m "$2" $addr_a "$1"
  sleep 0.5  # the server's child for the test has exited and been waited for
  # The server forks a child per test: its CPU is in the server's cutime and cstime (in ticks).
  # (qperf's own loc/rem_cpus_used are the whole machine's, both sides here.)
  awk -v t="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); print ($14 + $15) / t }' "/proc/$srv/stat" \
    >"$work/cpu_a" 2>/dev/null || echo 0 >"$work/cpu_a"
  kill $srv 2>/dev/null || true
  wait $srv 2>/dev/null || true
  # "bw = 3.23 GB/sec" / "latency = 6.16 us"
  local v
  v=$(awk '/ (bw|latency) +=/ {v=$3; u=$4; if (u=="GB/sec") v*=1000; if (u=="KB/sec") v/=1000; if (u=="ms") v*=1000; if (u=="ns") v/=1000; print v; exit}' "$work/out_b")
  result="${v:-failed} $(cores "$work/cpu_a") $(cores "$work/cpu_b")"
}

perftest_run() {  # perftest_run BACKEND PROGRAM SIZE [PERFTEST OPTION...]
  local kind=$1 prog=$2 size=$3
  shift 3
  local port=$((18600 + RANDOM % 1000))
  local ropts=() popts=() server=$addr_a
  case "$kind" in iwarp | lwip_*) ropts=(--transport iwarp) popts=(-R) ;; esac
  [[ "$kind" = lwip_* ]] && server=$lwip_a
  side "$a" "$work/cpu_a" "$work/out_a" "$softrdma" run "${ropts[@]}" --netdev "$(netdev "$kind" a)" -- \
    timeout 120 "$prog" "${popts[@]}" -p $port -s "$size" -D "$secs" "$@" &
  local srv=$!
  sleep 1
  side "$b" "$work/cpu_b" "$work/out_b" "$softrdma" run "${ropts[@]}" --netdev "$(netdev "$kind" b)" -- \
    timeout 120 "$prog" "${popts[@]}" -p $port -s "$size" -D "$secs" "$@" $server
  wait $srv 2>/dev/null || true
  local v
  case "$prog" in
    *_bw) v=$(awk -v s="$size" '$1==s && NF>=4 {print $4; exit}' "$work/out_b") ;;
    *) v=$(awk -v s="$size" '$1==s && NF>=3 {print $3; exit}' "$work/out_b") ;;  # t_avg with -D
  esac
  result="${v:-failed} $(cores "$work/cpu_a") $(cores "$work/cpu_b")"
}

can_start() {  # can_start BACKEND: both sides' devices open (the reason on stdout if not)
  local k=$1 n o t=roce
  case "$k" in iwarp | lwip_*) t=iwarp ;; esac
  for n in a b; do
    if ! o=$(SOFTRDMA_TRANSPORT=$t SOFTRDMA_NETDEV=$(netdev "$k" $n) \
      ip netns exec "$ns-$n" "$softrdma" devices 2>&1); then
      echo "${o#softrdma: }"
      return 1
    fi
  done
}

chosen() { [ -z "${WIRE_PATHS:-}" ] || [[ " $WIRE_PATHS " == *" $1 "* ]]; }

tsv=$out.tsv
printf 'mtu\tpath\ttest\tvalue\tunit\tcpu_a\tcpu_b\tratio\n' >"$tsv"
ratio() { awk -v x="$1" -v y="$2" 'BEGIN { if (y > 0 && x + 0 > 0) printf "%.2f", x / y; else print "n/a" }'; }
row() {  # row MTU PATH TEST UNIT TCP_VALUE
  local v ca cb r
  read -r v ca cb <<<"$result"
  r=$(ratio "$v" "$5")
  printf '%-14s %-12s %10s %-5s %5s %5s %6s\n' "$2" "$3" "$v" "$4" "$ca" "$cb" "$r"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$v" "$4" "$ca" "$cb" "$r" >>"$tsv"
}

echo "softrdma across a veth pair ($(date -u +%F), $(nproc) cores, $(uname -r)); ratio = / TCP's"
for m in ${WIRE_MTUS:-1500 9000}; do
  mtu $m
  echo
  printf '%-14s %-12s %10s %-5s %5s %5s %6s\n' "MTU $m" "test" "value" "unit" "cpu_a" "cpu_b" "ratio"
  qperf_run tcp_bw 65536
  tcp_bw=${result%% *}
  row $m tcp tcp_bw MB/s "$tcp_bw"
  qperf_run tcp_lat 2
  tcp_lat=${result%% *}
  row $m tcp tcp_lat us "$tcp_lat"
  for k in udp af_xdp af_packet iwarp lwip_af_packet lwip_af_xdp; do
    chosen $k || continue
    if ! why=$(can_start $k); then
      printf '%-10s skipped (%s)\n' "$k" "$why"
      continue
    fi
    perftest_run $k ib_write_bw 65536
    row $m $k write_bw MB/s "$tcp_bw"
    if [ $k = udp ] || [ $k = af_xdp ] || [ $k = af_packet ]; then
      perftest_run $k ib_read_bw 65536
      row $m $k read_bw MB/s "$tcp_bw"
      perftest_run $k ib_send_bw 65536
      row $m $k send_bw MB/s "$tcp_bw"
      perftest_run $k ib_write_bw 65536 -q 8
      row $m $k "write_bw_q8" MB/s "$tcp_bw"
    fi
    perftest_run $k ib_write_lat 2
    row $m $k write_lat us "$tcp_lat"
  done
  for k in dpdk lwip_dpdk; do
    chosen $k || continue
    if why=$(can_start $k); then  # (DPDK's af_packet PMD: the kernel segments for it)
      gso 1 512
      perftest_run $k ib_write_bw 65536
      row $m $k write_bw MB/s "$tcp_bw"
      perftest_run $k ib_write_lat 2
      row $m $k write_lat us "$tcp_lat"
      gso 65535 65536
    else
      printf '%-10s skipped (%s)\n' $k "$why"
    fi
  done
done
mtu 1500
echo
echo "figures: $tsv"
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  /usr/bin/python3 "$here/plot_wire.py" "$tsv" "$out.png" && echo "plot: $out.png"
else
  echo "no plot: python3-matplotlib is missing"
fi
