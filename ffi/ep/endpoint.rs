//! Endpoints: open/close, binding CQs/counters/AV/EQ, enable, and the shared
//! core that CQ and counter reads progress.

use std::net::SocketAddr;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::hold::PostHold;
use super::{atomic, msg, ops, rma, tagged};
use crate::consts::*;
use crate::ep::state::{EpSetup, EpState};
use crate::fabric::domain::{self, Domain};
use crate::io::clock;
use crate::obj::{self, FiObject};
use crate::{
    addr, assist, fabric::av, fabric::cntr, fabric::cq, fabric::eq, guard, iface, limits, nosys,
    params, sys,
};

// CQs and counters of one thread may progress endpoints used by another.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<EpCore>();
};

/// The part of an endpoint CQs and counters hold on to (to progress it).
pub struct EpCore {
    /// Everything, behind one lock (FI_THREAD_SAFE).
    pub state: Mutex<EpState>,
    /// Last time (monotonic ns) the application called into this endpoint
    /// (data calls, CQ / counter reads): the progress assist stays away until
    /// it is `assist_idle_ns` old.
    last_app_ns: AtomicU64,
    /// When the oldest send held back for its burst was held (`hold.rs`),
    /// monotonic ns (0 = none): the assist thread flushes it after
    /// `assist::HOLD_BOUND_NS` if the application has not.
    held_ns: AtomicU64,
    /// See `assist::idle_ns` (0 = no assist for this endpoint).
    pub assist_idle_ns: u64,
}

impl EpCore {
    /// Make progress (receive, timers, transmit, completions).
    pub fn progress(&self) {
        // Another thread progressing the same endpoint does our work too.
        match self.state.try_lock() {
            Some(mut st) => {
                st.progress();
                self.touched_at(st.progressed_ns);
                self.sync_held(&mut st);
            }
            None => self.touch(),
        }
    }
    /// Publish `st`'s held sends to the assist thread, and wake it if a hold
    /// just began (`hold.rs`).
    pub fn sync_held(&self, st: &mut EpState) {
        // Every data call and CQ poll passes here: store (a full fence) only
        // when the value changes.
        if self.held_ns.load(Ordering::Relaxed) != st.hold.since_ns {
            self.held_ns.store(st.hold.since_ns, Ordering::SeqCst);
        }
        if std::mem::take(&mut st.hold.started) {
            assist::held(st.hold.since_ns);
        }
    }
    /// See `held_ns`.
    pub fn held_ns(&self) -> u64 {
        self.held_ns.load(Ordering::SeqCst)
    }
    /// Note an application call at `ns` (a clock reading already at hand).
    fn touched_at(&self, ns: u64) {
        if self.assist_idle_ns != 0 && ns != 0 {
            self.last_app_ns.store(ns, Ordering::Relaxed);
        }
    }
    /// Note an application call.
    pub fn touch(&self) {
        if self.assist_idle_ns != 0 {
            self.last_app_ns.store(clock::now_ns(), Ordering::Relaxed);
        }
    }
    /// The application blocks on a wait fd: let the assist thread take over
    /// at once (see `assist::hand_over`).
    pub fn mark_blocked(&self) {
        self.last_app_ns.store(0, Ordering::Relaxed);
    }
    /// See `last_app_ns`.
    pub fn last_app_ns(&self) -> u64 {
        self.last_app_ns.load(Ordering::Relaxed)
    }
    /// Socket to sleep on.
    pub fn rx_fd(&self) -> Option<i32> {
        self.state.lock().rx_fd()
    }
    /// When its engine next needs a timer run, ns.
    pub fn next_timer_ns(&self) -> Option<u64> {
        self.state.lock().next_timer_ns()
    }
}

/// `struct fid_ep` plus our state.
#[repr(C)]
pub struct Ep {
    fid: sys::fid_ep,
    domain: *const Domain,
    /// Shared with bound CQs and counters.
    pub core: Arc<EpCore>,
}

static FI_OPS: sys::fi_ops = nosys::fid_ops(close, Some(bind), Some(control));

// SAFETY: repr(C), fid_ep first, FI_OPS set by endpoint_open.
unsafe impl FiObject for Ep {
    const FCLASS: u32 = sys::FI_CLASS_EP;
    fn fid_ops() -> *const sys::fi_ops {
        &FI_OPS
    }
}

/// The endpoint behind a `fid_ep` / `fid` pointer.
///
/// # Safety
/// `p` NULL or live.
pub unsafe fn get<'a, F>(p: *mut F) -> Option<&'a Ep> {
    // SAFETY: forwarded.
    unsafe { obj::get::<Ep>(obj::fid_of(p)) }
}

