#!/usr/bin/env bash
# pingpong.sh: one fi_pingpong server+client run over a given provider, with a parsable result.
#
# Usage: scripts/pingpong.sh [options]
#   -p, --provider NAME   provider under test (default: spray; also tcp, udp, "udp;ofi_rxd")
#   -e, --ep rdm|dgram    endpoint type (default: rdm)
#   -m, --mode msg|tagged transmit mode (default: msg)
#   -S, --size all|N      'all' (fi_pingpong's power-of-two list) or one size in bytes (default: all)
#   -I, --iters N         iterations per size (default: fi_pingpong's own, 10 in 1.17)
#   -c, --check           data integrity check (fi_pingpong -c)
#       --netns           server in spray-a, client in spray-b connecting to 198.18.0.1
#                         (creates the testbed if absent and removes it afterwards)
#       --loss PCT        random UDP loss in both namespaces for this run (implies --netns)
#       --hosts           server in host 1, client in host 0 of the scripts/hosts.sh testbed
#                         (prefix SPRAY_HOSTS_PREFIX), over its ECMP fabric, providers on h0;
#                         the testbed must be up (udp_in/udp_dropped: its counters)
#       --timeout SEC     bound on each fi_pingpong process (default: 300)
#       --stall SEC       fail when neither side printed anything for SEC (default: 30);
#                         fi_pingpong prints one row per size, so this catches a hang early
#       --log-dir DIR     keep the raw server/client output there (default: a temp dir,
#                         removed on success)
#   -v, --verbose         print the raw client output too
#
# Output (stdout), one line per size, then a summary line:
#   RESULT prov=tcp ep=rdm mode=msg net=loopback loss=0 size=65536 iters=10 usec_per_xfer=12.30 mb_per_sec=456.70
#   SUMMARY status=pass prov=tcp ep=rdm mode=msg net=loopback loss=0 rows=46 max_size=6291456 udp_in=0 udp_dropped=0 elapsed_s=1.2
# mb_per_sec is fi_pingpong's MB/sec column: 10^6 bytes/s, both directions counted.
# Exit status: 0 if both sides exited 0 with every message acknowledged and
# (with -c) verified; non-zero otherwise (SUMMARY status=fail reason=...).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

prov="spray"
ep="rdm"
mode="msg"
size="all"
iters=""
check=0
netns=0
hosts=0
loss=""
timeout_s=300
stall_s=30
log_dir=""
verbose=0

while [ "$#" -gt 0 ]; do
	case "$1" in
	-p | --provider) prov="${2:?}" && shift ;;
	-e | --ep) ep="${2:?}" && shift ;;
	-m | --mode) mode="${2:?}" && shift ;;
	-S | --size) size="${2:?}" && shift ;;
	-I | --iters) iters="${2:?}" && shift ;;
	-c | --check) check=1 ;;
	--netns) netns=1 ;;
	--loss) loss="${2:?}" && netns=1 && shift ;;
	--hosts) hosts=1 ;;
	--timeout) timeout_s="${2:?}" && shift ;;
	--stall) stall_s="${2:?}" && shift ;;
	--log-dir) log_dir="${2:?}" && shift ;;
	-v | --verbose) verbose=1 ;;
	-h | --help)
		usage
		exit 0
		;;
	*) die "unknown option: $1 (see --help)" ;;
	esac
	shift
done

case "$ep" in rdm | dgram) ;; *) die "--ep must be rdm or dgram" ;; esac
case "$mode" in msg | tagged) ;; *) die "--mode must be msg or tagged" ;; esac
[[ "$size" = all || "$size" =~ ^[0-9]+$ ]] || die "--size must be 'all' or a byte count"
[[ -z "$iters" || "$iters" =~ ^[0-9]+$ ]] || die "--iters must be a number"
[[ "$timeout_s" =~ ^[0-9]+$ ]] || die "--timeout must be seconds"
[[ "$stall_s" =~ ^[1-9][0-9]*$ ]] || die "--stall must be seconds > 0"
need_cmd fi_pingpong timeout stdbuf stat ss awk
[ "$netns" -eq 0 ] || [ "$hosts" -eq 0 ] || die "--netns/--loss and --hosts exclude each other"

net="loopback"
[ "$netns" -eq 0 ] || net="netns"
[ "$hosts" -eq 0 ] || net="hosts"
desc="prov=$prov ep=$ep mode=$mode net=$net loss=${loss:-0}"
start_ns="$(date +%s%N)"

keep_logs=1
if [ -z "$log_dir" ]; then
	log_dir="$(mktemp -d /tmp/spray-pingpong.XXXXXX)"
	keep_logs=0
fi
mkdir -p "$log_dir"
srv_log="$log_dir/server.log"
cli_log="$log_dir/client.log"

srv_pid=""
cli_pid=""
created_netns=0
reset_loss=0
lock_fd=""

