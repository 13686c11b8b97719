#!/usr/bin/env bash
# bench.sh: fi_pingpong -e rdm latency and bandwidth, spray against libfabric's tcp, same run.
#
# Usage: scripts/bench.sh [options]
#   -n N                repetitions; the table shows medians (default: 5)
#   --loopback          both processes in the root namespace over 127.0.0.1 (default)
#   --netns             server in spray-a, client in spray-b over the veth pair
#   --providers "A B"   providers to compare; ratios are A/B (default: "spray tcp")
#   --sizes "S ..."     message sizes in bytes (default: "8 4096 65536 1048576")
#   --mode msg|tagged   fi_pingpong transmit mode (default: msg)
#   --no-baselines      leave out the kernel UDP / TCP ping-pong baselines
#                       (scripts/raw_pingpong.c, busy-polling; UDP only up to 64 KiB)
#   --no-save           do not write results/bench-<date>.md
# Repetitions interleave the providers (A B, then B A, ...) and wait for an idle
# CPU first, so background load hits both alike. Latency is fi_pingpong's
# usec/xfer (half a round trip); MB/s is its MB/sec column (10^6 B/s, both
# directions of the ping-pong counted).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

reps=5
net="loopback"
providers=(spray tcp)
sizes=(8 4096 65536 1048576)
mode="msg"
save=1
baselines=1
while [ "$#" -gt 0 ]; do
	case "$1" in
	-n) reps="${2:?}" && shift ;;
	--loopback) net="loopback" ;;
	--netns) net="netns" ;;
	--providers) read -r -a providers <<<"${2:?}" && shift ;;
	--sizes) read -r -a sizes <<<"${2:?}" && shift ;;
	--mode) mode="${2:?}" && shift ;;
	--no-save) save=0 ;;
	--no-baselines) baselines=0 ;;
	-h | --help)
		usage
		exit 0
		;;
	*) die "unknown option: $1 (see --help)" ;;
	esac
	shift
done
if ! [[ "$reps" =~ ^[1-9][0-9]*$ ]] || [ "$reps" -gt 100 ]; then die "-n must be 1..100"; fi
[ "${#providers[@]}" -ge 1 ] || die "--providers is empty"
need_cmd fi_pingpong awk

# Iterations per size: ~0.1-1 s per run on this kind of machine.
iters_for() {
	local s="$1"
	if [ "$s" -ge 1048576 ]; then echo 100; elif [ "$s" -ge 65536 ]; then echo 500; elif [ "$s" -ge 4096 ]; then echo 2000; else echo 5000; fi
}

# Waits (at most ~5 s) until the CPUs were >= 80 % idle over 0.2 s.
wait_idle() {
	local i a b
	for i in $(seq 1 25); do
		a="$(awk '/^cpu / { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)"
		sleep 0.2
		b="$(awk '/^cpu / { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)"
		if awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ");
			d = y[2] - x[2]; exit !(d > 0 && (y[1] - x[1]) / d >= 0.8) }'; then
			return 0
		fi
	done
}

