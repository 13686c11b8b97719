#!/usr/bin/env bash
# netns.sh: the two-host namespace testbed (spray-a <-> spray-b over one veth pair).
#
#   spray-a: spray-va 198.18.0.1/24  <== veth ==>  spray-b: spray-vb 198.18.0.2/24
#
# Usage:
#   scripts/netns.sh up [--loss PCT]   create or update (idempotent); PCT in
#                                      percent, up to two decimals (0 = no loss).
#                                      Loss drops incoming UDP at random on the
#                                      veth of BOTH namespaces (nftables numgen).
#   scripts/netns.sh down              delete everything this script creates
#   scripts/netns.sh stats             per namespace: UDP packets in / dropped
#   scripts/netns.sh status            exit 0 if the testbed is up
# Offloads (TSO/GSO/GRO) are off on both veths so a drop rule drops packets,
# not 64 KB super-packets (see TESTBED.md).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NFT_TABLE="spray_loss"

ns_exists() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$1"; }

down() {
	local ns dev
	for ns in "$SPRAY_NS_A" "$SPRAY_NS_B"; do
		if ns_exists "$ns"; then
			local pids
			pids="$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')"
			[ -z "$pids" ] || log "warning: processes still in $ns: $pids (not ours to kill)"
			ip netns del "$ns"
		fi
	done
	# A veth left in the root namespace by an interrupted 'up'.
	for dev in "$SPRAY_VETH_A" "$SPRAY_VETH_B"; do
		if ip link show "$dev" >/dev/null 2>&1; then
			ip link del "$dev" 2>/dev/null || true
		fi
	done
}

# Prints the nft match expression for a random PCT % drop, e.g. "mod 100 < 5".
loss_expr() {
	local pct="$1"
	[[ "$pct" =~ ^[0-9]+(\.[0-9]{1,2})?$ ]] || die "bad --loss '$pct' (want e.g. 1, 0.5, 2.25)"
	awk -v p="$pct" 'BEGIN {
		if (p > 100) { exit 1 }
		if (p == int(p)) printf "mod 100 < %d\n", p
		else if (p * 10 == int(p * 10)) printf "mod 1000 < %d\n", p * 10 + 0.5
		else printf "mod 10000 < %d\n", p * 100 + 0.5
	}' || die "--loss must be <= 100"
}

set_loss() {
	local pct="$1" ns dev expr
	expr=""
	if awk -v p="$pct" 'BEGIN { exit !(p > 0) }'; then
		expr="$(loss_expr "$pct")"
	fi
	for ns in "$SPRAY_NS_A" "$SPRAY_NS_B"; do
		if [ "$ns" = "$SPRAY_NS_A" ]; then dev="$SPRAY_VETH_A"; else dev="$SPRAY_VETH_B"; fi
		if ip netns exec "$ns" nft list table inet "$NFT_TABLE" >/dev/null 2>&1; then
			ip netns exec "$ns" nft delete table inet "$NFT_TABLE"
		fi
		ip netns exec "$ns" nft add table inet "$NFT_TABLE"
		ip netns exec "$ns" nft "add chain inet $NFT_TABLE in { type filter hook input priority 0; policy accept; }"
		# Counts every UDP packet that arrives, so tests can check the drop ratio.
		ip netns exec "$ns" nft add rule inet "$NFT_TABLE" in iifname "$dev" meta l4proto udp counter comment '"udp_in"'
		if [ -n "$expr" ]; then
			# shellcheck disable=SC2086 # $expr is several nft words on purpose
			ip netns exec "$ns" nft add rule inet "$NFT_TABLE" in iifname "$dev" meta l4proto udp \
				numgen random $expr counter drop comment '"udp_drop"'
		fi
	done
}

# Segmentation offloads off, so a veth passes (and a drop rule sees) single
# packets: with tx-udp-segmentation on, a UDP GSO super-packet crosses the veth
# whole and one "drop" loses every segment in it.
offloads_off() {
	local ns="$1" dev="$2"
	ip netns exec "$ns" ethtool -K "$dev" tso off gso off gro off >/dev/null
	ip netns exec "$ns" ethtool -K "$dev" tx-udp-segmentation off >/dev/null 2>&1 || true
}