cleanup() {
	local rc=$? pid
	for pid in "$cli_pid" "$srv_pid"; do
		if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
			kill -TERM "$pid" 2>/dev/null || true
			wait "$pid" 2>/dev/null || true
		fi
	done
	if [ "$created_netns" -eq 1 ]; then
		bash "$SPRAY_ROOT/scripts/netns.sh" down >/dev/null 2>&1 || true
	elif [ "$reset_loss" -eq 1 ]; then
		bash "$SPRAY_ROOT/scripts/netns.sh" up >/dev/null 2>&1 || true
	fi
	if [ "$keep_logs" -eq 0 ] && [ "$rc" -eq 0 ]; then
		rm -rf "$log_dir"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The result rows: "<size> <sent> <=acked> <total> <time>s <MB/sec> <usec/xfer> <Mxfers/sec>".
rows() {
	awk '$1 ~ /^[0-9.]+[kmg]?$/ && $3 ~ /^[=+-][0-9]+[kmb]?$/ && NF == 8 { print }' "$1"
}

fail() {
	local reason="$1" last
	# The last size both sides completed tells where a run broke.
	last="$(rows "$cli_log" 2>/dev/null | tail -n 1 | awk '{ print $1 }')"
	[ -z "$last" ] || last="$(human_to_bytes "$last")"
	echo "SUMMARY status=fail $desc reason=$reason last_done_size=${last:-none} logs=$log_dir"
	{
		echo "--- server ($srv_log), last lines:"
		tail -n 15 "$srv_log" 2>/dev/null || true
		echo "--- client ($cli_log), last lines:"
		tail -n 15 "$cli_log" 2>/dev/null || true
	} >&2
	keep_logs=1
	exit 1
}

# Command prefixes per side: namespace (netns only) and the interface each
# provider should use (lo on loopback, the veth across namespaces), so no
# provider wanders onto the host's real interface.
srv_ns=()
cli_ns=()
server_addr="127.0.0.1"
srv_if="lo"
cli_if="lo"
if [ "$netns" -eq 1 ]; then
	need_root
	mkdir -p "$(dirname "$SPRAY_NETNS_LOCK")"
	exec {lock_fd}>"$SPRAY_NETNS_LOCK"
	flock -w 900 "$lock_fd" || die "could not lock $SPRAY_NETNS_LOCK within 900 s"
	if ! bash "$SPRAY_ROOT/scripts/netns.sh" status; then
		created_netns=1
		bash "$SPRAY_ROOT/scripts/netns.sh" up --loss "${loss:-0}" >/dev/null
	elif [ -n "$loss" ]; then
		reset_loss=1
		bash "$SPRAY_ROOT/scripts/netns.sh" up --loss "$loss" >/dev/null
	fi
	srv_ns=(ip netns exec "$SPRAY_NS_A")
	cli_ns=(ip netns exec "$SPRAY_NS_B")
	server_addr="$SPRAY_ADDR_A"
	srv_if="$SPRAY_VETH_A"
	cli_if="$SPRAY_VETH_B"
fi
hosts_sh="$SPRAY_ROOT/scripts/hosts.sh"
if [ "$hosts" -eq 1 ]; then
	need_root
	[ "$(bash "$hosts_sh" get N 2>/dev/null || echo 0)" -ge 2 ] ||
		die "--hosts: no testbed of 2 hosts with prefix ${SPRAY_HOSTS_PREFIX:-sprh-} is up (scripts/hosts.sh up 2)"
	srv_ns=(ip netns exec "$(bash "$hosts_sh" ns 1)")
	cli_ns=(ip netns exec "$(bash "$hosts_sh" ns 0)")
	server_addr="$(bash "$hosts_sh" addr 1)"
	srv_if="h0"
	cli_if="h0"
fi
# FI_<PROV>_IFACE for spray and libfabric's tcp/udp, unless the caller set one.
iface_env() {
	local v
	printf 'env\n'
	for v in FI_SPRAY_IFACE FI_TCP_IFACE FI_UDP_IFACE; do
		[ -n "${!v:-}" ] || printf '%s=%s\n' "$v" "$1"
	done
}
mapfile -t srv_env < <(iface_env "$srv_if")
mapfile -t cli_env < <(iface_env "$cli_if")

# Sums udp_in / udp_dropped over both namespaces (0 0 on loopback).
udp_counters() {
	if [ "$hosts" -eq 1 ]; then
		bash "$hosts_sh" drops | awk '{ print $1, $2 }'
	elif [ "$netns" -eq 1 ]; then
		bash "$SPRAY_ROOT/scripts/netns.sh" stats | awk '{
			for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] += kv[2] }
		} END { printf "%d %d\n", v["udp_in"], v["udp_dropped"] }'
	else
		echo "0 0"
	fi
}
read -r udp_in0 udp_drop0 < <(udp_counters)

provider_env "$prov"
pp_args=(-p "$prov" -e "$ep" -m "$mode" -S "$size")
[ -z "$iters" ] || pp_args+=(-I "$iters")
[ "$check" -eq 0 ] || pp_args+=(-c)

