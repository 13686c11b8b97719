//! ABI details that differ by the application's API version, driven through the
//! provider's own entry points (the Debian 1.17 core cannot ask for API 2.x):
//! `fi_cq_err_entry` gained `src_addr` in 1.20 and must not be written for
//! older applications.

use std::ptr::null_mut;

use spray_fi::sys;

fn version(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}

/// Cancel a posted receive on a fresh endpoint of an API `api` fabric and return
/// the raw words `fi_cq_readerr` wrote over a 0xAA-filled buffer.
fn cancel_and_readerr(api: u32) -> [u64; 16] {
    spray_fi::fi_prov_ini();
    unsafe {
        let mut info = null_mut();
        let rc = spray_fi::getinfo::getinfo(
            api,
            std::ptr::null(),
            std::ptr::null(),
            0,
            std::ptr::null(),
            &mut info,
        );
        assert_eq!(rc, 0);
        let mut attr = *(*info).fabric_attr;
        attr.api_version = api;
        let mut fab = null_mut();
        assert_eq!(
            spray_fi::fabric::fabric_open(&mut attr, &mut fab, null_mut()),
            0
        );
        let mut dom = null_mut();
        assert_eq!(
            spray_fi::fabric::domain::domain_open(fab, info, &mut dom, null_mut()),
            0
        );
        let mut cq_attr: sys::fi_cq_attr = std::mem::zeroed();
        cq_attr.format = sys::fi_cq_format_FI_CQ_FORMAT_TAGGED;
        let mut cq = null_mut();
        assert_eq!(
            spray_fi::fabric::cq::cq_open(dom, &mut cq_attr, &mut cq, null_mut()),
            0
        );
        let mut av_attr: sys::fi_av_attr = std::mem::zeroed();
        let mut av = null_mut();
        assert_eq!(
            spray_fi::fabric::av::av_open(dom, &mut av_attr, &mut av, null_mut()),
            0
        );
        let mut ep = null_mut();
        assert_eq!(
            spray_fi::ep::endpoint::endpoint_open(dom, info, &mut ep, null_mut()),
            0
        );
        let fid = |p: *mut sys::fid_ep| p as *mut sys::fid;
        let ops = &*(*ep).fid.ops;
        assert_eq!(ops.bind.unwrap()(fid(ep), av as *mut sys::fid, 0), 0);
        assert_eq!(
            ops.bind.unwrap()(
                fid(ep),
                cq as *mut sys::fid,
                (sys::FI_TRANSMIT | sys::FI_RECV) as u64
            ),
            0
        );
        assert_eq!(
            ops.control.unwrap()(fid(ep), sys::FI_ENABLE as i32, null_mut()),
            0
        );
        let mut buf = [0u8; 16];
        let mut ctx = 7u64;
        let ctxp = (&mut ctx as *mut u64).cast();
        let tagged = &*(*ep).tagged;
        assert_eq!(
            tagged.recv.unwrap()(
                ep,
                buf.as_mut_ptr().cast(),
                16,
                null_mut(),
                u64::MAX,
                1,
                0,
                ctxp
            ),
            0
        );
        assert_eq!((*(*ep).ops).cancel.unwrap()(ep as sys::fid_t, ctxp), 0);
        let mut words = [0xAAAA_AAAA_AAAA_AAAAu64; 16];
        let cq_ops = &*(*cq).ops;
        let mut n = cq_ops.readerr.unwrap()(cq, words.as_mut_ptr().cast(), 0);
        for _ in 0..1000 {
            if n == 1 {
                break;
            }
            let mut e = [0u64; 8];
            let _ = cq_ops.read.unwrap()(cq, e.as_mut_ptr().cast(), 1);
            n = cq_ops.readerr.unwrap()(cq, words.as_mut_ptr().cast(), 0);
        }
        assert_eq!(n, 1, "no cancel error entry");
        let e = &*(words.as_ptr() as *const sys::fi_cq_err_entry);
        assert_eq!(e.err, sys::FI_ECANCELED as i32);
        assert_eq!(e.op_context, ctxp);
        for p in [
            fid(ep),
            cq as *mut sys::fid,
            av as *mut sys::fid,
            dom as *mut sys::fid,
            fab as *mut sys::fid,
        ] {
            assert_eq!(((*(*p).ops).close.unwrap())(p), 0);
        }
        sys::fi_freeinfo(info);
        words
    }
}

/// Index of the word right after the 1.17 `fi_cq_err_entry` (its `src_addr` in 1.20+).
const SRC_WORD: usize = std::mem::size_of::<sys::fi_cq_err_entry>() / 8;

#[test]
fn err_entry_layout_follows_api_version() {
    let old = cancel_and_readerr(version(1, 17));
    assert_eq!(
        old[SRC_WORD], 0xAAAA_AAAA_AAAA_AAAA,
        "a 1.17 app's buffer ends before src_addr"
    );
    let new = cancel_and_readerr(version(2, 5));
    assert_eq!(
        new[SRC_WORD],
        u64::MAX,
        "API >= 1.20 gets src_addr (FI_ADDR_NOTAVAIL here)"
    );
}
