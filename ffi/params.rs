//! The `FI_SPRAY_*` parameters: defined with `fi_param_define` (listed by
//! `fi_info -e`) and read with `fi_param_get` when an endpoint is configured.

/// Default number of paths (entropy values) per endpoint: enough random
/// source ports that every ECMP next hop of a typical 4–8-way fabric is hit.
pub const DEFAULT_PATHS: i64 = 16;

use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_void};

use crate::prov;
use crate::sys;

/// How a parameter is typed for libfabric.
#[derive(Copy, Clone)]
enum Kind {
    Str,
    Int,
    Size,
}

/// (name, type, help). The environment variable is `FI_SPRAY_<NAME>`.
const PARAMS: &[(&str, Kind, &str)] = &[
    ("iface", Kind::Str, "Comma-separated network interfaces getinfo offers a domain for, in that order (unknown names are skipped); endpoints use the interface's IPv4 address, or its IPv6 address (not link-local) for IPv6 endpoints (default: every UP non-loopback interface with an address of that family, else loopback)"),
    ("rails", Kind::Int, "1: getinfo offers first a domain spanning every interface it offers (FI_SPRAY_IFACE's, loopback left out, at least two), named by their names joined with '+' (e.g. eth0+eth1): its endpoints spray each peer that has rails too over all of them (multi-rail: rail i pairs with the peer's rail i, so list the interfaces in the same order on every host); a domain name 'a+b' in the hints selects such a domain without it (default 0)"),
    ("ipv6", Kind::Int, "1: endpoints use IPv6 (FI_SOCKADDR_IN6) when the application asks for no address format and names no address, as fi_pingpong (whose -6 covers only its control socket); 0 (default): IPv4. FI_SOCKADDR_IN6 hints or an IPv6 node select IPv6 without it"),
    ("port", Kind::Int, "Main UDP port of the first endpoint (0 = ephemeral; later endpoints take the next free port)"),
    ("local_paths", Kind::Int, "Paths to peers on the same host (a loopback address or the endpoint's own IP), 1..paths (default 1: loopback has no ECMP to spray over, and cycling through many sockets costs about 1 us per message)"),
    ("paths", Kind::Int, "Entropy values (UDP source ports, one socket each) = paths per peer, 1..64 (default 16: with 4 ECMP links, 16 random ports leave a link unused ~4 % of the time, 8 ports ~38 %)"),
    ("mtu", Kind::Int, "Largest UDP payload sent, bytes (default: interface MTU - 28, capped by mtu_cap)"),
    ("mtu_cap", Kind::Int, "Upper bound of the automatic UDP payload size, bytes (default 65000)"),
    ("unreachable_timeout_ms", Kind::Int, "A peer acknowledging nothing this long is unreachable and its operations fail, ms (default 5000: an MPI job whose rank died ends within seconds; raise it where a live peer may pause longer)"),
    ("ack_delay_us", Kind::Int, "Longest delay of an acknowledgement to batch it, us (default 20: a reply carries the ACK; 0 = one ACK per receive batch, sent before the receive completes)"),
    ("ack_soon_us", Kind::Int, "Delay of the acknowledgement of the last packet a sender had queued, us (default 5: its send completes on that ack; a prompt reply still carries it, and a peer whose replies come later gets a hold learned from them, up to ACK_DELAY_US; 0 = at once)"),
    ("ack_lazy_us", Kind::Int, "Longest delay of the acknowledgement of an inject (no completion and no counter waits for it), us (default 500: in a collective's exchanges the next message to that peer carries it, where a pure ACK costs both hosts a system call; the sender's loss timers wait as much longer for such packets; at least ACK_DELAY_US, at most half of MIN_RTO_US; set it alike on every process of a job)"),
    ("ack_every", Kind::Int, "Acknowledge at once after this many data packets (default 16)"),
    ("min_rto_us", Kind::Int, "Lower bound of the retransmission timer, us (default 2000)"),
    ("max_host_delay_us", Kind::Int, "Most time a receiving host may hold packets (process not scheduled) that the congestion window covers on top of the network RTT, us (default 4000)"),
    ("max_rto_ms", Kind::Int, "Upper bound of the retransmission timer, ms (default 1000; the timer also stays within unreachable_timeout_ms / 16, so that a peer is asked at least 16 times before it is declared unreachable)"),
    ("initial_window", Kind::Int, "Initial congestion window, packets (default 64)"),
    ("rx_credit_packets", Kind::Int, "Receiver credit budget shared by the senders of an incast, packets beyond their cumulative acks (default 64); size it to the switch buffer in front of the receiver"),
    ("rx_credit_room", Kind::Int, "Until overflow cuts it (retransmissions, 8 or more in 4 ms and an eighth of the packets arriving), the receiver credit budget grows (an eighth per 10 ms) up to this many times FI_SPRAY_RX_CREDIT_PACKETS while two or more senders wait for credit; the first cut takes it back (default 4; 1 = never above)"),
    ("max_unexpected_bytes", Kind::Size, "Most unexpected (unmatched) message bytes held per endpoint (default 64 MiB)"),
    ("max_unexpected_msgs", Kind::Size, "Most unexpected (unmatched) messages held per endpoint, any size; a sender may have 1/64 of it unmatched towards one peer before its next message waits (default 65536)"),
    ("tx_size", Kind::Int, "Transmit queue size offered and enforced (tx_attr->size): sends, injects, RMA and atomics posted and not completed; past it posts return -FI_EAGAIN (default 16384; an application may ask for less)"),
    ("rx_size", Kind::Int, "Receive queue size offered and enforced (rx_attr->size): receives posted and not completed; past it posts return -FI_EAGAIN (default 16384; an application may ask for less)"),
    ("eager_limit", Kind::Size, "Messages up to this size go eagerly, larger use rendezvous, bytes (default 262144)"),
    ("sockbuf", Kind::Size, "SO_RCVBUF/SO_SNDBUF of every socket, bytes (default 16 MiB; forced when root)"),
    ("gso", Kind::Int, "Send runs of datagrams to one peer on one path (flowlets) as one segmented send, UDP GSO: 1 = yes where the kernel has it (default; falls back by itself where a device refuses), 0 = one datagram per send entry"),
    ("gro", Kind::Int, "Let the kernel hand over datagrams of one sender coalesced (UDP_GRO), split here: 1 = yes where the kernel has it (default), 0 = one datagram per receive entry"),
    ("flowlet_bytes", Kind::Size, "New data sent on one path in a row before the next path's turn, bytes of datagrams, headers included (default 65536: one segmented send, 44 packets at MTU 1500; 0 = spray every packet on the next path)"),
    ("max_peers", Kind::Int, "Most peers that remote handshakes may create per endpoint (default 65536; peers the application inserts in its address vector always count)"),
    ("peer_trim_ms", Kind::Int, "A peer with no traffic this long gives back its send ring and path records, keeping each path's RTT and health (about 3 KB an idle peer instead of up to 750 KB), ms (default 1000)"),
    ("peer_idle_timeout_ms", Kind::Int, "A peer with no traffic this long gives back its buffers and history (it keeps its session and resumes without a handshake), ms (default 120000)"),
    ("post_hold_us", Kind::Int, "A send of at most 512 bytes posted within this many us of the one before to the same peer, with no progress call between, waits to leave with the rest of its burst (the next progress call, a send to another peer, 32 held, or 200 us with no call at all): one segmented send for a window of small messages instead of a system call each, us (default 5; 0 = every send leaves at once; never with FI_SPRAY_ASSIST_US=0)"),
    ("rx_batch", Kind::Int, "Datagrams taken per recvmmsg/sendmmsg call (default 32)"),
    ("rx_place", Kind::Int, "Receive rendezvous data straight into the matched receive buffer (headers peeked first) while such a receive is waiting: 1 = yes, 0 = always through a bounce slot; default 1 when datagrams are 16 KiB or more (loopback), else 0"),
    ("linger_ms", Kind::Int, "On close, keep answering peers until they were quiet this long (lost last ACKs), ms (default 10; 0 = close at once)"),
    ("nic_pci", Kind::Int, "1: fi_info->nic->bus_attr gives the interface's PCI location (FI_BUS_PCI) for consumers that place NICs by it (aws-ofi-nccl); 0 (default): FI_BUS_UNKNOWN, since MPICH aborts in MPI_Init when its hwloc cannot find the PCI function (the PyPI wheel's cannot, a virtio NIC's parent neither)"),
    ("stats", Kind::Str, "Write per-endpoint, per-peer and per-path counters (packets and bytes per path, retransmissions, RTOs, RTT, rate, window) as JSON lines to this file ('-' = stderr; %p = process id) at endpoint close"),
    ("stats_ms", Kind::Int, "With FI_SPRAY_STATS: also write the counters of every open endpoint every this many ms (from the progress-assist thread; default 0 = at close only)"),
    ("auth_key", Kind::Str, "Job key: endpoints with one authenticate every packet (a 16-byte BLAKE3 MAC) and accept only packets with a valid MAC from endpoints with the same key; any string (its bytes are hashed into the key: use 32+ random characters, e.g. `openssl rand -hex 32`); an auth_key attribute of the endpoint or domain takes precedence; default none (no MAC, as without a key)"),
    ("assist_us", Kind::Int, "Progress an endpoint from a helper thread once the application has not called it for this long (retransmissions, ACKs), us (default 1000; 0 = never)"),
];

