#!/usr/bin/env bash
# fabtests.sh: build libfabric's fabtests v1.17 from a local source tree and run
# its test sets against spray and against tcp;ofi_rxm, then print a table.
#
#   scripts/fabtests.sh SRC_DIR [--sets unit,functional,short,standard]
#                       [--prov "spray,tcp;ofi_rxm"] [--build DIR] [--out DIR]
#                       [--timeout SECONDS] [--set-limit SECONDS] [--no-build]
#                       [--no-run --out DIR]
#
# SRC_DIR: a libfabric 1.17 source tree (holding fabtests/) or a fabtests tree,
# for instance from `apt-get source libfabric` (needs a deb-src line) or a
# libfabric-1.17.0 release tarball. This script never downloads anything; keep
# the tree outside the repository. fabtests is built against the installed
# libfabric (Debian's libfabric-dev 1.17) into --build (default
# SRC_DIR/spray-fabtests-build), with autoconf, automake and libtool.
#
# Each provider and set runs fabtests' own scripts/runfabtests.sh on loopback
# (127.0.0.1) inside a private PID namespace (unshare --pid --fork
# --mount-proc, so runfabtests' cleanup, which kills every fi_* process it can
# see, sees only ours), bounded by --set-limit (default 2400 s); the namespace
# ends with a kill of every fi_* process left in it. spray runs with
# FI_SPRAY_IFACE=lo (the tests name 127.0.0.1; tests without an address then
# stay on loopback too). Each test is bounded by
# --timeout (default 120 s, runfabtests' own). spray is a copy of
# target/release/libspray_fi.so taken at the start (cargo build --release first).
#
# Output: one log per provider and set in --out (default a new
# /tmp/spray-fabtests.XXXXXX), a table pass / notrun / fail per set and
# provider (Excluded counts as notrun: tcp;ofi_rxm skips the tests its
# exclude file in fabtests' test_configs/ofi_rxm names), every failure, and the
# tests spray fails that the second provider passes. Exit status 0 when there
# is no such test, 1 otherwise. --no-run prints the table of the logs an
# earlier run left in --out (nothing is built or run).
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
	exit 2
}

SRC=""
SETS="unit,functional,short,standard"
PROVS="spray,tcp;ofi_rxm"
BUILD=""
OUT=""
TEST_TIMEOUT=120
SET_LIMIT=2400
DO_BUILD=1
DO_RUN=1
while [ $# -gt 0 ]; do
	case "$1" in
	--sets) SETS="$2"; shift 2 ;;
	--prov) PROVS="$2"; shift 2 ;;
	--build) BUILD="$2"; shift 2 ;;
	--out) OUT="$2"; shift 2 ;;
	--timeout) TEST_TIMEOUT="$2"; shift 2 ;;
	--set-limit) SET_LIMIT="$2"; shift 2 ;;
	--no-build) DO_BUILD=0; shift ;;
	--no-run) DO_RUN=0; DO_BUILD=0; shift ;;
	-h | --help) usage ;;
	-*) die "unknown option $1 (--help)" ;;
	*)
		[ -z "$SRC" ] || die "one source directory only"
		SRC="$1"
		shift
		;;
	esac
done
[ -n "$SRC" ] || usage
[ "$DO_RUN" -eq 1 ] || [ -n "$OUT" ] || die "--no-run needs --out DIR (the logs of an earlier run)"
[ "$DO_RUN" -eq 0 ] || need_root
need_cmd unshare timeout pkg-config python3
SRC="$(cd "$SRC" && pwd)"
if [ -f "$SRC/fabtests/configure.ac" ]; then
	FT_SRC="$SRC/fabtests"
elif [ -f "$SRC/configure.ac" ] && [ -f "$SRC/scripts/runfabtests.sh" ]; then
	FT_SRC="$SRC"
else
	die "$SRC holds no fabtests (neither fabtests/configure.ac nor configure.ac + scripts/runfabtests.sh)"
fi
case "$SRC" in
"$SPRAY_ROOT" | "$SPRAY_ROOT"/*) die "keep the fabtests source outside the repository ($SPRAY_ROOT)" ;;
esac
FT_VERSION="$(sed -n 's/^AC_INIT(\[fabtests\], \[\([^]]*\)\].*/\1/p' "$FT_SRC/configure.ac")"
case "$FT_VERSION" in
1.17.*) ;;
*) die "fabtests $FT_VERSION found; this script runs fabtests 1.17 (the installed libfabric's)" ;;
esac
LF_VERSION="$(pkg-config --modversion libfabric)" || die "pkg-config libfabric failed (apt-get install libfabric-dev)"
BUILD="${BUILD:-$SRC/spray-fabtests-build}"
BIN="$BUILD/install/bin"

