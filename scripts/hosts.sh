#!/usr/bin/env bash
# hosts.sh: N hosts (network namespaces) over an ECMP fabric, for real clients (MPI jobs).
#
#   h0 --\                      /-- h1
#   h2 ---- R1 ==K veth links== R2 ---- h3      hosts alternate: even on R1, odd on R2,
#   h4 --/                      \-- h5          so h0 <-> h1 crosses the K-link fabric
#
# Every host has one interface, h0, with 198.18.<I+1>.2/24 (router side .1), a default
# route to its router, its own hostname (PREFIX hI, set by `exec` and scripts/netns-rsh)
# and an /etc/hosts naming every host (ip netns exec mounts /etc/netns/NS/hosts).
# ECMP link k: R1 l<k> 198.19.<k+1>.1/24 <-> R2 l<k> .2. Routers: ip_forward=1,
# rp_filter=0, fib_multipath_hash_policy=3, fib_multipath_hash_fields=0x0037 (src/dst
# IP, protocol, src/dst port), ignore_routes_with_linkdown=1 (a link taken down by
# `bad flap` is routed around in both directions).
#
# --topo incast: the same hosts (names, addresses, h0) behind one switch instead, for incast
# (as experiments/testbed.sh builds it, with MPI's hostnames and launch agent):
#
#   h0 --\                   every host's downlink (switch SW -> host, SW's rh<I>) is a
#   h1 ---- SW (PREFIXsw)      bottleneck: TBF at --rate (default 500mbit) with a shallow
#   h2 --/                     buffer --buf (default 65536 bytes); uplinks are unshaped, so
#                              the senders of a fan-in (alltoall, gather) burst into it
#
# SW: rh<I> 198.18.<I+1>.1/24, ip_forward=1, rp_filter=0. --rx LIST (comma list of host
# indices, default all) shapes only those hosts' downlinks. No ECMP links: path and bad
# refuse; loss, drops, exec work as on the fabric; counters show the switch's ports.
#
# Usage: scripts/hosts.sh COMMAND [ARGS]
#   up N [--links K] [--mtu 1500|9000] [--rate RATE] [--buf BYTES] [--loss PCT]
#        [--tcp-ports LO-HI] [--offloads on|off] [--topo ecmp|incast] [--rx all|LIST]
#                        build N hosts (2..8) over K links (2..8, default 4); tears down first.
#                        --topo incast: behind one switch instead (see above; --rate and
#                        --buf then shape the switch's downlinks, --rx which ones).
#                        --mtu on every veth end of every path (default 1500). --rate: TBF
#                        on both directions of every ECMP link (e.g. 1gbit; buffer --buf,
#                        default 262144). --loss: random loss into every host (see loss).
#                        --offloads: tso/gso/gro on every veth; default on, like a real NIC
#                        (GSO super-packets cross the fabric whole), but off when --rate
#                        or --loss is given, so shaping and loss act on real packets.
#   down                 delete every namespace whose name starts with PREFIX (and our files)
#   status               namespaces, addresses, MTU, offloads, qdiscs, fault rules
#   check                a DF ping of MTU-28 bytes from h0 to every host (up runs it)
#   addr I | ns I        host I's address | namespace name
#   get KEY              a setting of the testbed that is up: N LINKS MTU RATE BUF OFFLOADS
#                        TCP_PORTS TOPO RX (exit 1 if none is up)
#   exec I CMD...        run CMD in host I (its namespace and hostname)
#   path I J SPORT [DPORT] [udp|tcp]
#                        the ECMP link R1 (or R2) picks for that flow, from `ip route get`
#   counters [--json]    packets per ECMP link and direction; UDP in/dropped per host
#                        (incast: per switch port, to the host and from it)
#   qdisc [--json]       incast: per shaped downlink, packets sent, dropped (buffer full) and
#                        overlimits of its TBF; ecmp: the same per shaped link (R1 and R2)
#   drops                totals over the hosts: UDP_IN UDP_DROPPED TCP_DROPPED (loss rules)
#   loss PCT [--tcp-ports LO-HI]
#                        drop PCT % (up to 2 decimals; 0 removes) of UDP arriving at every
#                        host (nft numgen), and of TCP to/from ports LO-HI if given (give
#                        libfabric's tcp provider that range with FI_TCP_PORT_LOW_RANGE /
#                        FI_TCP_PORT_HIGH_RANGE); other TCP (launchers, PMI, OOB) is spared
#   bad drop LINK PCT    ECMP link LINK (0-based) drops PCT % of data (UDP, TCP ports of
#                        --tcp-ports) in both directions; 100 blackholes it
#   bad slow LINK FACTOR link LINK shaped FACTOR times below --rate (needs --rate at up)
#   bad flap LINK DOWN_S UP_S COUNT [down|blackhole]
#                        in the background: COUNT times take link LINK down DOWN_S seconds,
#                        then up UP_S seconds (seconds may be fractions); prints its pid.
#                        down (default): the link loses carrier and both routers route
#                        around it at once; blackhole: it silently drops data (as bad drop 100)
#   bad clear            undo every bad ... (stops flapping, restores shaping)
#   bad counts           packets each bad drop rule dropped so far, per link: l<K> DROPPED
#
# Environment: SPRAY_HOSTS_PREFIX (default sprh-) names everything: namespaces PREFIXh<I>,
# PREFIXr1, PREFIXr2 (incast: PREFIXsw). Two testbeds with different prefixes run side by side.
set -euo pipefail