created_netns=0
cleanup() {
	if [ "$created_netns" -eq 1 ]; then
		bash "$SPRAY_ROOT/scripts/netns.sh" down >/dev/null 2>&1 || true
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

pp_net=()
srv_ns=()
cli_ns=()
server_addr="127.0.0.1"
if [ "$net" = netns ]; then
	need_root
	if ! bash "$SPRAY_ROOT/scripts/netns.sh" status; then
		created_netns=1
		bash "$SPRAY_ROOT/scripts/netns.sh" up >/dev/null
	fi
	pp_net=(--netns)
	srv_ns=(ip netns exec "$SPRAY_NS_A")
	cli_ns=(ip netns exec "$SPRAY_NS_B")
	server_addr="$SPRAY_ADDR_A"
fi

# Ratios compare the first two providers asked for (not the baselines).
a="${providers[0]}"
b="${providers[1]:-}"

# Kernel baselines run as pseudo-providers "kernel-udp" / "kernel-tcp".
raw_bin="$SPRAY_PROVIDER_DIR/raw_pingpong"
if [ "$baselines" -eq 1 ]; then
	if command -v cc >/dev/null 2>&1 && mkdir -p "$SPRAY_PROVIDER_DIR" &&
		cc -O2 -Wall -o "$raw_bin" "$SPRAY_ROOT/scripts/raw_pingpong.c"; then
		providers+=(kernel-udp kernel-tcp)
	else
		log "no C compiler or build failed: kernel baselines left out"
	fi
fi

# One kernel ping-pong (proto size iters); prints "RESULT ... usec_per_xfer= mb_per_sec=".
run_raw() {
	local proto="$1" s="$2" n="$3" port srv rc=0 i out
	[ "$proto" = tcp ] || [ "$s" -le 65507 ] || return 2
	port=$((20000 + (RANDOM % 20000)))
	"${srv_ns[@]}" timeout 60 "$raw_bin" "$proto" "$port" "$s" "$n" >/dev/null 2>&1 &
	srv=$!
	for i in $(seq 1 100); do
		if [ "$proto" = tcp ]; then
			"${srv_ns[@]}" ss -Hltn "sport = :$port" | grep -q . && break
		else
			"${srv_ns[@]}" ss -Hlun "sport = :$port" | grep -q . && break
		fi
		[ "$i" -lt 100 ] || { kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; return 1; }
		sleep 0.05
	done
	out="$("${cli_ns[@]}" timeout 60 "$raw_bin" "$proto" "$port" "$s" "$n" "$server_addr" 2>/dev/null)" || rc=1
	[ "$rc" -eq 0 ] || kill "$srv" 2>/dev/null || true
	wait "$srv" 2>/dev/null || rc=1
	[ "$rc" -eq 0 ] && echo "RESULT $out"
}

declare -A lat bw
failures=0
for rep in $(seq 1 "$reps"); do
	order=("${providers[@]}")
	if [ $((rep % 2)) -eq 0 ]; then
		# Reverse the order on even repetitions.
		order=()
		for ((i = ${#providers[@]} - 1; i >= 0; i--)); do order+=("${providers[$i]}"); done
	fi
	wait_idle
	for prov in "${order[@]}"; do
		for s in "${sizes[@]}"; do
			case "$prov" in
			kernel-udp | kernel-tcp)
				rrc=0
				out="$(run_raw "${prov#kernel-}" "$s" "$(iters_for "$s")")" || rrc=$?
				[ "$rrc" -ne 2 ] || continue # UDP cannot carry this size in one datagram
				;;
			*)
				out="$(bash "$SPRAY_ROOT/scripts/pingpong.sh" -p "$prov" -e rdm -m "$mode" -S "$s" \
					-I "$(iters_for "$s")" --timeout 60 "${pp_net[@]}" 2>/dev/null)" || true
				;;
			esac
			line="$(grep '^RESULT ' <<<"$out" | tail -n 1)" || true
			if [ -z "$line" ]; then
				log "rep $rep: $prov at $s B failed: $(grep '^SUMMARY' <<<"$out" || echo no output)"
				failures=$((failures + 1))
				continue
			fi
			u="$(sed -n 's/.*usec_per_xfer=\([0-9.]*\).*/\1/p' <<<"$line")"
			m="$(sed -n 's/.*mb_per_sec=\([0-9.]*\).*/\1/p' <<<"$line")"
			lat["$prov,$s"]="${lat["$prov,$s"]:-} $u"
			bw["$prov,$s"]="${bw["$prov,$s"]:-} $m"
		done
	done
	log "repetition $rep/$reps done"
done

human() {
	awk -v s="$1" 'BEGIN { if (s >= 1048576) printf "%g MiB", s / 1048576; else if (s >= 1024) printf "%g KiB", s / 1024; else printf "%d B", s }'
}
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a" || b == "n/a" || b == 0) print "n/a"; else printf "%.2f\n", a / b }'
}

table="$(
	echo "## fi_pingpong -e rdm -m $mode, $net, median of $reps ($(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, libfabric $(fi_info --version | awk '/^libfabric:/ {print $2}'))"
	echo
	hdr="| size |"
	sep="|---:|"
	for p in "${providers[@]}"; do
		hdr+=" $p usec/xfer |"
		sep+="---:|"
	done
	[ -z "$b" ] || { hdr+=" latency $a/$b |" && sep+="---:|"; }
	for p in "${providers[@]}"; do
		hdr+=" $p MB/s |"
		sep+="---:|"
	done
	[ -z "$b" ] || { hdr+=" bandwidth $a/$b |" && sep+="---:|"; }
	echo "$hdr"
	echo "$sep"
	for s in "${sizes[@]}"; do
		row="| $(human "$s") |"
		declare -A ml=() mb=()
		for p in "${providers[@]}"; do
			# shellcheck disable=SC2086 # the value is a space-separated list
			ml[$p]="$(median ${lat["$p,$s"]:-})"
			# shellcheck disable=SC2086
			mb[$p]="$(median ${bw["$p,$s"]:-})"
			row+=" ${ml[$p]} |"
		done
		[ -z "$b" ] || row+=" $(ratio "${ml[$a]}" "${ml[$b]}") |"
		for p in "${providers[@]}"; do row+=" ${mb[$p]} |"; done
		[ -z "$b" ] || row+=" $(ratio "${mb[$a]}" "${mb[$b]}") |"
		echo "$row"
	done
	case " ${providers[*]} " in
	*" kernel-"*) echo && echo "kernel-udp / kernel-tcp: plain sockets ping-pong with busy polling (scripts/raw_pingpong.c); UDP only up to 64 KiB." ;;
	esac
	[ "$failures" -eq 0 ] || { echo && echo "($failures run(s) failed: n/a cells)"; }
)"
echo "$table"
if [ "$save" -eq 1 ]; then
	mkdir -p "$SPRAY_ROOT/results"
	out_file="$SPRAY_ROOT/results/bench-$(date -u +%Y%m%d-%H%M%S).md"
	printf '%s\n' "$table" >"$out_file"
	log "saved $out_file"
fi
[ "$failures" -eq 0 ]