# --- build -----------------------------------------------------------------
if [ "$DO_BUILD" -eq 1 ] || { [ "$DO_RUN" -eq 1 ] && [ ! -x "$BIN/runfabtests.sh" ]; }; then
	need_cmd autoreconf automake libtoolize make cc
	mkdir -p "$BUILD/obj"
	log "building fabtests $FT_VERSION against libfabric $LF_VERSION in $BUILD (log: $BUILD/build.log)"
	{
		if [ ! -x "$FT_SRC/configure" ]; then
			(cd "$FT_SRC" && ./autogen.sh)
		fi
		cd "$BUILD/obj"
		if [ ! -f Makefile ]; then
			"$FT_SRC/configure" --prefix="$BUILD/install" --with-libfabric=/usr
		fi
		make -j"$(nproc)"
		make install
	} >"$BUILD/build.log" 2>&1 || die "fabtests build failed: tail $BUILD/build.log"
fi
[ "$DO_RUN" -eq 0 ] || [ -x "$BIN/runfabtests.sh" ] || die "no $BIN/runfabtests.sh after the build"

# --- spray as a provider directory ------------------------------------------
SO="$SPRAY_ROOT/target/release/libspray_fi.so"
PROVDIR="$BUILD/spray-provider"
if [ "$DO_RUN" -eq 1 ] && [[ ",$PROVS," == *",spray,"* ]]; then
	[ -f "$SO" ] || die "$SO missing: cargo build --release first"
	mkdir -p "$PROVDIR"
	# A copy: a rebuild while the sets run does not change what they test.
	rm -f "$PROVDIR/libspray-fi.so"
	cp "$SO" "$PROVDIR/libspray-fi.so"
fi

OUT="${OUT:-$(mktemp -d /tmp/spray-fabtests.XXXXXX)}"
mkdir -p "$OUT"

# One provider and set inside a private PID namespace. The fabtests
# configuration files are looked up relative to the working directory
# (test_configs/<prov>/<prov>.exclude), so runfabtests runs from FT_SRC.
run_set() {
	local prov="$1" set="$2" log="$3"
	local -a envs=(env -u FI_PROVIDER -u FI_PROVIDER_PATH -u FI_LOG_LEVEL)
	if [ "$prov" = spray ]; then
		envs+=(FI_PROVIDER_PATH="$PROVDIR" FI_SPRAY_IFACE=lo)
	fi
	# shellcheck disable=SC2016 # expanded by the inner shell
	timeout --kill-after=10 "$SET_LIMIT" "${envs[@]}" PATH="$BIN:$PATH" \
		unshare --pid --fork --mount-proc bash -c '
			cd "$1" || exit 1
			"$2/runfabtests.sh" -v -T "$3" -t "$4" -p "$2" "$5"
			rc=$?
			# Anything fabtests left behind in this namespace.
			ps -eo comm=,pid= | awk "\$1 ~ /^fi_/ {print \$2}" | xargs -r kill -9 2>/dev/null
			exit $rc' _ "$FT_SRC" "$BIN" "$TEST_TIMEOUT" "$set" "$prov" >"$log" 2>&1 || true
}

IFS=, read -ra SET_LIST <<<"$SETS"
IFS=, read -ra PROV_LIST <<<"$PROVS"
if [ "$DO_RUN" -eq 1 ]; then
	for set in "${SET_LIST[@]}"; do
		for prov in "${PROV_LIST[@]}"; do
			log "running set $set against $prov"
			run_set "$prov" "$set" "$OUT/${prov//;/+}.$set.log"
		done
	done
fi

# --- table ---------------------------------------------------------------
python3 - "$OUT" "$SETS" "$PROVS" <<'EOF'
import re, sys
out, sets, provs = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
name_re = re.compile(r"^- name:\s+(.*)$")
result_re = re.compile(r"^  result:\s+(Pass|Fail|Notrun|Excluded)")
res = {}
for p in provs:
    for s in sets:
        r = {}
        try:
            with open(f"{out}/{p.replace(';', '+')}.{s}.log") as f:
                name = None
                for l in f:
                    m = name_re.match(l)
                    if m:
                        name = re.sub(r' -p "[^"]*"', "", m.group(1)).strip()
                    m = result_re.match(l)
                    if m and name:
                        r[name] = m.group(1)
                        name = None
        except OSError:
            pass
        res[(p, s)] = r
def counts(r):
    v = list(r.values())
    return f"{v.count('Pass')} / {v.count('Notrun') + v.count('Excluded')} / {v.count('Fail')}"
print("\n| set | " + " | ".join(f"{p} pass / notrun / fail" for p in provs) + " |")
print("|---|" + "---|" * len(provs))
for s in sets:
    print(f"| {s} | " + " | ".join(counts(res[(p, s)]) for p in provs) + " |")
bad = 0
for p in provs:
    for s in sets:
        fails = [t for t, v in res[(p, s)].items() if v == "Fail"]
        if not res[(p, s)]:
            print(f"\n{p} {s}: no results (see {out}/{p.replace(';', '+')}.{s}.log)")
        for t in fails:
            print(f"FAIL {p} {s}: {t}")
if len(provs) > 1:
    a, b = provs[0], provs[1]
    print(f"\nTests {a} does not pass that {b} passes:")
    for s in sets:
        for t, v in res[(b, s)].items():
            mine = res[(a, s)].get(t, "missing")
            if v == "Pass" and mine != "Pass":
                bad += 1
                print(f"  {s}: {t}: {a} {mine}")
    if not bad:
        print("  none")
print(f"\nlogs: {out}")
sys.exit(1 if bad else 0)
EOF
