# faultlib.sh - what faults.sh and faultbench.sh share: the fault knobs' defaults, the
# scripts/hosts.sh testbed of each fault, and how the fault is applied to it.
# Source it after lib.sh (it uses HOSTS_SH); it defines variables and functions only.
# shellcheck shell=bash disable=SC2034 # the knobs are read by the sourcing script

FAULT_LOSS=${FAULT_LOSS:-1} FAULT_LINK=${FAULT_LINK:-1} FAULT_MTU=${FAULT_MTU:-1500}
FAULT_TCP_PORTS=${FAULT_TCP_PORTS:-30000-30999}
FLAP_DOWN_S=${FLAP_DOWN_S:-2} FLAP_UP_S=${FLAP_UP_S:-2} FLAP_MODE=${FLAP_MODE:-down}
SLOW_RATE=${SLOW_RATE:-1gbit} SLOW_FACTOR=${SLOW_FACTOR:-10}
INCAST_RATE=${INCAST_RATE:-500mbit} INCAST_BUF=${INCAST_BUF:-65536}

# up_args FAULT -> the hosts.sh up options of its testbed (tcp's listening ports in the
# range the loss and bad-link rules cover, so that they hit tcp's data as they hit spray's)
up_args() {
    local a="--mtu $FAULT_MTU ${FAULT_UP_ARGS:-}"
    case $1 in
    none | blackhole | flap) a+=" --tcp-ports $FAULT_TCP_PORTS" ;;
    loss) a+=" --tcp-ports $FAULT_TCP_PORTS --loss $FAULT_LOSS" ;;
    slow) a+=" --tcp-ports $FAULT_TCP_PORTS --rate $SLOW_RATE" ;;
    incast) a+=" --topo incast --rate $INCAST_RATE --buf $INCAST_BUF" ;;
    esac
    echo "$a"
}

# inject FAULT [FLAP_CYCLES] -> applies the fault to the testbed that is up (prints what
# hosts.sh said); a flapping link goes down and up FLAP_CYCLES times (default 10000) unless
# `hosts.sh bad clear` or `down` stops it earlier
inject() {
    case $1 in
    blackhole) bash "$HOSTS_SH" bad drop "$FAULT_LINK" 100 ;;
    flap) bash "$HOSTS_SH" bad flap "$FAULT_LINK" "$FLAP_DOWN_S" "$FLAP_UP_S" "${2:-10000}" "$FLAP_MODE" ;;
    slow) bash "$HOSTS_SH" bad slow "$FAULT_LINK" "$SLOW_FACTOR" ;;
    *) echo "no fault injected" ;;
    esac
}
