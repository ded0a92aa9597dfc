//! Deterministic pseudo-random numbers (SplitMix64): the one generator of the workspace, for
//! the simulator's fault injection and (re-exported by `dffs-testkit`) for every test, fuzz
//! target, torture and benchmark workload.
//!
//! Owns reproducibility: the same seed and the same sequence of calls give the same numbers.
//! It must never read entropy from the host and must never be used for anything that needs
//! unpredictability.

/// A SplitMix64 generator: one 64-bit word of state, advanced by a fixed odd increment and mixed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    state: u64,
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The SplitMix64 output function: a bijective scramble of 64 bits (also a good hash of a
/// key to a seed).
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator whose sequence depends only on `seed`.
    pub fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// The internal state, for saving a device and continuing the same sequence later.
    pub fn state(&self) -> u64 {
        self.state
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix(self.state)
    }

    /// A uniform float in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform integer in `[0, n)`; `0` when `n == 0` (multiply-shift reduction).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// An integer in `[0, n)` by modulo reduction; `0` when `n == 0`. Slightly biased for huge
    /// `n`; kept because the model and torture workloads were drawn with it (changing it would
    /// change every recorded sequence).
    pub fn below_mod(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A random element of `v` (drawn with [`Rng::below_mod`]); `None` when `v` is empty.
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> Option<&'a T> {
        if v.is_empty() {
            None
        } else {
            Some(&v[self.below_mod(v.len() as u64) as usize])
        }
    }

    /// Fills `buf` with random bytes (8 per draw, little-endian).
    pub fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }

    /// A standard normal deviate (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.unit().max(1e-300);
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (2.0 * core::f64::consts::PI * u2).cos()
    }

    /// `true` with probability `p`. Draws nothing when `p <= 0`, so a zero rate leaves the
    /// sequence untouched.
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        self.unit() < p
    }

    /// A random byte.
    pub fn byte(&mut self) -> u8 {
        (self.next_u64() >> 56) as u8
    }

    /// A draw from the binomial distribution: successes in `n` trials of probability `p`.
    /// Draws nothing when `p <= 0` or `n == 0`.
    pub fn binomial(&mut self, n: u64, p: f64) -> u64 {
        if n == 0 || p.is_nan() || p <= 0.0 {
            return 0;
        }
        if p >= 1.0 {
            return n;
        }
        let mean = n as f64 * p;
        if mean < 30.0 {
            // Inversion: walk the cumulative distribution from k = 0.
            let q = 1.0 - p;
            let mut prob = (n as f64 * (-p).ln_1p()).exp();
            let mut cdf = prob;
            let u = self.unit();
            let mut k = 0u64;
            while u > cdf && k < n {
                prob *= (n - k) as f64 / (k + 1) as f64 * (p / q);
                k += 1;
                cdf += prob;
                if prob == 0.0 && cdf < u {
                    // Numerical tail: the remaining mass is negligible.
                    break;
                }
            }
            k
        } else {
            // Normal approximation (Box-Muller) for heavy rates, where exactness does not matter.
            let u1 = self.unit().max(f64::MIN_POSITIVE);
            let u2 = self.unit();
            let z = (-2.0 * u1.ln()).sqrt() * (core::f64::consts::TAU * u2).cos();
            let k = (mean + z * (mean * (1.0 - p)).sqrt()).round();
            k.clamp(0.0, n as f64) as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_other_seed_other_sequence() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        let mut c = Rng::new(43);
        let va: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let vb: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let vc: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(va, vb);
        assert_ne!(va, vc);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = Rng::new(7);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            let v = r.below(10);
            assert!(v < 10);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(r.below(0), 0);
    }

    #[test]
    fn binomial_mean_is_close_to_np() {
        let mut r = Rng::new(1);
        for &(n, p) in &[(4096u64, 1e-3), (4096, 0.05), (100, 0.5)] {
            let trials = 4000;
            let sum: u64 = (0..trials).map(|_| r.binomial(n, p)).sum();
            let mean = sum as f64 / trials as f64;
            let expect = n as f64 * p;
            assert!(
                (mean - expect).abs() < 0.1 * expect + 0.05,
                "n={n} p={p}: mean {mean}, expected {expect}"
            );
        }
        assert_eq!(r.binomial(4096, 0.0), 0);
        assert_eq!(r.binomial(10, 1.0), 10);
    }

    #[test]
    fn zero_chance_draws_nothing() {
        let mut a = Rng::new(5);
        let b = a.clone();
        assert!(!a.chance(0.0));
        assert_eq!(a.binomial(1000, 0.0), 0);
        assert_eq!(a, b);
    }
}