P="${SPRAY_HOSTS_PREFIX:-sprh-}"
[[ "$P" =~ ^[a-z][a-z0-9-]{0,10}$ ]] || {
	echo "hosts.sh: SPRAY_HOSTS_PREFIX '$P' must be [a-z][a-z0-9-]{0,10}" >&2
	exit 2
}
R1="${P}r1"
R2="${P}r2"
SW="${P}sw"
STATE_DIR=/run/spray-hosts
STATE="$STATE_DIR/${P}env"
LOCK="/run/lock/spray-hosts-${P}lock"
NFT=hosts_fault

die() {
	echo "hosts.sh: $*" >&2
	exit 1
}
nsx() {
	local ns="$1"
	shift
	ip netns exec "$ns" "$@"
}
host_ns() { echo "${P}h$1"; }
host_addr() { echo "198.18.$(($1 + 1)).2"; }
# The router host I hangs off: R1 for even I, R2 for odd I (incast: the switch).
host_router() {
	if [ "${TOPO:-ecmp}" = incast ]; then
		echo "$SW"
	elif (($1 % 2 == 0)); then echo "$R1"; else echo "$R2"; fi
}
# Our namespaces only: PREFIXh<digits>, PREFIXr1, PREFIXr2 (another prefix never matches).
all_ns() {
	ip netns list 2>/dev/null | awk -v p="$P" '{ n = $1; if (index(n, p) != 1) next
		r = substr(n, length(p) + 1); if (r ~ /^(h[0-9]+|r1|r2|sw)$/) print n }'
}

# State of the testbed that is up: N LINKS MTU RATE BUF OFFLOADS TCP_PORTS TOPO RX.
load_state() {
	[ -f "$STATE" ] || die "no testbed with prefix $P is up (hosts.sh up N)"
	TOPO=ecmp RX=all # state written before --topo existed
	# shellcheck disable=SC1090 # written by save_state below
	. "$STATE"
}
save_state() {
	mkdir -p "$STATE_DIR"
	cat >"$STATE" <<EOF
N=$N
LINKS=$LINKS
MTU=$MTU
RATE=$RATE
BUF=$BUF
OFFLOADS=$OFFLOADS
TCP_PORTS=$TCP_PORTS
TOPO=$TOPO
RX=$RX
EOF
}

