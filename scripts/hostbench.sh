#!/usr/bin/env bash
# hostbench.sh: spray against libfabric's tcp, kernel TCP and raw UDP (GSO/GRO) between two hosts
# (namespaces of scripts/hosts.sh over its 4-link ECMP fabric), at MTU 1500 and 9000, in one run.
#
# Usage: scripts/hostbench.sh [options]
#   -n, --runs N      repetitions (default 3). A cell is the median of N runs with its range;
#                     "paired" is the median (range) of spray/tcp taken within each repetition,
#                     from back-to-back runs, so that the machine's drift cancels
#   --quick           smoke run: sizes 8,65536,1048576, 1 repetition, 16 MiB per size and run,
#                     0.5 s streams, fewer small-message iterations (a few minutes)
#   --clients LIST    comma list (default: all of them):
#                       fi_pingpong  fi_pingpong -e rdm -m tagged: latency, ping-pong bandwidth
#                       osu-mpich, osu-ompi5, osu-impi
#                                    mpi-tests/src/osu.c latency, bw and bibw (window 64)
#                       imb          Intel MPI's IMB-MPI1 PingPong and Uniband
#                       stream       scripts/fi_stream.c: one-way stream of tagged messages,
#                                    bandwidth and CPU time per packet
#                       base         the baselines: kernel TCP and raw UDP with GSO/GRO
#                                    (scripts/raw_stream.c): ping-pong, stream, both-way stream
#   --mtus LIST       default 1500,9000 (each gets its own testbed, built and removed here)
#   --sizes LIST      bytes, up to 16 MiB (default 8,64,1024,8192,65536,262144,1048576,4194304)
#   --all-sizes       every power of two from 8 B to 4 MiB
#   --budget BYTES    what one run moves per size at most, which bounds the iterations of
#                     large sizes (default 268435456; --quick 16777216)
#   --stream-ms MS    length of each streaming run (default 2000; --quick 500)
#   --out DIR         where the results go (default <repo>/results)
#   --no-plot         no PNG (matplotlib is then not needed)
#
# Environment: FI_SPRAY_* reach every spray run (fi_pingpong, fi_stream, every MPI rank), e.g.
#   FI_SPRAY_GSO=0 to compare settings (FI_SPRAY_IFACE is always h0, the hosts' interface);
#   PROVDIR: directory of libspray-fi.so (default <repo>/build, refreshed from
#   target/release/libspray_fi.so when that is newer); SPRAY_HOSTS_PREFIX: the testbed's
#   namespaces (default sprb-); LAUNCH_TIMEOUT: bound on one MPI launch, s (default 900).
#
# Every process runs under timeout; the testbed is torn down on exit. Output (paths printed at
# the end): results/hostbench-<date>.md (the tables), .png (latency and bandwidth against size,
# log-log, a panel per MTU and metric), .tsv (every measurement), -logs/ (every run's output).
# Exit status: 0; 1 when some runs failed (their cells say n/a); 2 on bad usage or when a
# prerequisite is missing.
set -uo pipefail
export SPRAY_HOSTS_PREFIX="${SPRAY_HOSTS_PREFIX:-sprb-}"
export LAUNCH_TIMEOUT="${LAUNCH_TIMEOUT:-900}"
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=mpi-tests/lib.sh
. "$SPRAY_ROOT/mpi-tests/lib.sh"
MPI_HOSTS=2 # mpi_launch: rank 0 on host 0, rank 1 on host 1

fatal() {
	log "error: $*"
	exit 2
}

runs="" quick=0 clients="" mtus="" sizes="" budget="" stream_ms="" out_dir="" plot=1
all_clients="fi_pingpong,osu-mpich,osu-ompi5,osu-impi,imb,stream,base"
cmdline="$0 $*"
while [ "$#" -gt 0 ]; do
	case "$1" in
	-n | --runs) runs="${2:?}" && shift ;;
	--quick) quick=1 ;;
	--clients) clients="${2:?}" && shift ;;
	--mtus) mtus="${2:?}" && shift ;;
	--sizes) sizes="${2:?}" && shift ;;
	--all-sizes) sizes="$(awk 'BEGIN { for (s = 8; s <= 4194304; s *= 2) printf "%s%d", (s > 8 ? "," : ""), s }')" ;;
	--budget) budget="${2:?}" && shift ;;
	--stream-ms) stream_ms="${2:?}" && shift ;;
	--out) out_dir="${2:?}" && shift ;;
	--no-plot) plot=0 ;;
	-h | --help)
		usage
		exit 0
		;;
	*) fatal "unknown option: $1 (see --help)" ;;
	esac
	shift
