//! Opaque monotonic timestamps: the only notion of time the engine has.

use core::ops::{Add, Sub};
use core::time::Duration;

/// A point in monotonic time, in nanoseconds since an origin the caller picks
/// (the FFI driver: process start; the simulator: 0).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The origin.
    pub const ZERO: Instant = Instant(0);

    /// A timestamp `ns` nanoseconds after the origin.
    pub const fn from_nanos(ns: u64) -> Self {
        Instant(ns)
    }

    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(
            self.0
                .saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        )
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_since(earlier)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Instant::from_nanos(10);
        assert_eq!(t - Instant::from_nanos(20), Duration::ZERO);
        assert_eq!((t + Duration::from_nanos(5)).as_nanos(), 15);
        assert_eq!(
            (Instant::from_nanos(u64::MAX) + Duration::from_secs(1)).as_nanos(),
            u64::MAX
        );
    }
}