# is_flapper PID: PID is a `bad flap` loop of this prefix (started by this script).
is_flapper() {
	[ -n "$1" ] && { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null | grep -q " _flap $P "
}

stop_flappers() {
	local f pid
	for f in "$STATE_DIR/${P}flap-"*.pid; do
		[ -e "$f" ] || continue
		pid="$(cat "$f")"
		# Only the flapper this script started: check its command line before the kill.
		if is_flapper "$pid"; then
			kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
		fi
		rm -f "$f"
	done
}

down() {
	local ns pids
	stop_flappers
	for ns in $(all_ns); do
		pids="$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')"
		[ -z "$pids" ] || echo "hosts.sh: warning: processes left in $ns: $pids (deleting it anyway)" >&2
		ip netns del "$ns" 2>/dev/null || true
		rm -rf "/etc/netns/$ns"
	done
	rm -f "$STATE"
}

# offloads NS DEV on|off
offloads() {
	if [ "$3" = on ]; then
		nsx "$1" ethtool -K "$2" tso on gso on gro on tx-udp-segmentation on >/dev/null 2>&1 ||
			nsx "$1" ethtool -K "$2" tso on gso on gro on >/dev/null
	else
		nsx "$1" ethtool -K "$2" tso off gso off gro off >/dev/null
		nsx "$1" ethtool -K "$2" tx-udp-segmentation off >/dev/null 2>&1 || true
	fi
}

# veth NS1 DEV1 ADDR1 NS2 DEV2 ADDR2: a link created straight inside the namespaces (no name
# in the root namespace, so testbeds with other prefixes never collide).
veth() {
	ip link add "$2" netns "$1" mtu "$MTU" type veth peer name "$5" netns "$4" mtu "$MTU"
	nsx "$1" ip addr add "$3" dev "$2"
	nsx "$4" ip addr add "$6" dev "$5"
	nsx "$1" ip link set "$2" up
	nsx "$4" ip link set "$5" up
	offloads "$1" "$2" "$OFFLOADS"
	offloads "$4" "$5" "$OFFLOADS"
}

mkns() {
	ip netns add "$1"
	nsx "$1" ip link set lo up
}

router() {
	local ns="$1"
	nsx "$ns" sysctl -qw net.ipv4.ip_forward=1
	# The glob must expand inside the namespace (its own interfaces), after they exist.
	# shellcheck disable=SC2016 # $f is the inner shell's
	nsx "$ns" sh -c 'for f in /proc/sys/net/ipv4/conf/*/rp_filter; do echo 0 > "$f"; done'
	# shellcheck disable=SC2016 # $f is the inner shell's
	nsx "$ns" sh -c 'for f in /proc/sys/net/ipv4/conf/*/ignore_routes_with_linkdown; do echo 1 > "$f"; done'
	nsx "$ns" sysctl -qw net.ipv4.fib_multipath_hash_policy=3
	nsx "$ns" sysctl -qw net.ipv4.fib_multipath_hash_fields=0x0037
}

# shape NS DEV RATE: TBF root qdisc (RATE "none" removes it).
shape() {
	local ns="$1" dev="$2" rate="$3" burst=$((MTU * 4 > 16384 ? MTU * 4 : 16384))
	nsx "$ns" tc qdisc del dev "$dev" root 2>/dev/null || true
	[ "$rate" = none ] && return 0
	nsx "$ns" tc qdisc add dev "$dev" root tbf rate "$rate" burst "$burst" limit "$BUF"
}

# PCT (up to two decimals) -> drops per 10000
permyriad() {
	[[ "$1" =~ ^[0-9]+(\.[0-9]{1,2})?$ ]] || die "bad percentage '$1' (want e.g. 1, 0.5, 2.25)"
	awk -v p="$1" 'BEGIN { if (p > 100) exit 1; printf "%d\n", p * 100 + 0.5 }' || die "percentage must be <= 100"
}

check_ports() {
	[ -z "$1" ] && return 0
	if ! [[ "$1" =~ ^([0-9]+)-([0-9]+)$ ]] || [ "${BASH_REMATCH[1]}" -gt "${BASH_REMATCH[2]}" ] ||
		[ "${BASH_REMATCH[2]}" -gt 65535 ]; then
		die "bad port range '$1' (want LO-HI)"
	fi
}

# set_loss PCT: rules on every host's input hook (UDP counted, then dropped at random).
set_loss() {
	local pm i ns
	pm="$(permyriad "$1")"
	local -a rnd=(numgen random mod 10000 '<' "$pm") # nft words: that share at random
	[ "$pm" -lt 10000 ] || rnd=()
	check_ports "$TCP_PORTS"
	for i in $(seq 0 $((N - 1))); do
		ns="$(host_ns "$i")"
		nsx "$ns" nft delete table inet "$NFT" 2>/dev/null || true
		nsx "$ns" nft add table inet "$NFT"
		nsx "$ns" nft "add chain inet $NFT in { type filter hook input priority 0; policy accept; }"
		nsx "$ns" nft add rule inet "$NFT" in iifname h0 meta l4proto udp counter comment '"udp_in"'
		[ "$pm" -gt 0 ] || continue
		nsx "$ns" nft add rule inet "$NFT" in iifname h0 meta l4proto udp \
			"${rnd[@]}" counter drop comment '"udp_drop"'
		if [ -n "$TCP_PORTS" ]; then
			nsx "$ns" nft add rule inet "$NFT" in iifname h0 tcp dport "$TCP_PORTS" \
				"${rnd[@]}" counter drop comment '"tcp_drop"'
			nsx "$ns" nft add rule inet "$NFT" in iifname h0 tcp sport "$TCP_PORTS" \
				"${rnd[@]}" counter drop comment '"tcp_drop"'
		fi
	done
}

up() {
	N="${1:-}"
	[[ "$N" =~ ^[2-8]$ ]] || die "up: N must be 2..8"
	shift
	LINKS=4 MTU=1500 RATE="" BUF="" OFFLOADS="" TCP_PORTS="" TOPO=ecmp RX=all
	local loss=0 i k
	while [ "$#" -gt 0 ]; do
		[ "$#" -ge 2 ] || die "up: $1 needs a value"
		case "$1" in
		--links) LINKS="$2" ;;
		--mtu) MTU="$2" ;;
		--rate) RATE="$2" ;;
		--buf) BUF="$2" ;;
		--loss) loss="$2" ;;
		--tcp-ports) TCP_PORTS="$2" ;;
		--offloads) OFFLOADS="$2" ;;
		--topo) TOPO="$2" ;;
		--rx) RX="$2" ;;
		*) die "up: unknown option $1" ;;
		esac
		shift 2
	done
	[[ "$TOPO" =~ ^(ecmp|incast)$ ]] || die "--topo ecmp or incast"
	# incast: a bottleneck by default, with a shallow buffer (experiments/testbed.sh's 64 KiB)
	if [ "$TOPO" = incast ]; then
		: "${RATE:=500mbit}" "${BUF:=65536}"
		if [ "$RX" != all ]; then
			[[ "$RX" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--rx all or a comma list of host indices"
			for i in ${RX//,/ }; do [ "$i" -lt "$N" ] || die "--rx: no host $i of $N"; done
		fi
	else
		[ "$RX" = all ] || die "--rx needs --topo incast"
	fi
	: "${RATE:=none}" "${BUF:=262144}"
	[[ "$LINKS" =~ ^[2-8]$ ]] || die "--links must be 2..8"
	if ! { [[ "$MTU" =~ ^[0-9]+$ ]] && [ "$MTU" -ge 1280 ] && [ "$MTU" -le 9000 ]; }; then die "--mtu must be 1280..9000"; fi
	[[ "$BUF" =~ ^[0-9]+$ ]] || die "--buf must be bytes"
	[[ "$RATE" = none || "$RATE" =~ ^[0-9]+(\.[0-9]+)?[kmg]bit$ ]] || die "--rate like 1gbit, 200mbit"
	permyriad "$loss" >/dev/null
	check_ports "$TCP_PORTS"
	if [ -z "$OFFLOADS" ]; then
		OFFLOADS=on
		if [ "$RATE" != none ] || [ "$(permyriad "$loss")" -gt 0 ]; then OFFLOADS=off; fi
	fi
	[[ "$OFFLOADS" =~ ^(on|off)$ ]] || die "--offloads on|off"

	down
	trap 'echo "hosts.sh: up failed, tearing down" >&2; down' ERR
	trap 'down; exit 130' INT
	trap 'down; exit 143' TERM
	if [ "$TOPO" = incast ]; then
		up_incast
	else
		up_ecmp
	fi
	for i in $(seq 0 $((N - 1))); do
		mkdir -p "/etc/netns/$(host_ns "$i")"
		{
			echo "127.0.0.1 localhost"
			for k in $(seq 0 $((N - 1))); do echo "$(host_addr "$k") $(host_ns "$k")"; done
		} >"/etc/netns/$(host_ns "$i")/hosts"
	done
	save_state
	set_loss "$loss"
	wait_links
	check
	trap - ERR INT TERM
	if [ "$TOPO" = incast ]; then
		echo "hosts up: prefix=$P hosts=$N topo=incast downlinks($RX)=$RATE buf=$BUF mtu=$MTU offloads=$OFFLOADS loss=$loss%${TCP_PORTS:+ tcp-ports=$TCP_PORTS}"
	else
		echo "hosts up: prefix=$P hosts=$N links=$LINKS mtu=$MTU rate=$RATE offloads=$OFFLOADS loss=$loss%${TCP_PORTS:+ tcp-ports=$TCP_PORTS}"
	fi
}

# The hosts behind one switch; the switch's port to each host of RX shaped (the bottleneck).
up_incast() {
	local i ns addr
	mkns "$SW"
	mkdir -p /etc/netns
	for i in $(seq 0 $((N - 1))); do
		ns="$(host_ns "$i")" addr="$(host_addr "$i")"
		mkns "$ns"
		veth "$ns" h0 "$addr/24" "$SW" "rh$i" "198.18.$((i + 1)).1/24"
		nsx "$ns" ip route add default via "198.18.$((i + 1)).1"
		if [ "$RX" = all ] || [[ ",$RX," == *",$i,"* ]]; then shape "$SW" "rh$i" "$RATE"; fi
	done
	router "$SW"
}

up_ecmp() {
	local i k ns r nh1 nh2 addr
	mkns "$R1"
	mkns "$R2"
	nh1="" nh2=""
	for k in $(seq 0 $((LINKS - 1))); do
		veth "$R1" "l$k" "198.19.$((k + 1)).1/24" "$R2" "l$k" "198.19.$((k + 1)).2/24"
		nh1="$nh1 nexthop via 198.19.$((k + 1)).2 dev l$k weight 1"
		nh2="$nh2 nexthop via 198.19.$((k + 1)).1 dev l$k weight 1"
		shape "$R1" "l$k" "$RATE"
		shape "$R2" "l$k" "$RATE"
	done
	mkdir -p /etc/netns
	for i in $(seq 0 $((N - 1))); do
		ns="$(host_ns "$i")" r="$(host_router "$i")" addr="$(host_addr "$i")"
		mkns "$ns"
		veth "$ns" h0 "$addr/24" "$r" "rh$i" "198.18.$((i + 1)).1/24"
		nsx "$ns" ip route add default via "198.18.$((i + 1)).1"
		# A host on the other router is reached over the K links (multipath).
		# shellcheck disable=SC2086 # $nh1/$nh2 are several words on purpose
		if [ "$r" = "$R1" ]; then
			nsx "$R2" ip route replace "198.18.$((i + 1)).0/24" $nh2
		else
			nsx "$R1" ip route replace "198.18.$((i + 1)).0/24" $nh1
		fi
	done
	router "$R1"
	router "$R2"
}

# Every link end up before anyone uses it (bounded wait).
wait_links() {
	local ns dev k
	for ns in $(all_ns); do
		for dev in $(nsx "$ns" ls /sys/class/net); do
			[ "$dev" = lo ] && continue
			for k in $(seq 1 50); do
				[ "$(nsx "$ns" cat "/sys/class/net/$dev/operstate")" = up ] && break
				[ "$k" -lt 50 ] || die "$ns $dev not up after 5 s"
				sleep 0.1
			done
		done
	done
}

check() {
	load_state
	local i a
	for i in $(seq 1 $((N - 1))); do
		a="$(host_addr "$i")"
		nsx "$(host_ns 0)" ping -q -c 1 -W 2 -M "do" -s $((MTU - 28)) "$a" >/dev/null ||
			nsx "$(host_ns 0)" ping -q -c 3 -W 2 -M "do" -s $((MTU - 28)) "$a" >/dev/null ||
			die "check: a $((MTU - 28)) B DF ping from h0 to h$i ($a) failed"
	done
	echo "check: $((MTU - 28)) B DF pings from h0 reach every host (MTU $MTU)"
}

host_index() {
	load_state
	if ! { [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -lt "$N" ]; }; then die "host index must be 0..$((N - 1))"; fi
}

# path I J SPORT [DPORT] [PROTO]: the link the first router on the way from I to J picks.
path() {
	local i="${1:?I}" j="${2:?J}" sport="${3:?SPORT}" dport="${4:-4791}" proto="${5:-udp}" r out
	host_index "$i"
	host_index "$j"
	[ "$TOPO" = ecmp ] || die "path: the incast topology has no ECMP links"
	r="$(host_router "$i")"
	[ "$r" != "$(host_router "$j")" ] || die "h$i and h$j hang off the same router: no ECMP link between them"
	out="$(nsx "$r" ip route get "$(host_addr "$j")" from "$(host_addr "$i")" iif "rh$i" \
		ipproto "$proto" sport "$sport" dport "$dport")"
	echo "$out" | grep -o 'dev l[0-9]*' | awk '{print $2}'
}

counters() {
	load_state
	local k a b i ns json=0 f1=r1_to_r2 f2=r2_to_r1
	[ "${1:-}" = --json ] && json=1
	local -a rows=()
	if [ "$TOPO" = incast ]; then
		# the switch's port to each host: packets it sent to the host, and received from it
		f1=to_host f2=from_host
		for i in $(seq 0 $((N - 1))); do
			a="$(nsx "$SW" cat "/sys/class/net/rh$i/statistics/tx_packets")"
			b="$(nsx "$SW" cat "/sys/class/net/rh$i/statistics/rx_packets")"
			rows+=("h$i $a $b")
		done
	else
		for k in $(seq 0 $((LINKS - 1))); do
			a="$(nsx "$R1" cat "/sys/class/net/l$k/statistics/tx_packets")"
			b="$(nsx "$R2" cat "/sys/class/net/l$k/statistics/tx_packets")"
			rows+=("l$k $a $b")
		done
	fi
	if [ "$json" = 1 ]; then
		printf '%s\n' "${rows[@]}" | awk -v f1="$f1" -v f2="$f2" 'BEGIN { printf "{" }
			{ printf "%s\"%s\": {\"%s\": %d, \"%s\": %d}", (NR > 1 ? ", " : ""), $1, f1, $2, f2, $3 }
			END { print "}" }'
		return
	fi
	if [ "$TOPO" = incast ]; then echo "port packets_to_host packets_from_host"; else echo "link packets_r1_to_r2 packets_r2_to_r1"; fi
	printf '%s\n' "${rows[@]}"
	for i in $(seq 0 $((N - 1))); do
		ns="$(host_ns "$i")"
		nsx "$ns" nft list chain inet "$NFT" in 2>/dev/null | awk -v h="h$i" '
			/comment "udp_in"/   { for (f = 1; f < NF; f++) if ($f == "packets") rx = $(f + 1) }
			/comment "udp_drop"/ { for (f = 1; f < NF; f++) if ($f == "packets") dr = $(f + 1) }
			/comment "tcp_drop"/ { for (f = 1; f < NF; f++) if ($f == "packets") td += $(f + 1) }
			END { printf "%s udp_in=%d udp_dropped=%d tcp_dropped=%d\n", h, rx, dr, td }'
	done
}

# qdisc [--json]: the TBF of every shaped port or link: packets sent, dropped, overlimits.
qdisc() {
	load_state
	local ns dev json=0
	[ "${1:-}" = --json ] && json=1
	local -a pairs=()
	if [ "$TOPO" = incast ]; then
		for dev in $(nsx "$SW" ls /sys/class/net); do [[ "$dev" == rh* ]] && pairs+=("$SW $dev"); done
	else
		for ns in "$R1" "$R2"; do
			for dev in $(nsx "$ns" ls /sys/class/net); do [[ "$dev" == l* ]] && pairs+=("$ns $dev"); done
		done
	fi
	for ns in "${pairs[@]}"; do
		read -r ns dev <<<"$ns"
		nsx "$ns" tc -s qdisc show dev "$dev" | awk -v n="${ns#"$P"}" -v d="$dev" '
			/^qdisc tbf/ { tbf = 1 } /^qdisc/ && !/tbf/ { tbf = 0 }
			tbf && /Sent/ { for (f = 1; f < NF; f++) { if ($f == "pkt") s = $(f - 1)
				if ($f == "(dropped") { x = $(f + 1); sub(",", "", x) } if ($f == "overlimits") o = $(f + 1) }
				printf "%s %s %d %d %d\n", n, d, s, x, o }'
	done | if [ "$json" = 1 ]; then
		awk 'BEGIN { printf "{" } { printf "%s\"%s/%s\": {\"sent\": %d, \"dropped\": %d, \"overlimits\": %d}", (NR > 1 ? ", " : ""), $1, $2, $3, $4, $5 } END { print "}" }'
	else
		awk 'BEGIN { print "where port sent dropped overlimits" } { print }'
	fi
}

drops() {
	load_state
	local i
	for i in $(seq 0 $((N - 1))); do
		nsx "$(host_ns "$i")" nft list chain inet "$NFT" in 2>/dev/null || true
	done | awk '
		/comment "udp_in"/   { for (f = 1; f < NF; f++) if ($f == "packets") rx += $(f + 1) }
		/comment "udp_drop"/ { for (f = 1; f < NF; f++) if ($f == "packets") dr += $(f + 1) }
		/comment "tcp_drop"/ { for (f = 1; f < NF; f++) if ($f == "packets") td += $(f + 1) }
		END { printf "%d %d %d\n", rx, dr, td }'
}

loss() {
	load_state
	local pct="${1:?PCT}"
	shift
	if [ "${1:-}" = --tcp-ports ]; then
		TCP_PORTS="${2:?LO-HI}"
		check_ports "$TCP_PORTS"
		save_state
	fi
	set_loss "$pct"
	echo "loss: $pct% of UDP${TCP_PORTS:+ and TCP ports $TCP_PORTS} into every host"
}

link_index() {
	if ! { [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -lt "$LINKS" ]; }; then die "link must be 0..$((LINKS - 1))"; fi
}

# bad_drop LINK PCT: forward-hook drops on both routers, for packets leaving on l<LINK>.
bad_drop() {
	local k="$1" pm r
	pm="$(permyriad "$2")"
	local -a rnd=(numgen random mod 10000 '<' "$pm") # nft words: that share at random
	[ "$pm" -lt 10000 ] || rnd=()
	for r in "$R1" "$R2"; do
		nsx "$r" nft delete table inet "bad$k" 2>/dev/null || true
		[ "$pm" -gt 0 ] || continue
		nsx "$r" nft add table inet "bad$k"
		nsx "$r" nft "add chain inet bad$k fw { type filter hook forward priority 0; policy accept; }"
		nsx "$r" nft add rule inet "bad$k" fw oifname "l$k" meta l4proto udp \
			"${rnd[@]}" counter drop
		if [ -n "$TCP_PORTS" ]; then
			nsx "$r" nft add rule inet "bad$k" fw oifname "l$k" tcp dport "$TCP_PORTS" \
				"${rnd[@]}" counter drop
			nsx "$r" nft add rule inet "bad$k" fw oifname "l$k" tcp sport "$TCP_PORTS" \
				"${rnd[@]}" counter drop
		fi
	done
}

bad() {
	load_state
	local what="${1:?drop|slow|flap|clear|counts}" k r
	[ "$TOPO" = ecmp ] || die "bad: the incast topology has no ECMP links"
	case "$what" in
	counts)
		for k in $(seq 0 $((LINKS - 1))); do
			for r in "$R1" "$R2"; do nsx "$r" nft list table inet "bad$k" 2>/dev/null || true; done |
				awk -v l="l$k" '/drop/ { for (f = 1; f < NF; f++) if ($f == "packets") d += $(f + 1) }
					END { printf "%s %d\n", l, d }'
		done
		;;
	drop)
		link_index "${2:?LINK}"
		bad_drop "$2" "${3:?PCT}"
		echo "bad: link $2 drops $3% of UDP${TCP_PORTS:+ and TCP ports $TCP_PORTS} both ways"
		;;
	slow)
		link_index "${2:?LINK}"
		local f="${3:?FACTOR}" num unit rate
		[[ "$f" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "FACTOR must be a number"
		[ "$RATE" != none ] || die "bad slow needs a rate: hosts.sh up N --rate RATE"
		num="${RATE%%[a-z]*}" unit="${RATE#"$num"}"
		# In kbit, so that fractions survive (tc takes integers best).
		case "$unit" in kbit) ;; mbit) num="$(awk -v n="$num" 'BEGIN { print n * 1000 }')" ;;
		gbit) num="$(awk -v n="$num" 'BEGIN { print n * 1000000 }')" ;; esac
		rate="$(awk -v n="$num" -v f="$f" 'BEGIN { printf "%d", n / f }')kbit"
		shape "$R1" "l$2" "$rate"
		shape "$R2" "l$2" "$rate"
		echo "bad: link $2 at $rate ($RATE / $f) both ways"
		;;
	flap)
		link_index "${2:?LINK}"
		local d="${3:?DOWN_S}" u="${4:?UP_S}" c="${5:?COUNT}" how="${6:-down}" pidf="$STATE_DIR/${P}flap-$2.pid"
		[[ "$how" =~ ^(down|blackhole)$ ]] || die "flap: down or blackhole"
		[[ "$d" =~ ^[0-9]+(\.[0-9]+)?$ && "$u" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "DOWN_S UP_S in seconds"
		if ! { [[ "$c" =~ ^[0-9]+$ ]] && [ "$c" -ge 1 ] && [ "$c" -le 10000 ]; }; then die "COUNT must be 1..10000"; fi
		if [ -e "$pidf" ] && is_flapper "$(cat "$pidf")"; then die "link $2 already flaps (bad clear)"; fi
		setsid bash "$0" _flap "$P" "$2" "$d" "$u" "$c" "$how" </dev/null >/dev/null 2>&1 &
		echo $! >"$pidf"
		echo "bad: link $2 flaps ($how $d s, up $u s) x $c, pid $!"
		;;
	clear)
		stop_flappers
		for k in $(seq 0 $((LINKS - 1))); do
			for r in "$R1" "$R2"; do
				nsx "$r" nft delete table inet "bad$k" 2>/dev/null || true
				nsx "$r" ip link set "l$k" up
				shape "$r" "l$k" "$RATE"
			done
		done
		wait_links
		echo "bad: cleared"
		;;
	*) die "bad: drop, slow, flap, clear or counts" ;;
	esac
}