done
# --quick sets the defaults; options given explicitly win whatever their order.
if [ "$quick" -eq 1 ]; then
	: "${runs:=1}" "${sizes:=8,65536,1048576}" "${budget:=16777216}" "${stream_ms:=500}"
	pp_max=1000
	osu_iters=(-i 1000 -I 100 -x 20 -j 20 -J 5)
	imb_iters=100
else
	: "${runs:=3}" "${sizes:=8,64,1024,8192,65536,262144,1048576,4194304}" "${budget:=268435456}" "${stream_ms:=2000}"
	# small sizes: OSU's own counts (10000 ping-pongs; 100 windows of 64 messages)
	pp_max=10000
	osu_iters=(-i 10000 -I 1000 -x 200 -j 100 -J 20)
	imb_iters=1000
fi
: "${clients:=$all_clients}" "${mtus:=1500,9000}" "${out_dir:=$SPRAY_ROOT/results}"
if ! [[ "$runs" =~ ^[1-9][0-9]?$ ]]; then fatal "--runs must be 1..99"; fi
[[ "$budget" =~ ^[1-9][0-9]*$ ]] || fatal "--budget must be bytes"
[[ "$stream_ms" =~ ^[1-9][0-9]*$ ]] || fatal "--stream-ms must be milliseconds"
IFS=, read -r -a size_list <<<"$sizes"
IFS=, read -r -a mtu_list <<<"$mtus"
IFS=, read -r -a client_list <<<"$clients"
for s in "${size_list[@]}"; do
	if ! [[ "$s" =~ ^[1-9][0-9]*$ ]] || [ "$s" -gt 16777216 ]; then fatal "--sizes: '$s' is not 1..16 MiB"; fi
done
for m in "${mtu_list[@]}"; do
	if ! [[ "$m" =~ ^[0-9]+$ ]] || [ "$m" -lt 1280 ] || [ "$m" -gt 9000 ]; then fatal "--mtus: '$m' is not 1280..9000"; fi
done
for c in "${client_list[@]}"; do
	case ",$all_clients," in *",$c,"*) ;; *) fatal "--clients: unknown '$c' (of $all_clients)" ;; esac
done
if [ "${#size_list[@]}" -eq 0 ] || [ "${#mtu_list[@]}" -eq 0 ] || [ "${#client_list[@]}" -eq 0 ]; then
	fatal "empty --sizes, --mtus or --clients"
fi
sizes_csv="$(IFS=,; echo "${size_list[*]}")"
has_client() { case ",$clients," in *",$1,"*) return 0 ;; esac; return 1; }

# ---------------------------------------------------------------- prerequisites
[ "$(id -u)" -eq 0 ] || fatal "must run as root (network namespaces)"
need() { command -v "$1" >/dev/null 2>&1 || fatal "missing command: $1 ($2)"; }
need ip "iproute2"
need timeout "coreutils"
need flock "util-linux"
need ss "iproute2"
need python3 "the report"
need cc "build-essential: scripts/raw_stream.c and fi_stream.c are compiled here"
has_client fi_pingpong && need fi_pingpong "libfabric-bin"
[ -e /usr/include/rdma/fabric.h ] || ! has_client stream || fatal "no libfabric headers (libfabric-dev) for scripts/fi_stream.c"

# spray's library: as mpi-tests/run.sh finds it
if [ -z "${PROVDIR:-}" ]; then
	PROVDIR="$SPRAY_ROOT/build"
	src="$SPRAY_ROOT/target/release/libspray_fi.so"
	if [ -e "$src" ] && { [ ! -e "$PROVDIR/libspray-fi.so" ] || [ "$src" -nt "$PROVDIR/libspray-fi.so" ]; }; then
		mkdir -p "$PROVDIR" && cp "$src" "$PROVDIR/libspray-fi.so.tmp" && mv "$PROVDIR/libspray-fi.so.tmp" "$PROVDIR/libspray-fi.so"
	fi
fi
[ -e "$PROVDIR/libspray-fi.so" ] || fatal "$PROVDIR/libspray-fi.so missing (cargo build --release --lib)"
prov_src="$PROVDIR/libspray-fi.so"
# The hosts have one interface, h0: the providers use it whatever the caller's environment says.
for v in FI_SPRAY_IFACE FI_TCP_IFACE; do
	[ -z "${!v:-}" ] || log "note: $v=${!v} ignored: the hosts have only h0"
	unset "$v"
done

