//! spray-fi: the cdylib libfabric dlopens. All `unsafe` of the project lives here.
//!
//! `fi_prov_ini` (in [`prov`]) hands libfabric our provider; [`getinfo`] answers
//! queries; [`fabric`] (the fabric and what it and its domains open) and [`ep`]
//! (endpoints) implement the objects, one module per class; [`io`] is the
//! UDP driver under the sans-IO engine; [`obj`] is the one place that casts
//! C pointers to objects; [`guard`] keeps panics from crossing into C. The
//! other top-level modules serve every class (see `ffi/README.md`, "Layout").
#![deny(unsafe_op_in_unsafe_fn)]
#![allow(clippy::missing_safety_doc)]
// `c"..."` literals need Rust 1.77; the workspace promises 1.75.
#![allow(clippy::manual_c_str_literals)]

pub mod addr;
pub mod assist;
pub mod auth;
pub mod check;
pub mod consts;
pub mod ep;
pub mod fabric;
pub mod getinfo;
pub mod guard;
pub mod identity;
pub mod iface;
pub mod io;
pub mod limits;
pub mod log;
pub mod nic;
pub mod nosys;
pub mod obj;
pub mod params;
pub mod prov;
pub mod refs;
pub mod stats;
pub mod sys;

pub use prov::fi_prov_ini;
