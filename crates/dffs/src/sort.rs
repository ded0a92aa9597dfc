//! The one sort the file system uses.
//!
//! Owns ordering the short lists the file system sorts (directory entries of a bucket, dirty
//! blocks and written extents of a file, committed transaction ids at mount). It exists for
//! code size: `core`'s sorts are fast but each use instantiates 1 to 4 KiB of code, about
//! 20 KiB in all on a Cortex-M4 firmware, where this heapsort is one non-generic routine of a
//! few hundred bytes plus a small closure per caller. It must never allocate, and it is not
//! stable: callers sort by keys that are unique, or whose ties are interchangeable.

/// Sorts `v` in place by `key`, ascending, in O(n log n) comparisons.
pub(crate) fn sort_by_key<T, K: Ord>(v: &mut [T], mut key: impl FnMut(&T) -> K) {
    let n = v.len();
    heapsort(n, &mut |op, a, b| match op {
        Op::Less => key(&v[a]) < key(&v[b]),
        Op::Swap => {
            v.swap(a, b);
            false
        }
    });
}

/// Sorts `v` in place, ascending.
pub(crate) fn sort<T: Ord>(v: &mut [T]) {
    let n = v.len();
    heapsort(n, &mut |op, a, b| match op {
        Op::Less => v[a] < v[b],
        Op::Swap => {
            v.swap(a, b);
            false
        }
    });
}

/// What [`heapsort`] asks of the list: whether item `a` is less than item `b`, or to swap them.
#[derive(Clone, Copy)]
enum Op {
    Less,
    Swap,
}

/// Heapsort of a list of `n` items reached only through `at` (so one copy of this code serves
/// every element type).
fn heapsort(n: usize, at: &mut dyn FnMut(Op, usize, usize) -> bool) {
    for root in (0..n / 2).rev() {
        sift_down(root, n, at);
    }
    for end in (1..n).rev() {
        at(Op::Swap, 0, end);
        sift_down(0, end, at);
    }
}

/// Moves item `root` down the max-heap of the first `end` items until both children are
/// not greater.
fn sift_down(mut root: usize, end: usize, at: &mut dyn FnMut(Op, usize, usize) -> bool) {
    loop {
        let mut child = 2 * root + 1;
        if child >= end {
            return;
        }
        if child + 1 < end && at(Op::Less, child, child + 1) {
            child += 1;
        }
        if !at(Op::Less, root, child) {
            return;
        }
        at(Op::Swap, root, child);
        root = child;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    proptest! {
        /// The result is the same multiset as core's sort gives, in the same order of keys.
        #[test]
        fn sorts_like_core(mut v in proptest::collection::vec((0u8..20, any::<u16>()), 0..300)) {
            let mut want = v.clone();
            want.sort_by_key(|x| x.0);
            sort_by_key(&mut v, |x| x.0);
            let keys: Vec<u8> = v.iter().map(|x| x.0).collect();
            let want_keys: Vec<u8> = want.iter().map(|x| x.0).collect();
            prop_assert_eq!(keys, want_keys);
            let mut a = v.clone();
            a.sort();
            want.sort();
            prop_assert_eq!(a, want);
        }

        #[test]
        fn sorts_plain_values(mut v in proptest::collection::vec(any::<u32>(), 0..300)) {
            let mut want = v.clone();
            want.sort_unstable();
            sort(&mut v);
            prop_assert_eq!(v, want);
        }
    }
}
