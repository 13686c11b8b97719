//! Reference counts that turn closing an object still in use into `-FI_EBUSY`.

use std::sync::atomic::{AtomicUsize, Ordering};

/// How many other objects depend on this one.
#[derive(Default, Debug)]
pub struct Refs(AtomicUsize);

impl Refs {
    /// One more dependent.
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
    /// One dependent fewer (never below zero).
    pub fn dec(&self) {
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| v.checked_sub(1));
    }
    /// True while something still depends on the object.
    pub fn busy(&self) -> bool {
        self.0.load(Ordering::Acquire) != 0
    }
}
