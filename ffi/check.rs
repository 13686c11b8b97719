//! Argument checks shared by the data calls, endpoint enable and memory
//! registration: which operation flags each `*msg` call accepts, whether an
//! endpoint needs a transmit / receive CQ, and whether a buffer can exist.
//!
//! Flags: every flag libfabric 1.17 or 2.5.1 defines for a call is accepted
//! when spray honours it or when ignoring it is harmless (completion levels,
//! `FI_MORE`, `FI_INJECT` / `FI_REMOTE_CQ_DATA` on a receive, as prov/cxi
//! ignores them). Undefined bits, and flags whose meaning spray would silently
//! break (`FI_TRIGGER`, `FI_MULTICAST`, `FI_AUTH_KEY`, `FI_COMMIT_COMPLETE`,
//! a tagged `FI_MULTI_RECV` without `FI_TAGGED_MULTI_RECV`, `FI_PEEK` on an
//! untagged receive), get `-FI_EBADFLAGS`, as prov/cxi and prov/ucx answer.

use crate::consts::*;
use crate::io::buf::FfiBuf;

/// Flags any data call accepts: completion requests and levels, batching hints.
const COMMON: u64 = FI_COMPLETION
    | FI_MORE
    | FI_INJECT_COMPLETE
    | FI_TRANSMIT_COMPLETE
    | FI_DELIVERY_COMPLETE
    | FI_MATCH_COMPLETE;

/// `fi_sendmsg`, `fi_tsendmsg`, `fi_writemsg`, `fi_readmsg` and the atomic msg
/// calls (MPICH passes `FI_DELIVERY_COMPLETE` to reads and atomics too).
pub const TX_FLAGS: u64 = COMMON | FI_INJECT | FI_REMOTE_CQ_DATA | FI_FENCE;

/// `fi_recvmsg`: `FI_CLAIM` / `FI_DISCARD` are 1.x buffered-receive flags the
/// engine answers; `FI_INJECT` and `FI_REMOTE_CQ_DATA` mean nothing on a
/// receive and are ignored.
pub const RX_FLAGS: u64 =
    COMMON | FI_MULTI_RECV | FI_CLAIM | FI_DISCARD | FI_INJECT | FI_REMOTE_CQ_DATA;

/// `fi_trecvmsg`: peek, claim, discard (OpenMPI and MPICH probes).
pub const TAGGED_RX_FLAGS: u64 =
    COMMON | FI_PEEK | FI_CLAIM | FI_DISCARD | FI_INJECT | FI_REMOTE_CQ_DATA;

/// Flags `fi_mr_reg*` accepts: none is supported (`FI_RMA_EVENT`, `FI_RMA_PMEM`,
/// the `FI_HMEM_*` flags and `FI_MR_DMABUF` need capabilities spray does not
/// offer; a DMA-buf region would be misread as an iovec).
pub const MR_FLAGS: u64 = 0;

/// `-FI_EBADFLAGS` if `flags` has a bit outside `allowed`.
pub fn flags(flags: u64, allowed: u64) -> Result<(), isize> {
    if flags & !allowed != 0 {
        Err(err::EBADFLAGS as isize)
    } else {
        Ok(())
    }
}

/// libfabric's `ofi_needs_tx`: an endpoint with these capabilities initiates
/// transfers (sends, or RMA / atomics), so it needs a transmit CQ to report
/// them, failures at least (fi_endpoint(3)).
pub fn needs_tx_cq(caps: u64) -> bool {
    let send = caps & (FI_MSG | FI_TAGGED) != 0 && (caps & FI_SEND != 0 || caps & FI_RECV == 0);
    let rma = caps & (FI_RMA | FI_ATOMIC) != 0
        && (caps & (FI_READ | FI_WRITE) != 0 || caps & (FI_REMOTE_READ | FI_REMOTE_WRITE) == 0);
    send || rma
}

/// libfabric's `ofi_needs_rx`: an endpoint with these capabilities receives
/// messages, so it needs a receive CQ.
pub fn needs_rx_cq(caps: u64) -> bool {
    caps & (FI_MSG | FI_TAGGED) != 0 && (caps & FI_RECV != 0 || caps & FI_SEND == 0)
}

/// The buffer could be real memory: no piece wraps past the end of the address
/// space and the whole is at most `isize::MAX` bytes (no C or Rust object is
/// larger). A `SIZE_MAX` length fails this.
pub fn addressable(buf: &FfiBuf) -> bool {
    use spray::UserBuf;
    let mut ok = buf.len() <= isize::MAX as usize;
    buf.raw_range(0, buf.len(), |p, n| {
        ok &= (p as usize).checked_add(n).is_some();
    });
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    /// libfabric's ofi_needs_tx / ofi_needs_rx on the capability sets clients ask for.
    #[test]
    fn cq_needs_follow_libfabric() {
        let cases = [
            (FI_MSG | FI_TAGGED | FI_SEND | FI_RECV, true, true),
            (FI_MSG | FI_TAGGED, true, true),
            (FI_MSG | FI_SEND, true, false),
            (FI_TAGGED | FI_RECV, false, true),
            (FI_RMA | FI_READ | FI_WRITE, true, false),
            (FI_RMA | FI_REMOTE_READ | FI_REMOTE_WRITE, false, false),
            (FI_RMA, true, false),
            (FI_ATOMIC | FI_RECV, true, false),
            (0, false, false),
        ];
        for (caps, tx, rx) in cases {
            assert_eq!(needs_tx_cq(caps), tx, "tx {caps:#x}");
            assert_eq!(needs_rx_cq(caps), rx, "rx {caps:#x}");
        }
    }

    #[test]
    fn addressable_rejects_wrapping_and_huge() {
        let v = [0u8; 16];
        let iov = |base: *const u8, len: usize| libc::iovec {
            iov_base: base as *mut _,
            iov_len: len,
        };
        // SAFETY (test): the iovecs are only described, never accessed.
        let buf = |iovs: &[libc::iovec]| unsafe { FfiBuf::from_iov(iovs.as_ptr(), iovs.len()) };
        let ok = buf(&[iov(v.as_ptr(), 16)]).unwrap();
        assert!(addressable(&ok));
        let max = buf(&[iov(v.as_ptr(), usize::MAX)]).unwrap();
        assert!(!addressable(&max));
        let half = buf(&[iov(v.as_ptr(), 1 << 63)]).unwrap();
        assert!(!addressable(&half));
        let wrap = buf(&[iov(v.as_ptr(), 16), iov(usize::MAX as *const u8, 2)]).unwrap();
        assert!(!addressable(&wrap));
    }
}
