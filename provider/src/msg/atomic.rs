//! Atomic operations: wire codes of ops and datatypes, and the element-wise
//! computation the target applies to registered memory.

use super::op::{AtomicCall, AtomicOp, AtomicType};

/// Every atomic op, indexed by its wire code (libfabric's `enum fi_op` value).
pub const ATOMIC_OPS: [AtomicOp; 19] = [
    AtomicOp::Min,
    AtomicOp::Max,
    AtomicOp::Sum,
    AtomicOp::Prod,
    AtomicOp::Lor,
    AtomicOp::Land,
    AtomicOp::Bor,
    AtomicOp::Band,
    AtomicOp::Lxor,
    AtomicOp::Bxor,
    AtomicOp::Read,
    AtomicOp::Write,
    AtomicOp::Cswap,
    AtomicOp::CswapNe,
    AtomicOp::CswapLe,
    AtomicOp::CswapLt,
    AtomicOp::CswapGe,
    AtomicOp::CswapGt,
    AtomicOp::Mswap,
];

/// Every atomic datatype, indexed by its wire code (libfabric's `enum fi_datatype` value).
pub const ATOMIC_TYPES: [AtomicType; 10] = [
    AtomicType::I8,
    AtomicType::U8,
    AtomicType::I16,
    AtomicType::U16,
    AtomicType::I32,
    AtomicType::U32,
    AtomicType::I64,
    AtomicType::U64,
    AtomicType::F32,
    AtomicType::F64,
];

/// Wire code of `op`.
pub fn op_code(op: AtomicOp) -> u8 {
    ATOMIC_OPS.iter().position(|&o| o == op).unwrap_or(0) as u8
}

/// The op for a wire code, if known.
pub fn op_from_code(c: u8) -> Option<AtomicOp> {
    ATOMIC_OPS.get(c as usize).copied()
}

/// Wire code of `dt`.
pub fn type_code(dt: AtomicType) -> u8 {
    ATOMIC_TYPES.iter().position(|&t| t == dt).unwrap_or(0) as u8
}

/// The datatype for a wire code, if known.
pub fn type_from_code(c: u8) -> Option<AtomicType> {
    ATOMIC_TYPES.get(c as usize).copied()
}

/// True when `op` sends no operands (the target ignores them: `FI_ATOMIC_READ`).
pub fn op_has_operands(op: AtomicOp) -> bool {
    op != AtomicOp::Read
}

/// The call kind an op arrives as, from the sub-header's fetch / compare bits.
pub fn call_of(fetch: bool, compare: bool) -> AtomicCall {
    if compare {
        AtomicCall::Compare
    } else if fetch {
        AtomicCall::Fetch
    } else {
        AtomicCall::Plain
    }
}

/// Integer element rule: wrapping arithmetic, bitwise and logical ops.
macro_rules! int_rule {
    ($name:ident, $t:ty) => {
        fn $name(op: AtomicOp, t: $t, o: $t, c: $t) -> $t {
            use AtomicOp::*;
            match op {
                Min => t.min(o),
                Max => t.max(o),
                Sum => t.wrapping_add(o),
                Prod => t.wrapping_mul(o),
                Lor => ((t != 0) || (o != 0)) as $t,
                Land => ((t != 0) && (o != 0)) as $t,
                Bor => t | o,
                Band => t & o,
                Lxor => ((t != 0) ^ (o != 0)) as $t,
                Bxor => t ^ o,
                Read => t,
                Write => o,
                Cswap => swap_if(c == t, t, o),
                CswapNe => swap_if(c != t, t, o),
                CswapLe => swap_if(c <= t, t, o),
                CswapLt => swap_if(c < t, t, o),
                CswapGe => swap_if(c >= t, t, o),
                CswapGt => swap_if(c > t, t, o),
                Mswap => (o & c) | (t & !c),
            }
        }
    };
}

/// Float element rule: arithmetic, min/max and compares; bitwise ops never reach it
/// (`atomic_valid` refuses them) and leave the target unchanged.
macro_rules! float_rule {
    ($name:ident, $t:ty) => {
        fn $name(op: AtomicOp, t: $t, o: $t, c: $t) -> $t {
            use AtomicOp::*;
            match op {
                Min => swap_if(o < t, t, o),
                Max => swap_if(o > t, t, o),
                Sum => t + o,
                Prod => t * o,
                Write => o,
                Cswap => swap_if(c == t, t, o),
                CswapNe => swap_if(c != t, t, o),
                CswapLe => swap_if(c <= t, t, o),
                CswapLt => swap_if(c < t, t, o),
                CswapGe => swap_if(c >= t, t, o),
                CswapGt => swap_if(c > t, t, o),
                Read | Lor | Land | Bor | Band | Lxor | Bxor | Mswap => t,
            }
        }
    };
}

