//! An RDM inject takes up to 4 KiB whatever the MTU, through the real
//! libfabric core and driver over loopback at an Ethernet MTU
//! (`FI_SPRAY_MTU=1472`): a 4 KiB message is three packets and still an
//! inject. MPIs inject what fits `inject_size` (MPICH, Intel MPI, Open MPI's
//! mtl ofi); a send that does not waits for the peer's ack, and in a
//! ping-pong that ack comes with the reply, which then arrives before the
//! receive for it is posted. DGRAM keeps one packet.

mod common;
use common::duo::{wait_one, Duo};
use common::fab::*;
use common::pair::pattern;

use std::os::raw::c_void;
use std::ptr::null_mut;

use spray_fi::sys;

/// UDP payload of a 1500-byte MTU.
const MTU: &str = "1472";

fn at_ethernet_mtu() {
    std::env::set_var("FI_SPRAY_MTU", MTU);
}

/// `(inject_size, max_msg_size)` getinfo offers for `ep_type`.
fn offered(ep_type: u32) -> (usize, usize) {
    at_ethernet_mtu();
    let info = getinfo(ep_type, 0);
    // SAFETY: getinfo returned a valid, non-null info list.
    unsafe {
        let r = (
            (*(*info).tx_attr).inject_size,
            (*(*info).ep_attr).max_msg_size,
        );
        sys::fi_freeinfo(info);
        r
    }
}

#[test]
fn rdm_injects_4_kib_at_mtu_1500_and_dgram_one_packet() {
    let (rdm_inject, _) = offered(sys::fi_ep_type_FI_EP_RDM);
    assert_eq!(rdm_inject, 4096, "RDM inject_size at MTU 1500");
    let (dgram_inject, dgram_max) = offered(sys::fi_ep_type_FI_EP_DGRAM);
    assert!(
        dgram_max < 1472,
        "FI_SPRAY_MTU not in effect: DGRAM max_msg_size {dgram_max}"
    );
    assert_eq!(dgram_inject, dgram_max, "DGRAM inject_size");
}

fn tinject(d: &Duo, buf: &[u8], tag: u64) -> isize {
    unsafe {
        (*(*d.ep[0]).tagged).inject.unwrap()(
            d.ep[0],
            buf.as_ptr().cast(),
            buf.len(),
            d.addr[1],
            tag,
        )
    }
}

fn trecv(d: &Duo, buf: &mut [u8], tag: u64) -> isize {
    unsafe {
        (*(*d.ep[1]).tagged).recv.unwrap()(
            d.ep[1],
            buf.as_mut_ptr().cast::<c_void>(),
            buf.len(),
            null_mut(),
            u64::MAX,
            tag,
            0,
            tag as usize as *mut c_void,
        )
    }
}

/// A 4 KiB inject at MTU 1500 arrives whole, from the copy taken at the call
/// (the source is overwritten as soon as the call returns), whether its
/// receive was posted first or after it arrived; one byte more is refused.
#[test]
fn a_4_kib_inject_arrives_intact_posted_or_not() {
    at_ethernet_mtu();
    let d = Duo::new();
    for (tag, posted_first) in [(1u64, true), (2, false)] {
        let want = pattern(tag, 4096);
        let mut src = want.clone();
        let mut dst = vec![0u8; 4096];
        if posted_first {
            assert_eq!(trecv(&d, &mut dst, tag), 0);
        }
        assert_eq!(tinject(&d, &src, tag), 0, "4 KiB fi_tinject");
        src.fill(0xEE);
        if !posted_first {
            // Let it arrive unexpected before the receive is posted.
            for _ in 0..200 {
                let _ = cq_read(d.cq[0], &mut []);
                let _ = cq_read(d.cq[1], &mut []);
            }
            assert_eq!(trecv(&d, &mut dst, tag), 0);
        }
        let e = wait_one(d.cq[1], d.cq[0]).expect("receive completion");
        assert_eq!(e.len, 4096, "tag {tag}");
        assert_eq!(e.tag, tag);
        assert!(dst == want, "tag {tag}: received bytes differ");
    }
    let big = vec![0u8; 4097];
    assert_eq!(
        tinject(&d, &big, 3),
        -(sys::FI_EMSGSIZE as isize),
        "inject larger than inject_size"
    );
    // An inject reports nothing on the sender's CQ.
    d.quiet();
    d.close();
}