status() {
	local ns
	[ -f "$STATE" ] && sed 's/^/# /' "$STATE" | tr '\n' ' ' && echo
	for ns in $(all_ns); do
		echo "== $ns"
		ip -n "$ns" -br addr | grep -v '^lo '
		ip -n "$ns" -o link | awk '$2 != "lo:" { for (f = 1; f < NF; f++) if ($f == "mtu") printf "  %s mtu %s\n", $2, $(f + 1) }'
		nsx "$ns" tc qdisc show | grep tbf | sed 's/^/  /' || true
		nsx "$ns" nft list ruleset 2>/dev/null | grep -E 'drop' | sed 's/^\s*/  /' || true
	done
	[ -n "$(all_ns)" ]
}

need_root() {
	[ "$(id -u)" -eq 0 ] || die "needs root"
	local c
	for c in ip tc nft ethtool unshare ping; do command -v "$c" >/dev/null || die "missing $c"; done
}

cmd="${1:-}"
shift || true
case "$cmd" in
up | down)
	need_root
	mkdir -p "$(dirname "$LOCK")"
	exec 9>"$LOCK"
	flock -w 120 9 || die "another hosts.sh up/down with prefix $P holds $LOCK"
	if [ "$cmd" = up ]; then up "$@"; else down; fi
	;;
