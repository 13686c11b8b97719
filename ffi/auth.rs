//! The job key an endpoint authenticates its packets with: libfabric's
//! `auth_key` attribute (the endpoint's, else its domain's) or the
//! `FI_SPRAY_AUTH_KEY` parameter. The FFI only reads the key; the engine
//! hashes it and does everything else (`provider/src/srd/auth.rs`).

use spray::config::AuthKey;

/// Longest `auth_key` accepted, bytes (a key is hashed: more adds nothing).
pub const MAX_AUTH_KEY: usize = 4096;

/// An `auth_key` attribute that cannot be a key: a NULL pointer with a size,
/// or a size over `MAX_AUTH_KEY` (the call that gave it fails with -FI_EINVAL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadKey;

/// The key in an `auth_key` / `auth_key_size` attribute pair: `Ok(None)` for
/// size 0, `Err(BadKey)` for a NULL pointer with a size or a size over
/// `MAX_AUTH_KEY`.
///
/// # Safety
/// `p` is NULL or points to `size` readable bytes.
pub unsafe fn key_of(p: *const u8, size: usize) -> Result<Option<Vec<u8>>, BadKey> {
    if size == 0 {
        return Ok(None);
    }
    if p.is_null() || size > MAX_AUTH_KEY {
        return Err(BadKey);
    }
    // SAFETY: p points to size readable bytes (caller contract), size > 0.
    Ok(Some(
        unsafe { std::slice::from_raw_parts(p, size) }.to_vec(),
    ))
}

/// A `malloc`'d copy of `key` for an `fi_info` attribute (`fi_freeinfo`
/// frees it), with its size; (NULL, 0) for none or if malloc fails.
pub fn c_copy(key: Option<&[u8]>) -> (*mut u8, usize) {
    let Some(k) = key.filter(|k| !k.is_empty()) else {
        return (std::ptr::null_mut(), 0);
    };
    // SAFETY: malloc of a non-zero size; NULL is handled below.
    let p = unsafe { libc::malloc(k.len()) }.cast::<u8>();
    if p.is_null() {
        return (p, 0);
    }
    // SAFETY: p has k.len() writable bytes, k as many readable; no overlap.
    unsafe { std::ptr::copy_nonoverlapping(k.as_ptr(), p, k.len()) };
    (p, k.len())
}

/// The job key of an endpoint: its own `auth_key`, else its domain's, else
/// `FI_SPRAY_AUTH_KEY` (the string's bytes; see ffi/README.md), else none.
pub fn job_key(ep: Option<&[u8]>, domain: Option<&[u8]>) -> Option<AuthKey> {
    let k = match (ep, domain) {
        (Some(k), _) | (None, Some(k)) => k.to_vec(),
        (None, None) => crate::params::get_str("auth_key")?.into_bytes(),
    };
    (!k.is_empty()).then_some(AuthKey(k))
}
