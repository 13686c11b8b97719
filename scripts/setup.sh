#!/usr/bin/env bash
# setup.sh: prepares a fresh Debian 12 machine (as root) to build, test and demo spray.
#
# Idempotent: installs only missing Debian packages (one `apt-get update` when
# something is missing), finds or installs cargo, builds the release provider
# and installs it into build/ (FI_PROVIDER_PATH) via scripts/install.sh.
#
# Usage: scripts/setup.sh [--no-build] [--system]
#   --no-build  only install packages and the toolchain
#   --system    also install the provider into libfabric's provider directory
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

build=1
install_args=()
while [ "$#" -gt 0 ]; do
	case "$1" in
	--no-build) build=0 ;;
	--system) install_args+=(--system) ;;
	-h | --help)
		usage
		exit 0
		;;
	*) die "unknown option: $1" ;;
	esac
	shift
done

need_root
mkdir -p "$SPRAY_ROOT/build"
setup_log="$SPRAY_ROOT/build/setup.log"
: >"$setup_log"

packages=(
	build-essential pkg-config libfabric-dev libfabric-bin libclang-dev clang
	iproute2 nftables iptables ethtool python3 python3-venv python3-pip procps util-linux shellcheck
)

# Packages that dpkg does not report as installed.
missing_packages() {
	local p
	for p in "$@"; do
		if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
			printf '%s\n' "$p"
		fi
	done
}

apt_updated=0
apt_install() {
	export DEBIAN_FRONTEND=noninteractive
	if [ "$apt_updated" -eq 0 ]; then
		apt-get update -q >>"$setup_log" 2>&1 || die "apt-get update failed (see $setup_log)"
		apt_updated=1
	fi
	apt-get install -y -q --no-install-recommends "$@" >>"$setup_log" 2>&1 ||
		die "apt-get install $* failed (see $setup_log)"
}

mapfile -t todo < <(missing_packages "${packages[@]}")
if [ "${#todo[@]}" -gt 0 ]; then
	log "installing ${#todo[@]} package(s): ${todo[*]}"
	apt_install "${todo[@]}"
fi

cargo_note=""
if ! find_cargo; then
	log "no cargo found: installing Debian's cargo"
	apt_install cargo rustc
	find_cargo || die "cargo still not on PATH after installing it"
	cargo_note=" (Debian cargo: if the build fails, an up-to-date Rust toolchain (rustup, >= 1.75) is required)"
fi
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
	if command -v rustup >/dev/null 2>&1; then
		rustup component add rustfmt clippy >>"$setup_log" 2>&1 || true
	else
		apt_install rustfmt rust-clippy || true
	fi
fi

built="not built"
if [ "$build" -eq 1 ]; then
	log "building the provider (cargo build --release; log: $setup_log)"
	if ! (cd "$SPRAY_ROOT" && cargo build --release) >>"$setup_log" 2>&1; then
		tail -n 30 "$setup_log" >&2
		die "cargo build --release failed${cargo_note}"
	fi
	bash "$SPRAY_ROOT/scripts/install.sh" "${install_args[@]}" >>"$setup_log" 2>&1 ||
		die "scripts/install.sh failed (see $setup_log)"
	built="provider in $SPRAY_PROVIDER_DIR/libspray-fi.so"
fi

echo "setup: packages ok (${#todo[@]} installed), $(cargo --version 2>/dev/null | cut -d' ' -f1-2)${cargo_note}, fi_pingpong $(fi_info --version 2>/dev/null | awk '/^libfabric:/ {print $2}'), ${built}"
