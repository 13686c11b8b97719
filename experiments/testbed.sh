#!/usr/bin/env bash
# testbed.sh: the experiment networks in namespaces (prefix sprx-, addresses in 198.18.0.0/15).
#
# Usage: experiments/testbed.sh COMMAND [ARGS]
#   up [incast|ecmp|all]     build (after tearing down what exists; idempotent); default all
#   down                     delete every sprx- namespace (by name); idempotent
#   status                   list namespaces, qdiscs and filter rules
#   loss incast|ecmp PCT     random loss of PCT % (0 removes) on the path to the receiver
#                            (incast: switch -> rx, nft; ecmp: R2 -> B, netem if the kernel
#                            has it and USE_NETEM != 0, else nft numgen)
#   bad drop LINK PCT        ECMP link LINK (0-based) drops PCT % in R1 -> R2 direction (nft)
#   bad slow LINK FACTOR     ECMP link LINK shaped FACTOR times slower than the others (tbf)
#   bad clear                restore every ECMP link
#   counters                 JSON {link: tx_packets} of R1's ECMP links
#
# Environment (read by `up`):
#   SENDERS=4                incast sender hosts sprx-s0..
#   RATE=200mbit             incast bottleneck (switch egress to the receiver)
#   BUF=65536                incast bottleneck buffer, bytes (about 1 BDP at 200 Mbit/s, 2.6 ms)
#   QDISC=tbf                tbf, or htb (HTB class + bfifo of BUF bytes)
#   LINKS=4                  ECMP parallel links (2..8)
#   LINK_RATE=100mbit        rate of each ECMP link (R1 -> R2); "none" leaves them unshaped
#   LINK_BUF=65536           buffer of each ECMP link, bytes
#   CTRL_PORT=19000          TCP control port of the traffic tool: never dropped by loss rules
#
# Topology:
#   incast: sprx-s<i> (h0 198.18.<i+1>.2) -- sprx-sw (sw-s<i> .1 / sw-rx 198.18.100.1) --
#           sprx-rx (h0 198.18.100.2); bottleneck on sw-rx egress.
#   ecmp:   sprx-a (h0 198.19.1.2) -- sprx-r1 (r1-a .1) =K= r1-l<k> 198.19.<10+k>.1 ..
#           r2-l<k> .2 (sprx-r2) -- r2-b 198.19.2.1 -- sprx-b (h0 198.19.2.2)
#   R1/R2: ip_forward=1, rp_filter=0, fib_multipath_hash_policy=3, hash_fields=0x0037.
# Every veth has tso/gso/gro off so that shaping and loss act on real packets.
set -euo pipefail

SENDERS="${SENDERS:-4}"
RATE="${RATE:-200mbit}"
BUF="${BUF:-65536}"
QDISC="${QDISC:-tbf}"
LINKS="${LINKS:-4}"
LINK_RATE="${LINK_RATE:-100mbit}"
LINK_BUF="${LINK_BUF:-65536}"
CTRL_PORT="${CTRL_PORT:-19000}"

die() {
	echo "testbed.sh: $*" >&2
	exit 1
}
nsx() {
	local ns="$1"
	shift
	ip netns exec "sprx-$ns" "$@"
}

all_ns() { ip netns list 2>/dev/null | awk '{print $1}' | grep '^sprx-' || true; }

down() {
	local ns pid
	for ns in $(all_ns); do
		# Processes left in a namespace (ours, by construction: only our tools run there).
		for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
		ip netns del "$ns" 2>/dev/null || true
	done
}

# offloads_off NS DEV
offloads_off() { nsx "$1" ethtool -K "$2" tso off gso off gro off >/dev/null 2>&1 || true; }

# veth NS1 DEV1 ADDR1 NS2 DEV2 ADDR2
veth() {
	ip link add "$2" netns "sprx-$1" type veth peer name "$5" netns "sprx-$4"
	nsx "$1" ip addr add "$3" dev "$2"
	nsx "$4" ip addr add "$6" dev "$5"
	nsx "$1" ip link set "$2" up
	nsx "$4" ip link set "$5" up
	offloads_off "$1" "$2"
	offloads_off "$4" "$5"
}

mkns() {
	ip netns add "sprx-$1"
	nsx "$1" ip link set lo up
}

