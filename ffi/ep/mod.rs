//! Endpoints (`fid_ep`): the object and its data-transfer ops tables.

pub mod atomic;
pub mod endpoint;
pub mod hold;
pub mod msg;
pub mod ops;
pub mod rma;
pub mod state;
pub mod tagged;
