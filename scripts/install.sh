#!/usr/bin/env bash
# install.sh: installs the built provider where libfabric can dlopen it.
#
# Copies target/release/libspray_fi.so to build/libspray-fi.so (a directory
# usable as FI_PROVIDER_PATH); with --system also into libfabric's provider
# directory ($(pkg-config --variable=libdir libfabric)/libfabric), so that
# FI_PROVIDER=spray alone selects it.
#
# Usage: scripts/install.sh [--system] [--lib PATH]
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

system=0
lib="${CARGO_TARGET_DIR:-$SPRAY_ROOT/target}/release/libspray_fi.so"
while [ "$#" -gt 0 ]; do
	case "$1" in
	--system) system=1 ;;
	--lib)
		[ "$#" -ge 2 ] || die "--lib needs a path"
		lib="$2"
		shift
		;;
	-h | --help)
		usage
		exit 0
		;;
	*) die "unknown option: $1" ;;
	esac
	shift
done

[ -f "$lib" ] || die "$lib not found: run 'cargo build --release' first"

mkdir -p "$SPRAY_PROVIDER_DIR"
# Copy to a temporary name and rename: a running process that has the old
# library mapped keeps its (unlinked) copy intact.
install -m 0755 "$lib" "$SPRAY_PROVIDER_DIR/.libspray-fi.so.tmp"
mv -f "$SPRAY_PROVIDER_DIR/.libspray-fi.so.tmp" "$SPRAY_PROVIDER_DIR/libspray-fi.so"
echo "installed $SPRAY_PROVIDER_DIR/libspray-fi.so (use FI_PROVIDER_PATH=$SPRAY_PROVIDER_DIR FI_PROVIDER=spray)"

if [ "$system" -eq 1 ]; then
	need_root
	libdir="$(pkg-config --variable=libdir libfabric 2>/dev/null || true)"
	[ -n "$libdir" ] || die "pkg-config cannot find libfabric (apt-get install libfabric-dev)"
	provdir="$libdir/libfabric"
	mkdir -p "$provdir"
	install -m 0755 "$lib" "$provdir/.libspray-fi.so.tmp"
	mv -f "$provdir/.libspray-fi.so.tmp" "$provdir/libspray-fi.so"
	echo "installed $provdir/libspray-fi.so (FI_PROVIDER=spray selects it)"
fi