router() {
	local ns="$1"
	nsx "$ns" sysctl -qw net.ipv4.ip_forward=1
	# The glob must expand inside the namespace (its own interfaces).
	nsx "$ns" sh -c 'for f in /proc/sys/net/ipv4/conf/*/rp_filter; do echo 0 > "$f"; done'
	nsx "$ns" sysctl -qw net.ipv4.fib_multipath_hash_policy=3
	nsx "$ns" sysctl -qw net.ipv4.fib_multipath_hash_fields=0x0037
}

# shape NS DEV RATE BUF_BYTES (replaces the root qdisc)
shape() {
	local ns="$1" dev="$2" rate="$3" buf="$4"
	nsx "$ns" tc qdisc del dev "$dev" root 2>/dev/null || true
	[ "$rate" = none ] && return 0
	if [ "$QDISC" = htb ]; then
		nsx "$ns" tc qdisc add dev "$dev" root handle 1: htb default 1
		nsx "$ns" tc class add dev "$dev" parent 1: classid 1:1 htb rate "$rate" ceil "$rate" burst 16k quantum 1514
		nsx "$ns" tc qdisc add dev "$dev" parent 1:1 bfifo limit "$buf"
	else
		nsx "$ns" tc qdisc add dev "$dev" root tbf rate "$rate" burst 16kb limit "$buf"
	fi
}

up_incast() {
	local i
	[ "$SENDERS" -ge 1 ] && [ "$SENDERS" -le 32 ] || die "SENDERS must be 1..32"
	mkns sw
	mkns rx
	router sw
	veth rx h0 198.18.100.2/24 sw sw-rx 198.18.100.1/24
	nsx rx ip route add default via 198.18.100.1
	for i in $(seq 0 $((SENDERS - 1))); do
		mkns "s$i"
		veth "s$i" h0 "198.18.$((i + 1)).2/24" sw "sw-s$i" "198.18.$((i + 1)).1/24"
		nsx "s$i" ip route add default via "198.18.$((i + 1)).1"
	done
	router sw
	shape sw sw-rx "$RATE" "$BUF"
}

up_ecmp() {
	local k nh1="" nh2=""
	[ "$LINKS" -ge 2 ] && [ "$LINKS" -le 8 ] || die "LINKS must be 2..8"
	mkns a
	mkns b
	mkns r1
	mkns r2
	veth a h0 198.19.1.2/24 r1 r1-a 198.19.1.1/24
	veth b h0 198.19.2.2/24 r2 r2-b 198.19.2.1/24
	nsx a ip route add default via 198.19.1.1
	nsx b ip route add default via 198.19.2.1
	for k in $(seq 0 $((LINKS - 1))); do
		veth r1 "r1-l$k" "198.19.$((10 + k)).1/24" r2 "r2-l$k" "198.19.$((10 + k)).2/24"
		nh1="$nh1 nexthop via 198.19.$((10 + k)).2 dev r1-l$k weight 1"
		nh2="$nh2 nexthop via 198.19.$((10 + k)).1 dev r2-l$k weight 1"
		shape r1 "r1-l$k" "$LINK_RATE" "$LINK_BUF"
	done
	router r1
	router r2
	# shellcheck disable=SC2086
	nsx r1 ip route replace 198.19.2.0/24 $nh1
	# shellcheck disable=SC2086
	nsx r2 ip route replace 198.19.1.0/24 $nh2
}

check_tools() {
	[ "$(id -u)" -eq 0 ] || die "needs root"
	local c
	for c in ip tc nft ethtool; do command -v "$c" >/dev/null || die "missing $c"; done
}

have_netem() {
	# Probe on a dummy qdisc target inside a scratch namespace.
	ip netns add sprx-netem-probe 2>/dev/null || true
	ip -n sprx-netem-probe link set lo up
	local ok=1
	ip netns exec sprx-netem-probe tc qdisc add dev lo root netem loss 0% 2>/dev/null && ok=0
	ip netns del sprx-netem-probe 2>/dev/null || true
	return $ok
}

# nft_drop NS TABLE OIF PCT: drop PCT % of forwarded packets leaving OIF (control port spared).
nft_drop() {
	local ns="$1" table="$2" oif="$3" pct="$4" permyriad
	nsx "$ns" nft delete table inet "$table" 2>/dev/null || true
	permyriad="$(awk -v p="$pct" 'BEGIN { printf "%d", p * 100 + 0.5 }')"
	[ "$permyriad" -le 0 ] && return 0
	[ "$permyriad" -le 10000 ] || die "loss must be 0..100"
	nsx "$ns" nft add table inet "$table"
	nsx "$ns" nft "add chain inet $table fw { type filter hook forward priority 0; policy accept; }"
	nsx "$ns" nft add rule inet "$table" fw tcp dport "$CTRL_PORT" accept
	nsx "$ns" nft add rule inet "$table" fw tcp sport "$CTRL_PORT" accept
	nsx "$ns" nft add rule inet "$table" fw oifname "$oif" numgen random mod 10000 '<' "$permyriad" counter drop
}