/// Run `f` on the locked state of endpoint `ep` (EINVAL if not ours).
pub(crate) fn with_state(ep: *mut sys::fid_ep, f: impl FnOnce(&mut EpState) -> isize) -> isize {
    obj::with_ssize(ep, |e: &Ep| {
        let mut st = e.core.state.lock();
        let r = f(&mut st);
        // Most calls progress the endpoint, which read the clock; the
        // others leave an older time, which at worst lets the assist
        // thread progress the endpoint once.
        e.core.touched_at(st.progressed_ns);
        e.core.sync_held(&mut st);
        r
    })
}

/// `fi_endpoint`.
///
/// One function on purpose (~150 lines): `fi_endpoint`'s checks of the info
/// and the choice of address and interfaces happen in the order libfabric's
/// attributes are read, each failing with its own code, before the
/// sockets are opened and the endpoint object is built.
pub unsafe extern "C" fn endpoint_open(
    domain: *mut sys::fid_domain,
    info: *mut sys::fi_info,
    ep: *mut *mut sys::fid_ep,
    context: *mut c_void,
) -> c_int {
    guard::int(|| {
        // SAFETY: domain from the application; validated by get.
        let Some(d) = (unsafe { domain::get(domain) }) else {
            return err::EINVAL;
        };
        if ep.is_null() || info.is_null() {
            return err::EINVAL;
        }
        // SAFETY: info is a valid fi_info; its sub-attributes NULL or valid.
        let i = unsafe { &*info };
        // SAFETY: as above.
        let (ep_attr, tx, rx) =
            unsafe { (i.ep_attr.as_ref(), i.tx_attr.as_ref(), i.rx_attr.as_ref()) };
        let ep_type = ep_attr.map_or(FI_EP_RDM, |a| a.type_);
        if ep_type != FI_EP_RDM && ep_type != FI_EP_DGRAM {
            return err::EINVAL;
        }
        // SAFETY: auth_key holds auth_key_size bytes (libfabric contract).
        let ep_key =
            match ep_attr.map(|a| unsafe { crate::auth::key_of(a.auth_key, a.auth_key_size) }) {
                Some(Ok(k)) => k,
                Some(Err(crate::auth::BadKey)) => return err::EINVAL,
                None => None,
            };
        let auth_key = crate::auth::job_key(ep_key.as_deref(), d.auth_key.as_deref());
        // SAFETY: src_addr NULL or src_addrlen bytes.
        let given = unsafe { addr::read_sockaddr(i.src_addr, i.src_addrlen) };
        // The family: the given address's, else the info's address format, else
        // the default (FI_SPRAY_IPV6).
        let v6 = given.map_or_else(
            || match i.addr_format {
                FI_SOCKADDR_IN6 => true,
                FI_SOCKADDR_IN => false,
                _ => iface::default_v6(),
            },
            |a| a.is_ipv6(),
        );
        // The domain's interface, else the default one of the family.
        let domain_iface = d.iface.clone().filter(|i| i.ip.is_ipv6() == v6);
        let Some(chosen) = domain_iface.or_else(|| iface::choose(v6)) else {
            crate::log::warn("fi_endpoint: IPv6 asked for, but no interface has an IPv6 address");
            return err::EADDRNOTAVAIL;
        };
        let default_port = params::int_or("port", 0, 0, 65535) as u16;
        let at = match given {
            Some(a) if !a.ip().is_unspecified() => a,
            Some(a) => SocketAddr::new(chosen.ip, a.port()),
            None => SocketAddr::new(chosen.ip, default_port),
        };
        let nic = if at.ip() == chosen.ip {
            Some(chosen)
        } else {
            iface::owning(at.ip())
        };
        let Some(nic) = nic else {
            return err::EADDRNOTAVAIL;
        };
        // A domain of several rails: its endpoints bind to all of them
        // (unless given an address of another interface).
        let rails: Vec<std::net::IpAddr> =
            if d.rails.len() >= 2 && d.rails[0].ip.is_ipv6() == v6 && at.ip() == d.rails[0].ip {
                d.rails.iter().map(|r| r.ip).collect()
            } else {
                Vec::new()
            };
        let max_datagram = if rails.is_empty() {
            iface::max_datagram(&nic)
        } else {
            iface::rails_max_datagram(&d.rails)
        };
        let lim = limits::for_datagram(max_datagram);
        let search = at.port() == default_port;
        let opened = if rails.is_empty() {
            crate::io::sock::open_configured(at, search)
        } else {
            let sockbuf = params::get_size("sockbuf").unwrap_or(16 << 20);
            let per_rail = crate::io::sock::paths_per_rail(rails.len());
            crate::io::sock::open_rails(&rails, at.port(), search, per_rail, sockbuf)
        };
        let socks = match opened {
            Ok(s) => s,
            Err(e) => return e,
        };
        let max_msg = if ep_type == FI_EP_DGRAM {
            lim.dgram_max_msg
        } else {
            lim.rdm_max_msg
        };
        let setup = EpSetup {
            ep_type,
            tx_flags: tx.map_or(0, |t| t.op_flags),
            rx_flags: rx.map_or(0, |r| r.op_flags),
            max_datagram,
            inject_size: lim.inject_size.min(max_msg),
            directed_recv: (i.caps | rx.map_or(0, |r| r.caps)) & FI_DIRECTED_RECV != 0,
            caps: i.caps,
            auth_key,
            tx_size: queue_size(tx.map_or(0, |t| t.size), true),
            rx_size: queue_size(rx.map_or(0, |r| r.size), false),
            rma_order: crate::getinfo::rma_order(
                tx.map_or(0, |t| t.msg_order) | rx.map_or(0, |r| r.msg_order),
            ),
        };
        let mut state = EpState::new(setup, socks);
        let rdm = ep_type == FI_EP_RDM;
        if rdm {
            state.mrs = Some(d.mrs.clone());
        }
        // One-sided operations exist on reliable endpoints only.
        let (rma, atomic) = if rdm {
            (&rma::RMA_OPS, &atomic::ATOMIC_OPS)
        } else {
            (&nosys::RMA, &nosys::ATOMIC)
        };
        // SAFETY: info's domain_attr is NULL or valid (checked above for info).
        let assist_idle_ns = assist::idle_ns_for(unsafe { i.domain_attr.as_ref() });
        // Held sends need the assist thread to bound their wait (`hold.rs`).
        if assist_idle_ns != 0 {
            state.hold = PostHold::new(params::int_or("post_hold_us", 5, 0, 1000) as u64 * 1000);
        }
        let core = Arc::new(EpCore {
            state: Mutex::new(state),
            last_app_ns: AtomicU64::new(clock::now_ns()),
            held_ns: AtomicU64::new(0),
            assist_idle_ns,
        });
        let obj = Ep {
            fid: sys::fid_ep {
                fid: sys::fid {
                    fclass: sys::FI_CLASS_EP as usize,
                    context,
                    ops: obj::ops_ptr(&FI_OPS),
                },
                ops: obj::ops_ptr(&ops::EP_OPS),
                cm: obj::ops_ptr(&ops::CM_OPS),
                msg: obj::ops_ptr(&msg::MSG_OPS),
                rma: obj::ops_ptr(rma),
                tagged: obj::ops_ptr(&tagged::TAGGED_OPS),
                atomic: obj::ops_ptr(atomic),
                collective: obj::ops_ptr(&nosys::COLLECTIVE),
            },
            domain: d,
            core,
        };
        d.refs.inc();
        // SAFETY: ep is a valid out-pointer.
        unsafe { *ep = obj::into_c(obj) };
        0
    })
}

