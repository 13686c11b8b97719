//! `a * b / c` in 64-bit arithmetic whenever the product fits: a 128-bit
//! division is a library call (`__udivti3`, tens of cycles) and the pacing,
//! window and rate arithmetic runs for every packet.

/// `a * b / c`, rounded down, exact for every input; `c` = 0 counts as 1.
pub fn mul_div(a: u64, b: u64, c: u64) -> u128 {
    let c = c.max(1);
    match a.checked_mul(b) {
        Some(p) => u128::from(p / c),
        None => u128::from(a) * u128::from(b) / u128::from(c),
    }
}

#[cfg(test)]
mod tests {
    use super::mul_div;

    #[test]
    fn agrees_with_128_bit_arithmetic() {
        let vals = [
            0u64,
            1,
            3,
            999,
            1_000_000_000,
            12_345_678_901,
            u64::MAX / 3,
            u64::MAX - 1,
            u64::MAX,
        ];
        for &a in &vals {
            for &b in &vals {
                for &c in &vals[1..] {
                    let want = u128::from(a) * u128::from(b) / u128::from(c);
                    assert_eq!(mul_div(a, b, c), want, "{a} * {b} / {c}");
                }
            }
        }
        assert_eq!(mul_div(7, 3, 0), 21);
    }
}