loss() {
	local where="${1:?incast|ecmp}" pct="${2:?PCT}" ns oif
	case "$where" in
	incast) ns=sw oif=sw-rx ;;
	ecmp) ns=r2 oif=r2-b ;;
	*) die "loss: incast or ecmp" ;;
	esac
	# netem where the kernel has it (USE_NETEM=0 forces nft). sw-rx carries the incast shaper
	# as its root qdisc, so incast loss always uses nft and leaves the bottleneck alone.
	nsx "$ns" nft delete table inet sprx_loss 2>/dev/null || true
	if nsx "$ns" tc qdisc show dev "$oif" | grep -q netem; then
		nsx "$ns" tc qdisc del dev "$oif" root
	fi
	if [ "$where" = ecmp ] && [ "${USE_NETEM:-1}" = 1 ] && have_netem; then
		if awk -v p="$pct" 'BEGIN { exit !(p > 0) }'; then
			nsx "$ns" tc qdisc add dev "$oif" root netem loss "$pct%"
		fi
		echo "loss $where $pct% via netem"
	else
		nft_drop "$ns" sprx_loss "$oif" "$pct"
		echo "loss $where $pct% via nft"
	fi
}

bad() {
	local what="${1:?drop|slow|clear}" k
	case "$what" in
	drop) nft_drop r1 sprx_bad "r1-l${2:?LINK}" "${3:?PCT}" ;;
	slow)
		k="${2:?LINK}"
		local f="${3:?FACTOR}" rate unit num
		[ "$LINK_RATE" != none ] || die "bad slow needs LINK_RATE"
		num="${LINK_RATE%%[a-z]*}"
		unit="${LINK_RATE#"$num"}"
		rate="$(awk -v n="$num" -v f="$f" 'BEGIN { printf "%d", n * 1000 / f }')"
		case "$unit" in mbit) unit=kbit ;; gbit) unit=mbit ;; kbit) unit=bit ;; *) die "LINK_RATE unit $unit" ;; esac
		shape r1 "r1-l$k" "$rate$unit" "$LINK_BUF"
		;;
	clear)
		nsx r1 nft delete table inet sprx_bad 2>/dev/null || true
		for k in $(seq 0 $((LINKS - 1))); do
			nsx r1 ip link show "r1-l$k" >/dev/null 2>&1 && shape r1 "r1-l$k" "$LINK_RATE" "$LINK_BUF"
		done
		;;
	*) die "bad: drop, slow or clear" ;;
	esac
}

counters() {
	nsx r1 ip -s -j link | python3 -c '
import json, sys
out = {}
for l in json.load(sys.stdin):
    n = l.get("ifname", "")
    if n.startswith("r1-l"):
        out[n] = l["stats64"]["tx"]["packets"]
print(json.dumps(out, sort_keys=True))'
}

status() {
	local ns
	for ns in $(all_ns); do
		echo "== $ns"
		ip -n "$ns" -br addr
		ip netns exec "$ns" tc qdisc show | grep -v 'noqueue' || true
		ip netns exec "$ns" nft list ruleset 2>/dev/null | grep -E 'table|drop' || true
	done
	[ -n "$(all_ns)" ]
}

cmd="${1:-}"
shift || true
case "$cmd" in
up)
	check_tools
	what="${1:-all}"
	down
	trap 'echo "testbed.sh: failed, tearing down" >&2; down' ERR
	trap 'down; exit 130' INT
	trap 'down; exit 143' TERM
	case "$what" in
	incast) up_incast ;;
	ecmp) up_ecmp ;;
	all) up_incast && up_ecmp ;;
	*) die "up: incast, ecmp or all" ;;
	esac
	trap - ERR INT TERM
	echo "testbed up: $what (senders=$SENDERS rate=$RATE buf=$BUF links=$LINKS link_rate=$LINK_RATE)"
	;;
down) down ;;
status) status ;;
loss) loss "$@" ;;
bad) bad "$@" ;;
counters) counters ;;
*)
	sed -n '2,31p' "$0"
	[ -z "$cmd" ] || exit 2
	;;
esac