/// Register every parameter with the core (called once from `fi_prov_ini`).
pub fn define_all() {
    let prov = prov::provider();
    for (name, kind, help) in PARAMS {
        let (Ok(n), Ok(h)) = (CString::new(*name), CString::new(*help)) else {
            continue;
        };
        let ty = match kind {
            Kind::Str => sys::fi_param_type_FI_PARAM_STRING,
            Kind::Int => sys::fi_param_type_FI_PARAM_INT,
            Kind::Size => sys::fi_param_type_FI_PARAM_SIZE_T,
        };
        // SAFETY: prov is our static provider; name and help are valid C strings the
        // core copies; the help is passed as the argument of a "%s" format.
        unsafe {
            sys::fi_param_define(prov, n.as_ptr(), ty, b"%s\0".as_ptr().cast(), h.as_ptr());
        }
    }
}

fn get_raw(name: &str, out: *mut c_void) -> bool {
    let Ok(n) = CString::new(name) else {
        return false;
    };
    // SAFETY: prov is our static provider, n a valid C string, out points to storage
    // of the type the parameter was defined with (see the typed getters below).
    unsafe { sys::fi_param_get(prov::provider(), n.as_ptr(), out) == 0 }
}

/// An integer parameter, if set.
pub fn get_int(name: &str) -> Option<i64> {
    let mut v: c_int = 0;
    get_raw(name, (&mut v as *mut c_int).cast()).then_some(i64::from(v))
}

/// A size parameter, if set.
pub fn get_size(name: &str) -> Option<usize> {
    let mut v: usize = 0;
    get_raw(name, (&mut v as *mut usize).cast()).then_some(v)
}

/// A string parameter, if set and non-empty.
pub fn get_str(name: &str) -> Option<String> {
    let mut p: *mut c_char = std::ptr::null_mut();
    if !get_raw(name, (&mut p as *mut *mut c_char).cast()) || p.is_null() {
        return None;
    }
    // SAFETY: the core returned a pointer to its NUL-terminated copy of the variable's
    // value, which stays valid while the process runs.
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    (!s.is_empty()).then_some(s)
}

/// An integer parameter within `lo..=hi`, else `default`.
pub fn int_or(name: &str, default: i64, lo: i64, hi: i64) -> i64 {
    match get_int(name) {
        Some(v) if (lo..=hi).contains(&v) => v,
        Some(v) => {
            crate::log::warn(&format!(
                "FI_SPRAY_{} = {v} out of range {lo}..={hi}; using {default}",
                name.to_uppercase()
            ));
            default
        }
        None => default,
    }
}
