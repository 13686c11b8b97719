//! libfabric constants as plain `u64` / `i32` values (bindgen gives them mixed
//! types, and function-like macros such as `FI_VERSION` not at all).
#![allow(missing_docs)]
use crate::sys;

/// `FI_VERSION(major, minor)`.
pub const fn fi_version(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}
/// The highest libfabric API version whose semantics spray implements.
pub const SPRAY_MAX_API: u32 = fi_version(2, 5);
/// Provider version reported in `fi_provider.version`.
pub const SPRAY_PROV_VERSION: u32 = fi_version(0, 1);

pub const FI_MSG: u64 = sys::FI_MSG as u64;
pub const FI_RMA: u64 = sys::FI_RMA as u64;
pub const FI_TAGGED: u64 = sys::FI_TAGGED as u64;
pub const FI_ATOMIC: u64 = sys::FI_ATOMIC as u64;
pub const FI_READ: u64 = sys::FI_READ as u64;
pub const FI_WRITE: u64 = sys::FI_WRITE as u64;
pub const FI_RECV: u64 = sys::FI_RECV as u64;
pub const FI_SEND: u64 = sys::FI_SEND as u64;
pub const FI_TRANSMIT: u64 = sys::FI_TRANSMIT as u64;
pub const FI_REMOTE_READ: u64 = sys::FI_REMOTE_READ as u64;
pub const FI_REMOTE_WRITE: u64 = sys::FI_REMOTE_WRITE as u64;
pub const FI_MULTI_RECV: u64 = sys::FI_MULTI_RECV as u64;
pub const FI_REMOTE_CQ_DATA: u64 = sys::FI_REMOTE_CQ_DATA as u64;
pub const FI_MORE: u64 = sys::FI_MORE as u64;
pub const FI_PEEK: u64 = sys::FI_PEEK as u64;
pub const FI_TRIGGER: u64 = sys::FI_TRIGGER as u64;
pub const FI_FENCE: u64 = sys::FI_FENCE as u64;
pub const FI_COMPLETION: u64 = sys::FI_COMPLETION as u64;
pub const FI_INJECT: u64 = sys::FI_INJECT as u64;
pub const FI_INJECT_COMPLETE: u64 = sys::FI_INJECT_COMPLETE as u64;
pub const FI_TRANSMIT_COMPLETE: u64 = sys::FI_TRANSMIT_COMPLETE as u64;
pub const FI_DELIVERY_COMPLETE: u64 = sys::FI_DELIVERY_COMPLETE as u64;
pub const FI_AFFINITY: u64 = sys::FI_AFFINITY as u64;
pub const FI_COMMIT_COMPLETE: u64 = 1 << 30;
pub const FI_MATCH_COMPLETE: u64 = 1 << 31;
pub const FI_HMEM: u64 = sys::FI_HMEM;
pub const FI_VARIABLE_MSG: u64 = sys::FI_VARIABLE_MSG;
pub const FI_RMA_PMEM: u64 = 1 << 49;
pub const FI_SOURCE_ERR: u64 = 1 << 50;
pub const FI_LOCAL_COMM: u64 = sys::FI_LOCAL_COMM;
pub const FI_REMOTE_COMM: u64 = sys::FI_REMOTE_COMM;
pub const FI_SHARED_AV: u64 = sys::FI_SHARED_AV;
pub const FI_RMA_EVENT: u64 = sys::FI_RMA_EVENT;
pub const FI_SOURCE: u64 = sys::FI_SOURCE;
pub const FI_NAMED_RX_CTX: u64 = sys::FI_NAMED_RX_CTX;
pub const FI_DIRECTED_RECV: u64 = sys::FI_DIRECTED_RECV;
pub const FI_COLLECTIVE: u64 = sys::FI_COLLECTIVE as u64;
pub const FI_MULTICAST: u64 = 1 << 5;
pub const FI_XPU: u64 = 1 << 47;
pub const FI_SELECTIVE_COMPLETION: u64 = sys::FI_SELECTIVE_COMPLETION;
pub const FI_CLAIM: u64 = sys::FI_CLAIM;
pub const FI_DISCARD: u64 = sys::FI_DISCARD;
/// Internal flag of the core asking for providers that utility layers can wrap.
pub const OFI_CORE_PROV_ONLY: u64 = 1 << 59;

