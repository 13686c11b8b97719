//! The one place that turns libfabric `fid` pointers into our objects and back.
//!
//! Every object C sees is a `#[repr(C)]` struct whose FIRST field is the
//! libfabric `fid_*` struct (which itself starts with `struct fid`), so a
//! pointer to the object, to its `fid_*` and to its `fid` are the same address.
//! A pointer is accepted only if its `fclass` and `ops` table are the ones our
//! constructor set, so foreign or stale-but-reused pointers are rejected.

use std::os::raw::c_int;

use crate::consts::err;
use crate::{guard, sys};

/// An object type C can hold a pointer to.
///
/// # Safety
/// Implementors are `#[repr(C)]` with the libfabric `fid_*` struct as first field,
/// and `OPS` is the `fi_ops` table their constructor stores in `fid.ops`.
pub unsafe trait FiObject: Sized {
    /// `FI_CLASS_*` value.
    const FCLASS: u32;
    /// The `fi_ops` table objects of this type carry.
    fn fid_ops() -> *const sys::fi_ops;
}

/// Borrow the object behind `fid`, or `None` if NULL or not one of ours of type `T`.
///
/// # Safety
/// `fid` is NULL or points to a live `struct fid` (the libfabric contract for
/// every fid passed to a provider call).
pub unsafe fn get<'a, T: FiObject>(fid: *const sys::fid) -> Option<&'a T> {
    if fid.is_null() {
        return None;
    }
    // SAFETY: fid points to a live struct fid (caller).
    let f = unsafe { &*fid };
    if f.fclass != T::FCLASS as usize || !std::ptr::eq(f.ops, T::fid_ops()) {
        return None;
    }
    // SAFETY: fclass and ops identify an object our constructor made as a T, whose
    // first field is this fid (FiObject contract), so the address is a live T.
    Some(unsafe { &*(fid as *const T) })
}

/// Hand a new object to C: leak it and return the pointer to its `fid_*` header.
pub fn into_c<T: FiObject, F>(obj: T) -> *mut F {
    Box::into_raw(Box::new(obj)) as *mut F
}

/// Take back ownership of an object C is closing.
///
/// # Safety
/// `fid` was returned by `into_c::<T, _>` and is not used by C after this call.
pub unsafe fn take<T: FiObject>(fid: *mut sys::fid) -> Option<Box<T>> {
    // SAFETY: validated as a T by `get` (caller promises fid is live).
    unsafe { get::<T>(fid) }?;
    // SAFETY: the object came from Box::into_raw in into_c; C gives it up now.
    Some(unsafe { Box::from_raw(fid as *mut T) })
}

/// The `struct fid` header of any typed fid pointer (`fid_cq`, `fid_ep`, ...).
pub fn fid_of<F>(p: *mut F) -> *mut sys::fid {
    p as *mut sys::fid
}

/// A `*mut` view of a static ops table (C's prototypes are not const-correct;
/// nobody writes through it).
pub fn ops_ptr<T>(ops: &'static T) -> *mut T {
    ops as *const T as *mut T
}

/// Run `f` on the object of type `T` behind the typed fid `p` (`fid_cq`,
/// `fid_av`, ...) inside the panic guard: `not_ours` when `p` is NULL or not
/// one of ours of type `T`, `on_panic` when `f` panics. The one lookup every
/// class's data calls share.
///
/// `p` is a fid pointer the application passed to a provider call: NULL or
/// live (the libfabric contract every entry point relies on).
pub fn with<T: FiObject, F, R>(p: *mut F, not_ours: R, on_panic: R, f: impl FnOnce(&T) -> R) -> R {
    guard::guard(on_panic, || {
        // SAFETY: p from the application (NULL or live); validated by get.
        match unsafe { get::<T>(fid_of(p)) } {
            Some(o) => f(o),
            None => not_ours,
        }
    })
}

/// `with` for calls returning a C `int`: not ours → `-FI_EINVAL`, panic →
/// `-FI_EOTHER` (as `guard::int`).
pub fn with_int<T: FiObject, F>(p: *mut F, f: impl FnOnce(&T) -> c_int) -> c_int {
    with(p, err::EINVAL, err::EOTHER, f)
}

/// `with` for calls returning `ssize_t`: not ours → `-FI_EINVAL`, panic →
/// `-FI_EOTHER` (as `guard::ssize`).
pub fn with_ssize<T: FiObject, F>(p: *mut F, f: impl FnOnce(&T) -> isize) -> isize {
    with(p, err::EINVAL as isize, err::EOTHER as isize, f)
}