port_listening() {
	"${srv_ns[@]}" ss -Hltn "sport = :$1" 2>/dev/null | grep -q .
}

# Starts the server on a free control port; retries with another port if the
# bind loses a race (bounded). Leaves srv_pid and port set.
start_server() {
	local attempt
	for attempt in 1 2 3 4 5; do
		port=$((20000 + (RANDOM % 20000)))
		port_listening "$port" && continue
		"${srv_ns[@]}" "${srv_env[@]}" timeout -k 5 "$timeout_s" stdbuf -oL fi_pingpong "${pp_args[@]}" -B "$port" >"$srv_log" 2>&1 &
		srv_pid=$!
		# fi_pingpong's client does not retry: wait until the server listens.
		for _ in $(seq 1 100); do
			port_listening "$port" && return 0
			kill -0 "$srv_pid" 2>/dev/null || break
			sleep 0.05
		done
		if kill -0 "$srv_pid" 2>/dev/null; then
			fail "server_not_listening_after_5s"
		fi
		wait "$srv_pid" 2>/dev/null || true
		srv_pid=""
		grep -qi 'bind' "$srv_log" || fail "server_exited_early"
	done
	fail "no_free_control_port"
}

start_server

# Runs the client and watches both logs: fi_pingpong prints a row per size,
# so output that stops growing for stall_s means a hung run, cut short long
# before the overall timeout. Sets cli_rc (and stalled=1 on a stall).
stalled=0
run_client() {
	local last=-1 now size since
	"${cli_ns[@]}" "${cli_env[@]}" timeout -k 5 "$timeout_s" stdbuf -oL fi_pingpong "${pp_args[@]}" \
		-P "$port" "$server_addr" >"$cli_log" 2>&1 &
	cli_pid=$!
	since="$(date +%s)"
	while kill -0 "$cli_pid" 2>/dev/null; do
		size="$(($(stat -c %s "$cli_log") + $(stat -c %s "$srv_log")))"
		now="$(date +%s)"
		if [ "$size" -ne "$last" ]; then
			last="$size"
			since="$now"
		elif [ $((now - since)) -ge "$stall_s" ]; then
			stalled=1
			kill -TERM "$cli_pid" 2>/dev/null || true
			[ -z "$srv_pid" ] || kill -TERM "$srv_pid" 2>/dev/null || true
			break
		fi
		sleep 0.25
	done
	cli_rc=0
	wait "$cli_pid" || cli_rc=$?
	cli_pid=""
}

cli_rc=0
for attempt in 1 2 3 4 5; do
	run_client
	# Only a refused control connection is safe to retry: the server is still
	# waiting in accept() and nothing has been exchanged yet.
	if [ "$cli_rc" -ne 0 ] && grep -q 'failed to connect' "$cli_log" && kill -0 "$srv_pid" 2>/dev/null; then
		cp "$cli_log" "$cli_log.attempt$attempt"
		sleep 0.2
		continue
	fi
	break
done

srv_rc=0
wait "$srv_pid" || srv_rc=$?
[ "$stalled" -eq 0 ] || fail "stalled_no_output_for_${stall_s}s"
srv_pid=""
[ "$verbose" -eq 0 ] || cat "$cli_log" >&2

read -r udp_in1 udp_drop1 < <(udp_counters)
udp_in=$((udp_in1 - udp_in0))
udp_dropped=$((udp_drop1 - udp_drop0))


if grep -q 'Error at iteration' "$cli_log" "$srv_log"; then
	fail "data_integrity_error"
fi
for who in client server; do
	if [ "$who" = client ]; then rc="$cli_rc"; else rc="$srv_rc"; fi
	case "$rc" in
	0) ;;
	124 | 137) fail "${who}_timeout_${timeout_s}s" ;;
	*) fail "${who}_exit_$rc" ;;
	esac
done

n_cli="$(rows "$cli_log" | wc -l)"
n_srv="$(rows "$srv_log" | wc -l)"
[ "$n_cli" -gt 0 ] || fail "no_result_rows"
[ "$n_cli" -eq "$n_srv" ] || fail "row_count_mismatch_client_${n_cli}_server_${n_srv}"
if rows "$cli_log" | awk '$3 !~ /^=/ { bad = 1 } END { exit !bad }'; then
	fail "unacknowledged_messages"
fi

max_size=0
while read -r hsize sent _acked _total _time mbps usec _mxfers; do
	if [ "$size" = all ]; then bytes="$(human_to_bytes "$hsize")"; else bytes="$size"; fi
	n_iters="${iters:-$(human_to_bytes "$sent")}"
	echo "RESULT $desc size=$bytes iters=$n_iters usec_per_xfer=$usec mb_per_sec=$mbps"
	[ "$bytes" -le "$max_size" ] || max_size="$bytes"
done < <(rows "$cli_log")

elapsed="$(awk -v a="$start_ns" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')"
echo "SUMMARY status=pass $desc rows=$n_cli max_size=$max_size udp_in=$udp_in udp_dropped=$udp_dropped elapsed_s=$elapsed"
