#!/usr/bin/env bash
# UCX and MPI over softrdma against the same over UCX's TCP transport, and against perftest on
# softrdma, in one run (issue 14). Prints each figure and the ratios against the targets:
#   UCX tag_bw 64 KiB >= 0.8 x ib_write_bw 64 KiB; MPI 8 B one-way <= 1.5 x ib_send_lat.
#   bench/middleware.sh [BUILD_DIR] [REPEATS]
set -euo pipefail
build=${1:-build}
reps=${2:-1}
softrdma=$build/bin/softrdma
mpi_openmpi=$build/bin/mpi_check_openmpi
mpi_mpich=$build/bin/mpi_check_mpich
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
root_opt=()
[ "$(id -u)" = 0 ] && root_opt=(--allow-run-as-root)

perftest() {  # perftest PROGRAM SIZE -> MB/s (bw) or t_avg us (lat), 3 s each
  local p prog=$1 size=$2; p=$(port)
  "$softrdma" run -- timeout 60 "$prog" -p "$p" -s "$size" -D 3 >/dev/null 2>&1 &
  local srv=$!
  sleep 0.5
  local out; out=$("$softrdma" run -- timeout 60 "$prog" -p "$p" -s "$size" -D 3 127.0.0.1 2>&1 || true)
  wait $srv 2>/dev/null || true
  case "$prog" in
    *_bw) echo "$out" | awk -v s="$size" '$1==s && NF>=4 {print $4; exit}' ;;
    *) echo "$out" | awk -v s="$size" '$1==s && NF>=3 {print $3; exit}' ;;
  esac
}

ucx() {  # ucx TLS TEST SIZE ITERATIONS -> MB/s (bw) or average one-way us (lat)
  local p tls=$1 test=$2 size=$3 n=$4; p=$(port)
  UCX_TLS=$tls "$softrdma" run -- timeout 120 ucx_perftest -p "$p" >/dev/null 2>&1 &
  local srv=$!
  sleep 0.5
  local out
  out=$(UCX_TLS=$tls "$softrdma" run -- timeout 120 ucx_perftest -p "$p" 127.0.0.1 -t "$test" \
    -s "$size" -n "$n" 2>&1 || true)
  wait $srv 2>/dev/null || true
  # Final: iterations, latency 50% / average / overall, bandwidth average / overall, rates
  case "$test" in
    *_bw) echo "$out" | awk '/^Final:/{print $6; exit}' ;;
    *) echo "$out" | awk '/^Final:/{print $4; exit}' ;;
  esac
}

mpi() {  # mpi openmpi|mpich TLS -> "LAT_US BW_MBS" of mpi_check pingpong
  local flavour=$1 tls=$2 out
  if [ "$flavour" = openmpi ]; then
    [ -x "$mpi_openmpi" ] || { echo "n/a n/a"; return; }
    out=$(UCX_TLS=$tls "$softrdma" run -- timeout 120 mpirun.openmpi "${root_opt[@]}" -np 2 \
      --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any -x UCX_TLS "$mpi_openmpi" \
      pingpong 2>&1 || true)
  else
    [ -x "$mpi_mpich" ] || { echo "n/a n/a"; return; }
    out=$(UCX_TLS=$tls "$softrdma" run -- timeout 120 mpirun.mpich -np 2 "$mpi_mpich" pingpong \
      2>&1 || true)
  fi
  local lat bw
  lat=$(echo "$out" | awk '/latency 8 B/{print $(NF-1); exit}')
  bw=$(echo "$out" | awk '/bandwidth 1 MiB/{print $(NF-1); exit}')
  echo "${lat:-n/a} ${bw:-n/a}"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0 && a != "" && a != "n/a") printf "%.2f", a / b; else print "n/a" }'; }
xcore() { if [ -x "$build/bin/xcore_copy" ]; then "$build/bin/xcore_copy" 700 | awk '{print $3}'; fi; }

for rep in $(seq 1 "$reps"); do
  # The bandwidth pair twice, interleaved: both move with the VM's cross-core copy rate, which
  # can change from one minute to the next.
  xb=$(xcore)
  w1=$(perftest ib_write_bw 65536)
  t1=$(ucx rc_verbs,ud_verbs tag_bw 65536 20000)
  w2=$(perftest ib_write_bw 65536)
  t2=$(ucx rc_verbs,ud_verbs tag_bw 65536 20000)
  xa=$(xcore)
  write_bw=$(awk -v a="$w1" -v b="$w2" 'BEGIN{printf "%.0f", (a + b) / 2}')
  tag_bw=$(awk -v a="$t1" -v b="$t2" 'BEGIN{printf "%.0f", (a + b) / 2}')
  tag_bw_tcp=$(ucx tcp tag_bw 65536 20000)
  send_lat=$(perftest ib_send_lat 2)
  tag_lat=$(ucx rc_verbs,ud_verbs tag_lat 8 100000)
  tag_lat_tcp=$(ucx tcp tag_lat 8 100000)
  read -r ompi_lat ompi_bw <<<"$(mpi openmpi rc_verbs,ud_verbs)"
  read -r ompi_lat_tcp ompi_bw_tcp <<<"$(mpi openmpi tcp)"
  read -r mpich_lat mpich_bw <<<"$(mpi mpich rc_verbs,ud_verbs)"
  read -r mpich_lat_tcp mpich_bw_tcp <<<"$(mpi mpich tcp)"
  echo "run $rep of $reps"
  printf '  %-44s %9s GB/s\n' "cross-core hand-off before, after" "$xb, $xa"
  printf '  %-44s %9s MB/s   (%s, %s)\n' "ib_write_bw 64 KiB (softrdma)" "$write_bw" "$w1" "$w2"
  printf '  %-44s %9s MB/s   (%s, %s; UCX tcp: %s)\n' "ucx_perftest tag_bw 64 KiB (rc_verbs)" "$tag_bw" "$t1" "$t2" "$tag_bw_tcp"
  printf '  %-44s %9s us\n' "ib_send_lat 2 B, average (softrdma)" "$send_lat"
  printf '  %-44s %9s us     (UCX tcp: %s)\n' "ucx_perftest tag_lat 8 B, average (rc_verbs)" "$tag_lat" "$tag_lat_tcp"
  printf '  %-44s %9s us     (UCX tcp: %s)\n' "Open MPI ping-pong 8 B one-way" "$ompi_lat" "$ompi_lat_tcp"
  printf '  %-44s %9s MB/s   (UCX tcp: %s)\n' "Open MPI ping-pong 1 MiB" "$ompi_bw" "$ompi_bw_tcp"
  printf '  %-44s %9s us     (UCX tcp: %s)\n' "MPICH ping-pong 8 B one-way" "$mpich_lat" "$mpich_lat_tcp"
  printf '  %-44s %9s MB/s   (UCX tcp: %s)\n' "MPICH ping-pong 1 MiB" "$mpich_bw" "$mpich_bw_tcp"
  echo "  ratio tag_bw / ib_write_bw          = $(ratio "$tag_bw" "$write_bw")   (target >= 0.8)"
  echo "  ratio Open MPI 8 B / ib_send_lat    = $(ratio "$ompi_lat" "$send_lat")   (target <= 1.5)"
  echo "  ratio MPICH 8 B / ib_send_lat       = $(ratio "$mpich_lat" "$send_lat")   (target <= 1.5)"
done