fn swap_if<T>(cond: bool, t: T, o: T) -> T {
    if cond {
        o
    } else {
        t
    }
}

int_rule!(rule_i8, i8);
int_rule!(rule_u8, u8);
int_rule!(rule_i16, i16);
int_rule!(rule_u16, u16);
int_rule!(rule_i32, i32);
int_rule!(rule_u32, u32);
int_rule!(rule_i64, i64);
int_rule!(rule_u64, u64);
float_rule!(rule_f32, f32);
float_rule!(rule_f64, f64);

/// Element `i` of `b` as a little-endian `N`-byte value; zero when `b` is too short
/// (the operands of `FI_ATOMIC_READ`, the comparands of non-compare ops).
fn elem<const N: usize>(b: &[u8], i: usize) -> [u8; N] {
    let mut a = [0u8; N];
    if let Some(s) = b.get(i * N..(i + 1) * N) {
        a.copy_from_slice(s);
    }
    a
}

/// Apply `op` element-wise over `count` elements of type `rule`'s.
macro_rules! apply_with {
    ($t:ty, $rule:ident, $op:expr, $old:expr, $opnd:expr, $cmp:expr, $out:expr) => {{
        const N: usize = core::mem::size_of::<$t>();
        for (i, dst) in $out.chunks_exact_mut(N).enumerate() {
            let t = <$t>::from_le_bytes(elem::<N>($old, i));
            let o = <$t>::from_le_bytes(elem::<N>($opnd, i));
            let c = <$t>::from_le_bytes(elem::<N>($cmp, i));
            dst.copy_from_slice(&$rule($op, t, o, c).to_le_bytes());
        }
    }};
}

/// Compute the new target values: `out[i] = op(old[i], operand[i], compare[i])` for
/// every element of `dt` in `out` (`old` and `out` have the same length; `operand` and
/// `compare` may be empty when the op takes none). Values are the application's
/// little-endian host representation; integer arithmetic wraps.
pub fn apply(
    op: AtomicOp,
    dt: AtomicType,
    old: &[u8],
    operand: &[u8],
    compare: &[u8],
    out: &mut [u8],
) {
    match dt {
        AtomicType::I8 => apply_with!(i8, rule_i8, op, old, operand, compare, out),
        AtomicType::U8 => apply_with!(u8, rule_u8, op, old, operand, compare, out),
        AtomicType::I16 => apply_with!(i16, rule_i16, op, old, operand, compare, out),
        AtomicType::U16 => apply_with!(u16, rule_u16, op, old, operand, compare, out),
        AtomicType::I32 => apply_with!(i32, rule_i32, op, old, operand, compare, out),
        AtomicType::U32 => apply_with!(u32, rule_u32, op, old, operand, compare, out),
        AtomicType::I64 => apply_with!(i64, rule_i64, op, old, operand, compare, out),
        AtomicType::U64 => apply_with!(u64, rule_u64, op, old, operand, compare, out),
        AtomicType::F32 => apply_with!(f32, rule_f32, op, old, operand, compare, out),
        AtomicType::F64 => apply_with!(f64, rule_f64, op, old, operand, compare, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for (i, &op) in ATOMIC_OPS.iter().enumerate() {
            assert_eq!(op_code(op) as usize, i);
            assert_eq!(op_from_code(i as u8), Some(op));
        }
        for (i, &dt) in ATOMIC_TYPES.iter().enumerate() {
            assert_eq!(type_code(dt) as usize, i);
            assert_eq!(type_from_code(i as u8), Some(dt));
        }
        assert_eq!(op_from_code(19), None);
        assert_eq!(type_from_code(10), None);
    }

    #[test]
    fn mswap_and_wrapping() {
        let mut out = [0u8; 2];
        apply(
            AtomicOp::Mswap,
            AtomicType::U8,
            &[0xF0, 0xFF],
            &[0x0F, 0x00],
            &[0x0F, 0xF0],
            &mut out,
        );
        assert_eq!(out, [0xFF, 0x0F]);
        let mut out = [0u8; 1];
        apply(AtomicOp::Sum, AtomicType::I8, &[127], &[1], &[], &mut out);
        assert_eq!(out, [0x80]);
    }
}