stats() {
	local ns
	for ns in "$SPRAY_NS_A" "$SPRAY_NS_B"; do
		ns_exists "$ns" || die "$ns does not exist (scripts/netns.sh up)"
		ip netns exec "$ns" nft list chain inet "$NFT_TABLE" in 2>/dev/null | awk -v ns="$ns" '
			/comment "udp_in"/   { for (i = 1; i < NF; i++) if ($i == "packets") rx = $(i + 1) }
			/comment "udp_drop"/ { for (i = 1; i < NF; i++) if ($i == "packets") dr = $(i + 1) }
			END { printf "ns=%s udp_in=%d udp_dropped=%d\n", ns, rx, dr }'
	done
}

up() {
	local loss="0"
	while [ "$#" -gt 0 ]; do
		case "$1" in
		--loss)
			[ "$#" -ge 2 ] || die "--loss needs a percentage"
			loss="$2"
			shift
			;;
		*) die "unknown option for up: $1" ;;
		esac
		shift
	done
	[ "$loss" = "0" ] || loss_expr "$loss" >/dev/null
	need_cmd ip nft ethtool

	# A half-built testbed is worse than none: undo everything on failure or ^C.
	trap 'log "setup failed or interrupted: tearing down"; trap - ERR INT TERM; down; exit 1' ERR INT TERM

	local ns
	for ns in "$SPRAY_NS_A" "$SPRAY_NS_B"; do
		ns_exists "$ns" || ip netns add "$ns"
		ip -n "$ns" link set lo up
	done
	if ! ip -n "$SPRAY_NS_A" link show "$SPRAY_VETH_A" >/dev/null 2>&1 ||
		! ip -n "$SPRAY_NS_B" link show "$SPRAY_VETH_B" >/dev/null 2>&1; then
		ip -n "$SPRAY_NS_A" link del "$SPRAY_VETH_A" 2>/dev/null || true
		ip -n "$SPRAY_NS_B" link del "$SPRAY_VETH_B" 2>/dev/null || true
		ip link del "$SPRAY_VETH_A" 2>/dev/null || true
		ip link add "$SPRAY_VETH_A" netns "$SPRAY_NS_A" type veth peer name "$SPRAY_VETH_B" netns "$SPRAY_NS_B"
	fi
	ip -n "$SPRAY_NS_A" addr replace "$SPRAY_ADDR_A/$SPRAY_PREFIX_LEN" dev "$SPRAY_VETH_A"
	ip -n "$SPRAY_NS_B" addr replace "$SPRAY_ADDR_B/$SPRAY_PREFIX_LEN" dev "$SPRAY_VETH_B"
	ip -n "$SPRAY_NS_A" link set "$SPRAY_VETH_A" up
	ip -n "$SPRAY_NS_B" link set "$SPRAY_VETH_B" up
	offloads_off "$SPRAY_NS_A" "$SPRAY_VETH_A"
	offloads_off "$SPRAY_NS_B" "$SPRAY_VETH_B"
	set_loss "$loss"

	# Both ends must report the link up before anyone uses it (bounded wait).
	local i state_a state_b
	for i in $(seq 1 50); do
		state_a="$(ip netns exec "$SPRAY_NS_A" cat "/sys/class/net/$SPRAY_VETH_A/operstate")"
		state_b="$(ip netns exec "$SPRAY_NS_B" cat "/sys/class/net/$SPRAY_VETH_B/operstate")"
		[ "$state_a" = up ] && [ "$state_b" = up ] && break
		[ "$i" -lt 50 ] || die "veth not up after 5 s ($state_a/$state_b)"
		sleep 0.1
	done
	trap - ERR INT TERM
	echo "netns: $SPRAY_NS_A($SPRAY_ADDR_A) <-> $SPRAY_NS_B($SPRAY_ADDR_B) up, udp loss ${loss}%"
}

status() {
	ns_exists "$SPRAY_NS_A" && ns_exists "$SPRAY_NS_B" &&
		ip -n "$SPRAY_NS_A" link show "$SPRAY_VETH_A" >/dev/null 2>&1
}

need_root
cmd="${1:-}"
[ "$#" -eq 0 ] || shift
case "$cmd" in
up) up "$@" ;;
down)
	down
	echo "netns: down"
	;;
stats) stats ;;
status) status ;;
*)
	usage >&2
	exit 2
	;;
esac