status) status ;;
check) check ;;
addr)
	host_index "${1:?I}"
	host_addr "$1"
	;;
ns)
	host_index "${1:?I}"
	host_ns "$1"
	;;
exec)
	host_index "${1:?I}"
	i="$1"
	shift
	[ "$#" -gt 0 ] || die "exec: no command"
	# Own UTS namespace: every host has its own hostname, as MPI expects of distinct nodes.
	# shellcheck disable=SC2016 # $0 and $@ are the inner shell's
	exec ip netns exec "$(host_ns "$i")" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$(host_ns "$i")" "$@"
	;;
path) path "$@" ;;
get)
	load_state
	[[ "${1:-}" =~ ^(N|LINKS|MTU|RATE|BUF|OFFLOADS|TCP_PORTS|TOPO|RX)$ ]] || die "get: N LINKS MTU RATE BUF OFFLOADS TCP_PORTS TOPO or RX"
	echo "${!1}"
	;;
_flap) # _flap PREFIX LINK DOWN_S UP_S COUNT HOW (started by bad flap; PREFIX marks it as ours)
	shift
	load_state
	trap 'rm -f "$STATE_DIR/${P}flap-$1.pid"' EXIT
	for _ in $(seq 1 "$4"); do
		# R1's end down takes the carrier of R2's end too: both routers route around it.
		if [ "$5" = down ]; then ip -n "$R1" link set "l$1" down; else bad_drop "$1" 100; fi
		sleep "$2"
		if [ "$5" = down ]; then ip -n "$R1" link set "l$1" up; else bad_drop "$1" 0; fi
		sleep "$3"
	done
	;;
counters) counters "$@" ;;
qdisc) qdisc "$@" ;;
drops) drops ;;
loss) loss "$@" ;;
bad) bad "$@" ;;
*)
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
	[ -z "$cmd" ] || exit 2
	;;
esac
