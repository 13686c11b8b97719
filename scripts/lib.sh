# shellcheck shell=bash disable=SC2034 # variables are for the scripts that source this
# lib.sh: helpers shared by the spray scripts (sourced, never executed).
#
# Everything here is parameterised by provider name so the same tooling runs
# against spray and against libfabric's own providers (tcp, udp, "udp;ofi_rxd").

# Repository root (the directory holding Cargo.toml), independent of the caller's cwd.
SPRAY_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SPRAY_ROOT

# Directory that holds libspray-fi.so (usable as FI_PROVIDER_PATH).
SPRAY_PROVIDER_DIR="${SPRAY_PROVIDER_DIR:-$SPRAY_ROOT/build}"
export SPRAY_PROVIDER_DIR

# Namespace testbed names and addresses (see scripts/netns.sh).
SPRAY_NS_A="spray-a"
SPRAY_NS_B="spray-b"
SPRAY_VETH_A="spray-va"
SPRAY_VETH_B="spray-vb"
SPRAY_ADDR_A="198.18.0.1"
SPRAY_ADDR_B="198.18.0.2"
SPRAY_PREFIX_LEN=24
# Lock that serialises every user of the shared namespaces.
SPRAY_NETNS_LOCK="${SPRAY_NETNS_LOCK:-/run/lock/spray-netns.lock}"

log() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

need_root() {
	[ "$(id -u)" -eq 0 ] || die "must run as root (namespaces, nftables, apt)"
}

need_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || die "missing command: $c (run scripts/setup.sh)"
	done
}

# Puts cargo on PATH if it lives in ~/.cargo/bin (rustup) but PATH lacks it.
find_cargo() {
	if ! command -v cargo >/dev/null 2>&1 && [ -x "${HOME:-/root}/.cargo/bin/cargo" ]; then
		PATH="${HOME:-/root}/.cargo/bin:$PATH"
		export PATH
	fi
	command -v cargo >/dev/null 2>&1
}

# Sets FI_PROVIDER / FI_PROVIDER_PATH for provider $1 in the current shell.
# An external provider (a lib<name>-fi.so in SPRAY_PROVIDER_DIR) gets the
# path; a layered name ("udp;ofi_rxd") is left to the -p hint alone.
provider_env() {
	local prov="$1"
	unset FI_PROVIDER FI_PROVIDER_PATH
	if [ -f "$SPRAY_PROVIDER_DIR/lib${prov}-fi.so" ]; then
		export FI_PROVIDER_PATH="$SPRAY_PROVIDER_DIR"
	fi
	case "$prov" in
	*\;*) ;;
	*) export FI_PROVIDER="$prov" ;;
	esac
}

# True if provider $1 offers endpoint type $2 (rdm|dgram|msg) to fi_info.
provider_has_ep() {
	local prov="$1" ep="$2" t
	case "$ep" in
	rdm) t=FI_EP_RDM ;;
	dgram) t=FI_EP_DGRAM ;;
	msg) t=FI_EP_MSG ;;
	*) return 2 ;;
	esac
	(provider_env "$prov" && timeout 20 fi_info -p "$prov" -t "$t" >/dev/null 2>&1)
}

# Converts fi_pingpong's human size ("1.5k", "64k", "6m", "12") to bytes.
# Exact for every size fi_pingpong's -S all and default lists print.
human_to_bytes() {
	awk -v s="$1" 'BEGIN {
		m = 1; u = substr(s, length(s), 1)
		if (u == "k") m = 1024; else if (u == "m") m = 1048576; else if (u == "g") m = 1073741824
		if (m > 1) s = substr(s, 1, length(s) - 1)
		printf "%d\n", s * m + 0.5
	}'
}

# Median of the numbers given as arguments ("n/a" if none).
median() {
	if [ "$#" -eq 0 ]; then
		echo "n/a"
		return
	fi
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
		if (NR % 2) printf "%.2f\n", v[(NR + 1) / 2]
		else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2
	}'
}

# Prints the calling script's header comment (its usage text).
usage() {
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}