stamp="$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$out_dir" || fatal "cannot create $out_dir"
out_dir="$(cd "$out_dir" && pwd)"
base_name="$out_dir/hostbench-$stamp"
tsv="$base_name.tsv"
logs="$base_name-logs"
mkdir -p "$logs"
bin_dir="$SPRAY_ROOT/build/hostbench"
mkdir -p "$bin_dir"
RAW="$bin_dir/raw_stream"
FIS="$bin_dir/fi_stream"
if has_client base; then
	cc -O2 -Wall -o "$RAW" "$SPRAY_ROOT/scripts/raw_stream.c" 2>"$logs/build-raw_stream.log" ||
		fatal "building scripts/raw_stream.c failed ($logs/build-raw_stream.log)"
fi
if has_client stream; then
	cc -O2 -Wall -o "$FIS" "$SPRAY_ROOT/scripts/fi_stream.c" -lfabric 2>"$logs/build-fi_stream.log" ||
		fatal "building scripts/fi_stream.c failed ($logs/build-fi_stream.log)"
fi

# MPI clients: left out (and said so in the report) when their MPI is not installed.
left_out=()
for c in "${client_list[@]}"; do
	case "$c" in
	osu-*) m="${c#osu-}" ;;
	imb) m=impi ;;
	*) continue ;;
	esac
	why="$(mpi_missing "$m")"
	if [ -z "$why" ] && ! mpi_build "$m" >"$logs/build-$m.log" 2>&1; then why="building mpi-tests for $m failed ($logs/build-$m.log)"; fi
	if [ -n "$why" ]; then
		log "leaving out $c: $why"
		left_out+=("$c: $why")
		clients="$(echo ",$clients," | sed "s/,$c,/,/; s/^,//; s/,\$//")"
	fi
done
IFS=, read -r -a client_list <<<"$clients"
[ "${#client_list[@]}" -gt 0 ] || fatal "no client left to run"

# One hostbench per testbed prefix at a time (another run would tear our testbed down).
lock="/run/lock/spray-hostbench-${SPRAY_HOSTS_PREFIX}lock"
mkdir -p "$(dirname "$lock")"
exec {lock_fd}>"$lock"
flock -w 600 "$lock_fd" || fatal "another hostbench with prefix $SPRAY_HOSTS_PREFIX holds $lock"

# ---------------------------------------------------------------- processes and cleanup
declare -A live=() # pids of the background processes started here
testbed_up=0
prov_tmp=""
cleanup() {
	local rc=$? pid
	for pid in "${!live[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${!live[@]}"; do wait "$pid" 2>/dev/null || true; done
	if [ "$testbed_up" -eq 1 ]; then
		hosts_reap 2 >/dev/null 2>&1 || true
		bash "$HOSTS_SH" down >/dev/null 2>&1 || true
	fi
	[ -z "$prov_tmp" ] || rm -rf "$prov_tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# bg LOG CMD...: starts CMD in the background (output appended to LOG, stdin /dev/null); sets
# $bg_pid. Every process the measurements start goes through here, so that the exit trap
# finds it, and the script waits for it with `wait`, which a signal interrupts at once.
bg() {
	local log="$1"
	shift
	"$@" >>"$log" 2>&1 </dev/null &
	bg_pid=$!
	live[$bg_pid]=1
}
# reap PID: waits for a background process (killing it first if $2 = kill); returns its status
reap() {
	local pid="$1" rc=0
	[ "${2:-}" != kill ] || kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || rc=$?
	unset "live[$pid]"
	return "$rc"
}
# run LOG CMD...: runs CMD (output appended to LOG) and returns its status
run() {
	bg "$@"
	reap "$bg_pid"
}

# The whole run uses one copy of spray, whatever rebuilds (cargo, the MPI tests' refresh of
# build/) do to the original meanwhile.
prov_tmp="$(mktemp -d /tmp/hostbench-provider.XXXXXX)"
cp "$prov_src" "$prov_tmp/libspray-fi.so" || fatal "cannot copy $prov_src"
PROVDIR="$prov_tmp"
export SPRAY_PROVIDER_DIR="$PROVDIR"

# ---------------------------------------------------------------- measurements
T_RUN=120 # bound on one client or server process, s
T_RECV=$((stream_ms / 1000 + 30)) # bound on a raw stream's receiver (it waits for its first datagram)
t_start="$(date +%s)"
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
failures=0
log "load average at the start: $load_start; results in $base_name.*"
{
	echo "#meta command $cmdline"
	echo "#meta started $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "#meta machine $(nproc) CPUs, kernel $(uname -r), libfabric $(fi_info --version 2>/dev/null | awk '/^libfabric:/ { print $2 }')"
	echo "#meta spray $prov_src ($(stat -c %y "$prov_src" | cut -d. -f1), sha256 $(sha256sum "$PROVDIR/libspray-fi.so" | cut -c1-12)), tree $(git -C "$SPRAY_ROOT" rev-parse --short HEAD 2>/dev/null)$(git -C "$SPRAY_ROOT" diff --quiet 2>/dev/null || echo +changes)"
	echo "#meta spray_env $(env | grep '^FI_SPRAY_' | sort | tr '\n' ' ')"
	echo "#meta runs $runs"
	echo "#meta sizes $sizes_csv"
	echo "#meta mtus $(IFS=,; echo "${mtu_list[*]}")"
	echo "#meta budget $budget"
	echo "#meta stream_ms $stream_ms"
	echo "#meta clients $clients"
	for l in "${left_out[@]}"; do echo "#meta left_out $l"; done
	echo "#meta load_start $load_start"
} >"$tsv"

rec() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$tsv"; }
# failed MTU CLIENT TRANSPORT SIZE REP WHY
failed() {
	failures=$((failures + 1))
	printf '#fail\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$tsv"
	log "FAILED: mtu $1 $2 $3 size ${4:-all} run $5: $6"
}
kv() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$2"; }
human() {
	awk -v s="$1" 'BEGIN { if (s >= 1048576) printf "%gM", s / 1048576; else if (s >= 1024) printf "%gK", s / 1024; else printf "%d", s }'
}

# Waits (at most ~5 s) until the CPUs were >= 80 % idle over 0.2 s; prints the idle share seen.
wait_idle() {
	local i a b idle=0
	for i in $(seq 1 25); do
		a="$(awk '/^cpu / { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)"
		sleep 0.2
		b="$(awk '/^cpu / { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)"
		idle="$(awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " "); d = y[2] - x[2]
			printf "%.2f", (d > 0 ? (y[1] - x[1]) / d : 0) }')"
		awk -v i="$idle" 'BEGIN { exit !(i >= 0.8) }' && break
	done
	echo "$idle"
}

