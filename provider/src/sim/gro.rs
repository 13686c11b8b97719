//! What a receive with UDP GRO hands over: the datagrams a sender queued
//! back to back, coalesced into one buffer with their segment size (the
//! input of `Engine::handle_segments`), for tests that drive engines as the
//! FFI driver does.

/// Most segments the kernel coalesces into one datagram.
pub const GRO_MAX_SEGS: usize = 64;

/// `pkts`, in order and from one source, as GRO would return them: runs of
/// datagrams of one length (the last of a run may be shorter, and ends it),
/// at most `GRO_MAX_SEGS` each; each run as (bytes, segment size).
pub fn coalesce<'a>(pkts: impl IntoIterator<Item = &'a [u8]>) -> Vec<(Vec<u8>, usize)> {
    let mut out: Vec<(Vec<u8>, usize)> = Vec::new();
    let mut open = false;
    for p in pkts {
        match out.last_mut() {
            Some((d, g))
                if open && !p.is_empty() && d.len() / *g < GRO_MAX_SEGS && p.len() <= *g =>
            {
                d.extend_from_slice(p);
                open = p.len() == *g;
            }
            _ => {
                out.push((p.to_vec(), p.len()));
                open = !p.is_empty();
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::coalesce;

    #[test]
    fn runs_of_one_length_end_at_a_shorter_one() {
        let p = |n: usize, b: u8| vec![b; n];
        let pkts = [
            p(4, 1),
            p(4, 2),
            p(3, 3),
            p(4, 4),
            p(5, 5),
            p(0, 6),
            p(2, 7),
        ];
        let got = coalesce(pkts.iter().map(|v| v.as_slice()));
        let want: Vec<(Vec<u8>, usize)> = vec![
            (vec![1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3], 4),
            (vec![4, 4, 4, 4], 4),
            (vec![5; 5], 5),
            (vec![], 0),
            (vec![7, 7], 2),
        ];
        assert_eq!(got, want);
        let many: Vec<Vec<u8>> = (0..130).map(|_| p(2, 0)).collect();
        let runs = coalesce(many.iter().map(|v| v.as_slice()));
        assert_eq!(
            runs.iter().map(|(d, _)| d.len() / 2).collect::<Vec<_>>(),
            [64, 64, 2]
        );
    }
}