/// Capabilities that select functionality (the app must ask for them).
pub const FI_PRIMARY_CAPS: u64 = FI_MSG
    | FI_RMA
    | FI_TAGGED
    | FI_ATOMIC
    | FI_MULTICAST
    | FI_NAMED_RX_CTX
    | FI_DIRECTED_RECV
    | FI_VARIABLE_MSG
    | FI_HMEM
    | FI_COLLECTIVE
    | FI_XPU;
/// Direction / access modifiers of the primary capabilities.
pub const FI_CAP_MODIFIERS: u64 =
    FI_READ | FI_WRITE | FI_SEND | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE;
/// Capabilities a provider may report without being asked.
pub const FI_SECONDARY_CAPS: u64 = FI_MULTI_RECV
    | FI_SOURCE
    | FI_RMA_EVENT
    | FI_TRIGGER
    | FI_FENCE
    | FI_LOCAL_COMM
    | FI_REMOTE_COMM
    | FI_SOURCE_ERR
    | FI_RMA_PMEM;

pub const FI_ORDER_NONE: u64 = 0;
pub const FI_ORDER_SAS: u64 = sys::FI_ORDER_SAS as u64;

pub const FI_MR_LOCAL: u64 = sys::FI_MR_LOCAL as u64;
pub const FI_MR_BASIC: i32 = sys::fi_mr_mode_FI_MR_BASIC as i32;
pub const FI_MR_SCALABLE: i32 = sys::fi_mr_mode_FI_MR_SCALABLE as i32;

pub const FI_EP_UNSPEC: u32 = sys::fi_ep_type_FI_EP_UNSPEC;
pub const FI_EP_DGRAM: u32 = sys::fi_ep_type_FI_EP_DGRAM;
pub const FI_EP_RDM: u32 = sys::fi_ep_type_FI_EP_RDM;

pub const FI_THREAD_UNSPEC: u32 = sys::fi_threading_FI_THREAD_UNSPEC;
pub const FI_THREAD_SAFE: u32 = sys::fi_threading_FI_THREAD_SAFE;
pub const FI_THREAD_ENDPOINT: u32 = sys::fi_threading_FI_THREAD_ENDPOINT;
pub const FI_PROGRESS_UNSPEC: u32 = sys::fi_progress_FI_PROGRESS_UNSPEC;
pub const FI_PROGRESS_AUTO: u32 = sys::fi_progress_FI_PROGRESS_AUTO;
pub const FI_PROGRESS_MANUAL: u32 = sys::fi_progress_FI_PROGRESS_MANUAL;
pub const FI_RM_UNSPEC: u32 = sys::fi_resource_mgmt_FI_RM_UNSPEC;
pub const FI_RM_ENABLED: u32 = sys::fi_resource_mgmt_FI_RM_ENABLED;
pub const FI_AV_UNSPEC: u32 = sys::fi_av_type_FI_AV_UNSPEC;
pub const FI_AV_MAP: u32 = sys::fi_av_type_FI_AV_MAP;
pub const FI_AV_TABLE: u32 = sys::fi_av_type_FI_AV_TABLE;

pub const FI_FORMAT_UNSPEC: u32 = sys::FI_FORMAT_UNSPEC;
pub const FI_SOCKADDR: u32 = sys::FI_SOCKADDR;
pub const FI_SOCKADDR_IN: u32 = sys::FI_SOCKADDR_IN;
pub const FI_SOCKADDR_IN6: u32 = sys::FI_SOCKADDR_IN6;

pub const FI_CQ_FORMAT_UNSPEC: u32 = sys::fi_cq_format_FI_CQ_FORMAT_UNSPEC;
pub const FI_CQ_FORMAT_CONTEXT: u32 = sys::fi_cq_format_FI_CQ_FORMAT_CONTEXT;
pub const FI_CQ_FORMAT_MSG: u32 = sys::fi_cq_format_FI_CQ_FORMAT_MSG;
pub const FI_CQ_FORMAT_DATA: u32 = sys::fi_cq_format_FI_CQ_FORMAT_DATA;
pub const FI_CQ_FORMAT_TAGGED: u32 = sys::fi_cq_format_FI_CQ_FORMAT_TAGGED;