# A port free for PROTO (tcp|udp) in host 1.
free_port() {
	local p i
	for i in $(seq 1 50); do
		p=$((20000 + RANDOM % 30000))
		ip netns exec "$NS1" ss -Hln"${1:0:1}" "sport = :$p" 2>/dev/null | grep -q . || break
	done
	echo "$p"
}
# wait_bound NS PROTO PORT PID: until a server in NS is bound to PORT (5 s at most, while PID lives)
wait_bound() {
	local i
	for i in $(seq 1 100); do
		ip netns exec "$1" ss -Hln"${2:0:1}" "sport = :$3" 2>/dev/null | grep -q . && return 0
		kill -0 "$4" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
pp_iters() { awk -v b="$budget" -v s="$1" -v m="$pp_max" 'BEGIN { n = int(b / (2 * s)); if (n > m) n = m; if (n < 10) n = 10; print n }'
}
# Packets a stream of BYTES in SIZE-byte messages needs at this MTU: ceil(SIZE / (MTU - 28)) each.
pkts_of() {
	awk -v b="$1" -v s="$2" -v m="$mtu" 'BEGIN { p = m - 28; printf "%.0f", b / s * int((s + p - 1) / p) }'
}
# A ping-pong's MB/s (fi_pingpong's definition: both directions, 2 x SIZE per round trip) from
# its half round trip, without the rounding of the printed MB/s (0.00 for small sizes).
pp_mbps() { awk -v s="$1" -v u="$2" 'BEGIN { if (u > 0) printf "%.6g", s / u }'; }
# The share of one CPU (%) a stream's side used over its timed phase, from its cpu_s= and secs=.
busy() { awk -v c="$(kv cpu_s "$1")" -v t="$(kv secs "$1")" 'BEGIN { if (t > 0) printf "%.0f", 100 * c / t }'; }
ns_per_pkt() { awk -v c="$1" -v p="$2" 'BEGIN { if (p > 0) printf "%.1f", c * 1e9 / p; else print "" }'; }

# The transports of repetition $rep: spray first in odd ones, tcp first in even ones.
order() { if [ $((rep % 2)) -eq 1 ]; then echo "$1 $2"; else echo "$2 $1"; fi; }

run_fi_pingpong() {
	local s t line log
	for s in "${size_list[@]}"; do
		for t in $(order spray tcp); do
			log="$logs/mtu$mtu-r$rep-fi_pingpong-$t-$s.log"
			run "$log" bash "$SPRAY_ROOT/scripts/pingpong.sh" --hosts -p "$t" -e rdm -m tagged -S "$s" -I "$(pp_iters "$s")" \
				--timeout "$T_RUN" --stall "$T_RUN" --log-dir "$log.d"
			line="$(grep '^RESULT ' "$log" | tail -n 1)"
			if [ -z "$line" ]; then
				failed "$mtu" fi_pingpong "$t" "$s" "$rep" "$(grep -o 'reason=[^ ]*' "$log" || echo no result) ($log)"
				continue
			fi
			rm -rf "$log.d"
			rec "$mtu" fi_pingpong lat "$t" "$s" "$rep" "$(kv usec_per_xfer "$line")"
			rec "$mtu" fi_pingpong ppbw "$t" "$s" "$rep" "$(pp_mbps "$s" "$(kv usec_per_xfer "$line")")"
			log "mtu $mtu run $rep: fi_pingpong $(human "$s") $t: $(kv usec_per_xfer "$line") us, $(kv mb_per_sec "$line") MB/s"
		done
	done
}

# One MPI launch of PROG over transport T (mpi_launch's line: timeout, provider checks); ranks on
# hosts 0 and 1; needs >= 100 packets across the fabric. Output in $2.
mpi_run() {
	local m="$1" log="$2" t="$3" rc=0 fab0 fab_total
	shift 3
	local pdir=""
	[ "$t" = spray ] && pdir="$PROVDIR"
	mpi_launch "$m" "$t" "$pdir" 2
	fab0="$(fabric_snapshot)"
	echo "+ ${LAUNCH[*]} $*" >"$log"
	run "$log" "${LAUNCH[@]}" "$@" || rc=$?
	hosts_reap 2 >/dev/null
	read -r fab_total _ <<<"$(fabric_delta "$fab0" "$(fabric_snapshot)")"
	if [ "$rc" -ne 0 ]; then
		mpi_why="exit $rc"
	elif ! grep -aEq "$VERIFY_RE" "$log" || ! grep -aEq "$VERIFY2_RE" "$log" || grep -aEq "$REJECT_RE" "$log"; then
		mpi_why="the log does not show $t as the transport"
	elif [ "${fab_total:-0}" -lt 100 ]; then
		mpi_why="only ${fab_total:-0} packets crossed the fabric"
	else
		return 0
	fi
	return 1
}

run_osu() {
	local m="$1" t log n
	mpi_build "$m" >/dev/null 2>&1
	for t in $(order spray tcp); do
		log="$logs/mtu$mtu-r$rep-osu-$m-$t.log"
		if ! mpi_run "$m" "$log" "$t" "$BIN_DIR/osu" -t latency,bw,bibw -s "$sizes_csv" "${osu_iters[@]}" -W 64 -B "$budget"; then
			failed "$mtu" "osu-$m" "$t" "" "$rep" "$mpi_why ($log)"
			continue
		fi
		n=0
		while read -r test s v _; do
			case "$test" in latency) test=lat ;; esac
			rec "$mtu" "osu-$m" "$test" "$t" "$s" "$rep" "$v"
			n=$((n + 1))
		done < <(awk '$1 ~ /^(latency|bw|bibw)$/ && NF == 4' "$log")
		[ "$n" -eq $((3 * ${#size_list[@]})) ] ||
			failed "$mtu" "osu-$m" "$t" "" "$rep" "$n of $((3 * ${#size_list[@]})) values in $log"
		log "mtu $mtu run $rep: osu-$m $t: $n values"
	done
}

run_imb() {
	local t log n bench metric vol lens="$logs/imb-msglen"
	printf '%s\n' "${size_list[@]}" >"$lens"
	# One launch per benchmark: IMB's -iter N,VOL takes at most N repetitions per size, fewer
	# so that one size's repetitions move at most VOL MB; a Uniband repetition is a window of
	# 64 messages, which that volume does not count, so its VOL is 64 times smaller. PingPong's
	# VOL is half the budget (a repetition moves a message each way).
	for bench in PingPong Uniband; do
		metric=lat vol=$((budget / 2))
		[ "$bench" = Uniband ] && metric=bw vol=$((budget / 64))
		vol=$(((vol + 1048575) / 1048576))
		for t in $(order spray tcp); do
			log="$logs/mtu$mtu-r$rep-imb-$bench-$t.log"
			if ! mpi_run impi "$log" "$t" "$VENV_IMPI/bin/IMB-MPI1" -msglen "$lens" \
				-iter "$imb_iters,$vol" -time 60 -npmin 2 "$bench"; then
				failed "$mtu" imb "$t" "" "$rep" "$bench: $mpi_why ($log)"
				continue
			fi
			n=0
			# rows "#bytes #repetitions t[usec] Mbytes/sec" (PingPong) or
			# "#bytes #repetitions Mbytes/sec Msg/sec" (Uniband): the third column
			while read -r s v; do
				rec "$mtu" imb "$metric" "$t" "$s" "$rep" "$v"
				n=$((n + 1))
			done < <(awk -v b="# Benchmarking $bench" 'index($0, b) == 1 { on = 1; next } /^# Benchmarking/ { on = 0 }
				on && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && NF == 4 { print $1, $3 }' "$log")
			# IMB prints "time-out." instead of the sizes past its time limit (-time)
			[ "$n" -eq "${#size_list[@]}" ] ||
				failed "$mtu" imb "$t" "" "$rep" "$bench: $n of ${#size_list[@]} sizes in $log"
			log "mtu $mtu run $rep: imb $bench $t: $n values"
		done
	done
}

# fi_stream between the hosts: receiver in host 1, sender in host 0.
run_stream() {
	local s t log w hex i rx_out tx_out rx_pid prov_env pk
	for s in "${size_list[@]}"; do
		# about 64 MiB in flight at most, 2..64 messages
		w=$((67108864 / s))
		[ "$w" -le 64 ] || w=64
		[ "$w" -ge 2 ] || w=2
		for t in $(order spray tcp); do
			log="$logs/mtu$mtu-r$rep-stream-$t-$s.log"
			prov_env=(env FI_PROVIDER="$t" FI_SPRAY_IFACE=h0 FI_TCP_IFACE=h0)
			[ "$t" = spray ] && prov_env+=(FI_PROVIDER_PATH="$PROVDIR")
			bg "$log.rx" ip netns exec "$NS1" "${prov_env[@]}" timeout -k 5 "$T_RUN" "$FIS" recv -p "$t" -s "$s" -w "$w" -t "$T_RUN"
			rx_pid=$bg_pid
			hex=""
			for i in $(seq 1 200); do
				hex="$(sed -n 's/^name=//p' "$log.rx")"
				[ -z "$hex" ] && kill -0 "$rx_pid" 2>/dev/null && sleep 0.05 && continue
				break
			done
			if [ -z "$hex" ]; then
				reap "$rx_pid" kill
				failed "$mtu" stream "$t" "$s" "$rep" "the receiver gave no address ($log.rx)"
				continue
			fi
			run "$log" ip netns exec "$NS0" "${prov_env[@]}" timeout -k 5 "$T_RUN" "$FIS" send -p "$t" -a "$hex" -s "$s" \
				-d "$stream_ms" -w "$w" -t "$T_RUN"
			tx_out="$(grep '^bytes=' "$log" | tail -n 1)"
			if [ -z "$tx_out" ]; then
				reap "$rx_pid" kill
				failed "$mtu" stream "$t" "$s" "$rep" "fi_stream send failed ($log)"
				continue
			fi
			rx_out=""
			reap "$rx_pid" && rx_out="$(grep '^bytes=' "$log.rx" | tail -n 1)"
			if [ -z "$(kv mb_per_sec "$rx_out")" ]; then
				failed "$mtu" stream "$t" "$s" "$rep" "fi_stream recv failed ($log.rx)"
				continue
			fi
			rec "$mtu" stream bw "$t" "$s" "$rep" "$(kv mb_per_sec "$rx_out")"
			pk="$(pkts_of "$(kv bytes "$tx_out")" "$s")"
			rec "$mtu" stream cpu_tx "$t" "$s" "$rep" "$(ns_per_pkt "$(kv cpu_s "$tx_out")" "$pk")"
			rec "$mtu" stream busy_tx "$t" "$s" "$rep" "$(busy "$tx_out")"
			pk="$(pkts_of "$(kv bytes "$rx_out")" "$s")"
			rec "$mtu" stream cpu_rx "$t" "$s" "$rep" "$(ns_per_pkt "$(kv cpu_s "$rx_out")" "$pk")"
			rec "$mtu" stream busy_rx "$t" "$s" "$rep" "$(busy "$rx_out")"
			log "mtu $mtu run $rep: stream $(human "$s") $t: $(kv mb_per_sec "$rx_out") MB/s"
		done
	done
}

# raw_stream ping-pong: server in host 1.
base_pingpong() {
	local proto="$1" s="$2" t="$3" log="$4" port srv out n
	n="$(pp_iters "$s")"
	port="$(free_port "$proto")"
	bg "$log.srv" ip netns exec "$NS1" timeout -k 5 "$T_RUN" "$RAW" "$proto" pong "$port" -s "$s" -n "$n" -x 10 -t "$T_RUN"
	srv=$bg_pid
	if ! wait_bound "$NS1" "$proto" "$port" "$srv"; then
		reap "$srv" kill
		failed "$mtu" base "$t" "$s" "$rep" "ping-pong server not bound ($log.srv)"
		return
	fi
	run "$log" ip netns exec "$NS0" timeout -k 5 "$T_RUN" "$RAW" "$proto" ping "$ADDR1" "$port" -s "$s" -n "$n" -x 10 -t "$T_RUN"
	out="$(grep '^usec_per_xfer=' "$log" | tail -n 1)"
	if [ -z "$(kv usec_per_xfer "$out")" ]; then
		reap "$srv" kill
		failed "$mtu" base "$t" "$s" "$rep" "ping-pong failed ($log)"
		return
	fi
	reap "$srv" || true
	rec "$mtu" base lat "$t" "$s" "$rep" "$(kv usec_per_xfer "$out")"
	rec "$mtu" base ppbw "$t" "$s" "$rep" "$(pp_mbps "$s" "$(kv usec_per_xfer "$out")")"
}

# raw_stream streams: one way (host 0 -> 1; CPU per packet, UDP loss) or both ways at once.
base_stream() {
	local proto="$1" s="$2" t="$3" log="$4" both="$5" p1 p2 r1 r2 s1 s2 ok=1 rx1 rx2 tx1 pk
	p1="$(free_port "$proto")"
	bg "$log.rx1" ip netns exec "$NS1" timeout -k 5 "$T_RUN" "$RAW" "$proto" recv "$p1" -s "$s" -t "$T_RECV"
	r1=$bg_pid
	wait_bound "$NS1" "$proto" "$p1" "$r1" || ok=0
	if [ "$both" -eq 1 ]; then
		p2=$((p1 + 1))
		bg "$log.rx2" ip netns exec "$NS0" timeout -k 5 "$T_RUN" "$RAW" "$proto" recv "$p2" -s "$s" -t "$T_RECV"
		r2=$bg_pid
		wait_bound "$NS0" "$proto" "$p2" "$r2" || ok=0
	fi
	if [ "$ok" -eq 1 ]; then
		bg "$log.tx1" ip netns exec "$NS0" timeout -k 5 "$T_RUN" "$RAW" "$proto" send "$ADDR1" "$p1" -s "$s" -d "$stream_ms" -t "$T_RUN"
		s1=$bg_pid
		if [ "$both" -eq 1 ]; then
			bg "$log.tx2" ip netns exec "$NS1" timeout -k 5 "$T_RUN" "$RAW" "$proto" send "$ADDR0" "$p2" -s "$s" -d "$stream_ms" -t "$T_RUN"
			s2=$bg_pid
			reap "$s2" || ok=0
		fi
		reap "$s1" || ok=0
	fi
	if [ "$ok" -eq 1 ]; then reap "$r1" || ok=0; else reap "$r1" kill; fi
	if [ "$both" -eq 1 ]; then
		if [ "$ok" -eq 1 ]; then reap "$r2" || ok=0; else reap "$r2" kill; fi
	fi
	rx1="$(grep '^bytes=' "$log.rx1" 2>/dev/null | tail -n 1)"
	if [ "$ok" -eq 0 ] || [ -z "$(kv mb_per_sec "$rx1")" ]; then
		failed "$mtu" base "$t" "$s" "$rep" "$([ "$both" -eq 1 ] && echo both-way )stream failed ($log.*)"
		return
	fi
	tx1="$(grep '^bytes=' "$log.tx1" | tail -n 1)"
	if [ "$both" -eq 1 ]; then
		rx2="$(grep '^bytes=' "$log.rx2" | tail -n 1)"
		[ -n "$(kv mb_per_sec "$rx2")" ] || {
			failed "$mtu" base "$t" "$s" "$rep" "both-way stream failed ($log.*)"
			return
		}
		rec "$mtu" base bibw "$t" "$s" "$rep" "$(awk -v a="$(kv mb_per_sec "$rx1")" -v b="$(kv mb_per_sec "$rx2")" 'BEGIN { printf "%.2f", a + b }')"
		return
	fi
	rec "$mtu" base bw "$t" "$s" "$rep" "$(kv mb_per_sec "$rx1")"
	pk="$(pkts_of "$(kv bytes "$tx1")" "$s")"
	rec "$mtu" base cpu_tx "$t" "$s" "$rep" "$(ns_per_pkt "$(kv cpu_s "$tx1")" "$pk")"
	rec "$mtu" base busy_tx "$t" "$s" "$rep" "$(busy "$tx1")"
	pk="$(pkts_of "$(kv bytes "$rx1")" "$s")"
	rec "$mtu" base cpu_rx "$t" "$s" "$rep" "$(ns_per_pkt "$(kv cpu_s "$rx1")" "$pk")"
	rec "$mtu" base busy_rx "$t" "$s" "$rep" "$(busy "$rx1")"
	if [ "$proto" = udp ]; then
		# datagrams sent that never arrived (no flow control: the receiver's socket overflowed)
		rec "$mtu" base loss "$t" "$s" "$rep" "$(awk -v a="$(kv pkts "$tx1")" -v b="$(kv pkts "$rx1")" 'BEGIN { printf "%.2f", (a > 0 ? 100 * (a - b) / a : 0) }')"
	fi
}

run_base() {
	local s t proto log both=0
	# the both-way stream is the baseline of osu's bibw only
	if has_client osu-mpich || has_client osu-ompi5 || has_client osu-impi; then both=1; fi
	for s in "${size_list[@]}"; do
		for t in $(order raw-udp kernel-tcp); do
			proto=udp
			[ "$t" = kernel-tcp ] && proto=tcp
			log="$logs/mtu$mtu-r$rep-base-$t-$s"
			base_pingpong "$proto" "$s" "$t" "$log-pingpong.log"
			base_stream "$proto" "$s" "$t" "$log-stream.log" 0
			[ "$both" -eq 0 ] || base_stream "$proto" "$s" "$t" "$log-bistream.log" 1
		done
		log "mtu $mtu run $rep: baselines $(human "$s") done"
	done
}

for mtu in "${mtu_list[@]}"; do
	t_mtu="$(date +%s)"
	log "MTU $mtu: building the testbed (scripts/hosts.sh up 2 --mtu $mtu, prefix $SPRAY_HOSTS_PREFIX)"
	testbed_up=1
	if ! up_out="$(bash "$HOSTS_SH" up 2 --mtu "$mtu" 2>&1)"; then
		echo "$up_out" >"$logs/hosts-up-$mtu.log"
		failed "$mtu" testbed - "" 0 "scripts/hosts.sh up failed ($logs/hosts-up-$mtu.log)"
		continue
	fi
	echo "#meta testbed_$mtu $(tail -n 1 <<<"$up_out")" >>"$tsv"
	NS0="$(bash "$HOSTS_SH" ns 0)" NS1="$(bash "$HOSTS_SH" ns 1)"
	ADDR0="$(bash "$HOSTS_SH" addr 0)" ADDR1="$(bash "$HOSTS_SH" addr 1)"
	for rep in $(seq 1 "$runs"); do
		idle="$(wait_idle)"
		echo "#meta run mtu=$mtu run=$rep load=$(cut -d' ' -f1-3 /proc/loadavg) idle=$idle t=$(($(date +%s) - t_start))s" >>"$tsv"
		log "MTU $mtu, run $rep/$runs (load $(cut -d' ' -f1 /proc/loadavg), CPUs idle $idle before it)"
		for c in "${client_list[@]}"; do
			case "$c" in
			fi_pingpong) run_fi_pingpong ;;
			osu-*) run_osu "${c#osu-}" ;;
			imb) run_imb ;;
			stream) run_stream ;;
			base) run_base ;;
			esac
		done
	done
	hosts_reap 2 >/dev/null 2>&1 || true
	bash "$HOSTS_SH" down >/dev/null 2>&1 || true
	testbed_up=0
	echo "#meta elapsed_$mtu $(($(date +%s) - t_mtu))" >>"$tsv"
done
{
	echo "#meta load_end $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "#meta elapsed $(($(date +%s) - t_start))"
	echo "#meta failures $failures"
} >>"$tsv"

# ---------------------------------------------------------------- report
report_args=(--tsv "$tsv" --md "$base_name.md")
[ "$plot" -eq 0 ] || report_args+=(--png "$base_name.png")
report_rc=0
python3 "$SPRAY_ROOT/scripts/hostbench_report.py" "${report_args[@]}" || report_rc=$?
[ -f "$base_name.md" ] || fatal "the report was not written (hostbench_report.py exit $report_rc)"
cat "$base_name.md"
echo
echo "hostbench: $(($(date +%s) - t_start)) s, load average $load_start at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end, $failures failed run(s)"
echo "hostbench: table $base_name.md"
[ "$plot" -eq 0 ] || [ ! -f "$base_name.png" ] || echo "hostbench: plot  $base_name.png"
echo "hostbench: data  $tsv, logs $logs/"
[ "$failures" -eq 0 ] && [ "$report_rc" -eq 0 ]