/// The queue size of an endpoint whose info asks for `asked` (0 = the
/// default), at most what getinfo offers (`getinfo::queue_size`).
fn queue_size(asked: usize, tx: bool) -> usize {
    let most = crate::getinfo::queue_size(tx);
    if asked == 0 {
        most
    } else {
        asked.min(most)
    }
}

/// `fi_endpoint2`: no flags supported.
pub unsafe extern "C" fn endpoint_open2(
    domain: *mut sys::fid_domain,
    info: *mut sys::fi_info,
    ep: *mut *mut sys::fid_ep,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    if flags != 0 {
        return err::ENOSYS;
    }
    // SAFETY: same contract as fi_endpoint.
    unsafe { endpoint_open(domain, info, ep, context) }
}

unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    guard::int(|| {
        // SAFETY: fid from the application; take validates it.
        let Some(e) = (unsafe { obj::take::<Ep>(fid) }) else {
            return err::EINVAL;
        };
        // Take the bindings out under the lock, then detach without holding it
        // (CQ readers lock their endpoint list first, then an endpoint).
        let (cqs, cntrs, av, eq) = {
            let mut st = e.core.state.lock();
            let mut cntrs: Vec<_> = st.other_cntrs.drain(..).collect();
            cntrs.extend(st.tx_cntr.take());
            cntrs.extend(st.rx_cntr.take());
            cntrs.extend(st.read_cntr.take());
            cntrs.extend(st.write_cntr.take());
            let cqs: Vec<_> = st.tx_cq.take().into_iter().chain(st.rx_cq.take()).collect();
            (cqs, cntrs, st.av.take(), st.eq.take())
        };
        for c in cqs {
            c.detach(&e.core);
            c.bound.dec();
        }
        for c in cntrs {
            c.detach(&e.core);
            c.bound.dec();
        }
        if let Some(a) = av {
            a.bound.dec();
        }
        if let Some(q) = eq {
            q.bound.dec();
        }
        {
            let mut st = e.core.state.lock();
            st.linger();
            st.dump_stats("close");
            crate::log::info(&format!("closing {}", st.summary()));
        }
        // SAFETY: the domain outlives its endpoints (its refs count this one).
        unsafe { (*e.domain).refs.dec() };
        0
    })
}