pub const FI_WAIT_NONE: u32 = sys::fi_wait_obj_FI_WAIT_NONE;
pub const FI_WAIT_UNSPEC: u32 = sys::fi_wait_obj_FI_WAIT_UNSPEC;
pub const FI_WAIT_FD: u32 = sys::fi_wait_obj_FI_WAIT_FD;
pub const FI_WAIT_YIELD: u32 = sys::fi_wait_obj_FI_WAIT_YIELD;

/// `fi_av_insert` flag: report each address's status in the context array.
pub const FI_SYNC_ERR: u64 = sys::FI_SYNC_ERR;
/// `fi_mr_attr.iface` of host memory.
pub const FI_HMEM_SYSTEM: u32 = sys::fi_hmem_iface_FI_HMEM_SYSTEM;

/// `FI_ADDR_UNSPEC` / `FI_ADDR_NOTAVAIL` (both `(uint64_t)-1`).
pub const FI_ADDR_UNSPEC: u64 = u64::MAX;
pub const FI_ADDR_NOTAVAIL: u64 = u64::MAX;

/// API ≥ 2.0: a `mem_tag_format` below this is a format code, not a bit mask.
pub const FI_TAG_MAX_FORMAT: u64 = 1 << 16;
/// Format codes known in libfabric 2.x (`FI_TAG_BITS`, `FI_TAG_MPI`, `FI_TAG_CCL`).
pub const FI_TAG_CCL: u64 = 2;

/// Negative libfabric error codes, as returned by every call.
pub mod err {
    use crate::sys;
    pub const EINVAL: i32 = -(sys::FI_EINVAL as i32);
    pub const ENOSYS: i32 = -(sys::FI_ENOSYS as i32);
    pub const ENODATA: i32 = -(sys::FI_ENODATA as i32);
    pub const ENOMEM: i32 = -(sys::FI_ENOMEM as i32);
    pub const EAGAIN: i32 = -(sys::FI_EAGAIN as i32);
    pub const EBUSY: i32 = -(sys::FI_EBUSY as i32);
    pub const EAVAIL: i32 = -(sys::FI_EAVAIL as i32);
    pub const ETIMEDOUT: i32 = -(sys::FI_ETIMEDOUT as i32);
    pub const ENOPROTOOPT: i32 = -(sys::FI_ENOPROTOOPT as i32);
    pub const EMSGSIZE: i32 = -(sys::FI_EMSGSIZE as i32);
    pub const EOPBADSTATE: i32 = -(sys::FI_EOPBADSTATE as i32);
    pub const ETOOSMALL: i32 = -(sys::FI_ETOOSMALL as i32);
    pub const EADDRNOTAVAIL: i32 = -(sys::FI_EADDRNOTAVAIL as i32);
    pub const EOTHER: i32 = -(sys::FI_EOTHER as i32);
    pub const ECANCELED: i32 = -(sys::FI_ECANCELED as i32);
    pub const ENOENT: i32 = -(sys::FI_ENOENT as i32);
    pub const EBADFLAGS: i32 = -(sys::FI_EBADFLAGS as i32);
    pub const ENOCQ: i32 = -(sys::FI_ENOCQ as i32);
    /// Positive codes for `fi_cq_err_entry.err`.
    pub const POS_ETRUNC: i32 = sys::FI_ETRUNC as i32;
    pub const POS_ECANCELED: i32 = sys::FI_ECANCELED as i32;
    pub const POS_ENOMSG: i32 = sys::FI_ENOMSG as i32;
    pub const POS_EHOSTUNREACH: i32 = sys::FI_EHOSTUNREACH as i32;
    pub const POS_EIO: i32 = sys::FI_EIO as i32;
    pub const POS_EACCES: i32 = sys::FI_EACCES as i32;
}
