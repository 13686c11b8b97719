//! The provider descriptor libfabric finds through `fi_prov_ini`.

use std::cell::UnsafeCell;
use std::sync::Once;

use crate::consts::{SPRAY_MAX_API, SPRAY_PROV_VERSION};
use crate::sys;
use crate::{assist, fabric, getinfo, guard, params};

/// The one `struct fi_provider`: writable, because the core stores its own state in `context`.
struct ProvCell(UnsafeCell<sys::fi_provider>);

// SAFETY: the descriptor is filled once (under `INIT`) before its pointer is handed
// out; afterwards only the core writes `context`, and we only read `name`.
unsafe impl Sync for ProvCell {}

static PROVIDER: ProvCell = ProvCell(UnsafeCell::new(sys::fi_provider {
    version: SPRAY_PROV_VERSION,
    fi_version: 0,
    context: sys::fi_context {
        internal: [std::ptr::null_mut(); 4],
    },
    name: b"spray\0".as_ptr().cast(),
    getinfo: Some(getinfo::getinfo),
    fabric: Some(fabric::fabric_open),
    cleanup: Some(cleanup),
}));
static INIT: Once = Once::new();

/// Our provider descriptor (for fi_log / fi_param_*).
pub fn provider() -> *mut sys::fi_provider {
    PROVIDER.0.get()
}

/// Provider name as libfabric shows it.
pub const NAME: &str = "spray";
/// Fabric name.
pub const FABRIC_NAME: &str = "spray";

extern "C" fn cleanup() {
    // libfabric unloads us next: no thread of ours may outlive this call.
    guard::guard((), assist::shutdown);
}

/// Entry point libfabric calls after `dlopen`.
#[no_mangle]
pub extern "C" fn fi_prov_ini() -> *mut sys::fi_provider {
    guard::guard(std::ptr::null_mut(), || {
        INIT.call_once(|| {
            // SAFETY: fi_version only reads the core's compiled-in version.
            let core = unsafe { sys::fi_version() };
            // SAFETY: single writer under `INIT`; nobody else has the pointer yet.
            unsafe { (*provider()).fi_version = core.min(SPRAY_MAX_API) };
            params::define_all();
        });
        provider()
    })
}

/// The API version the provider reports (min of the core's and ours).
pub fn api_version() -> u32 {
    // SAFETY: fi_version is written once in fi_prov_ini before any other use.
    unsafe { (*provider()).fi_version }
}