unsafe extern "C" fn bind(fid: *mut sys::fid, bfid: *mut sys::fid, flags: u64) -> c_int {
    guard::int(|| {
        // SAFETY: fid from the application; validated by get.
        let Some(e) = (unsafe { get(fid) }) else {
            return err::EINVAL;
        };
        // SAFETY: bfid from the application; each get validates its own class.
        if let Some(c) = unsafe { cq::get(bfid) } {
            if flags & !(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION) != 0 {
                return err::EINVAL;
            }
            let mut st = e.core.state.lock();
            if flags & FI_TRANSMIT != 0 {
                if st.tx_cq.is_some() {
                    return err::EINVAL;
                }
                st.tx_cq = Some(c.core.clone());
                st.tx_selective = flags & FI_SELECTIVE_COMPLETION != 0;
                c.core.bound.inc();
            }
            if flags & FI_RECV != 0 {
                if st.rx_cq.is_some() {
                    return err::EINVAL;
                }
                st.rx_cq = Some(c.core.clone());
                st.rx_selective = flags & FI_SELECTIVE_COMPLETION != 0;
                c.core.bound.inc();
            }
            drop(st);
            c.core.attach(&e.core);
            return 0;
        }
        // SAFETY: as above.
        if let Some(c) = unsafe { cntr::get(bfid) } {
            let mut guard = e.core.state.lock();
            let st = &mut *guard;
            if flags & FI_SEND != 0 {
                st.tx_cntr = Some(c.core.clone());
                c.core.bound.inc();
            }
            if flags & FI_RECV != 0 {
                st.rx_cntr = Some(c.core.clone());
                c.core.bound.inc();
            }
            // RMA reads / fetching atomics and writes / plain atomics this
            // endpoint initiates (MPICH binds one counter FI_READ | FI_WRITE and
            // waits on it for RMA completion).
            for (bit, slot) in [(FI_READ, &mut st.read_cntr), (FI_WRITE, &mut st.write_cntr)] {
                if flags & bit != 0 {
                    if let Some(old) = slot.replace(c.core.clone()) {
                        old.bound.dec();
                    }
                    c.core.bound.inc();
                }
            }
            if flags & (FI_REMOTE_READ | FI_REMOTE_WRITE) != 0 {
                // Remote events count only with FI_RMA_EVENT, which spray does not
                // offer; the binding is legal and kept for refcounts.
                st.other_cntrs.push(c.core.clone());
                c.core.bound.inc();
            }
            drop(guard);
            c.core.attach(&e.core);
            return 0;
        }
        // SAFETY: as above.
        if let Some(a) = unsafe { av::get(bfid) } {
            let mut st = e.core.state.lock();
            if st.av.is_some() {
                return err::EINVAL;
            }
            st.av = Some(a.core.clone());
            a.core.bound.inc();
            return 0;
        }
        // SAFETY: as above.
        if let Some(q) = unsafe { eq::get(bfid) } {
            let mut st = e.core.state.lock();
            if st.eq.is_none() {
                st.eq = Some(q.core.clone());
                q.core.bound.inc();
            }
            return 0;
        }
        err::EINVAL
    })
}

unsafe extern "C" fn control(fid: *mut sys::fid, command: c_int, arg: *mut c_void) -> c_int {
    guard::int(|| {
        // SAFETY: fid from the application; validated by get.
        let Some(e) = (unsafe { get(fid) }) else {
            return err::EINVAL;
        };
        let mut st = e.core.state.lock();
        match command as u32 {
            sys::FI_ENABLE => match st.enable() {
                Ok(()) => {
                    drop(st);
                    assist::register(&e.core);
                    0
                }
                Err(e) => e as c_int,
            },
            sys::FI_GETOPSFLAG | sys::FI_SETOPSFLAG => {
                if arg.is_null() {
                    return err::EINVAL;
                }
                // SAFETY: for these commands arg points to a u64 of flags.
                let f = unsafe { &mut *(arg as *mut u64) };
                let recv = *f & FI_RECV != 0;
                if command as u32 == sys::FI_GETOPSFLAG {
                    *f = *st.op_flags(recv);
                } else {
                    *st.op_flags(recv) = *f & !(FI_TRANSMIT | FI_RECV);
                }
                0
            }
            _ => err::ENOSYS,
        }
    })
}
