//! Deterministic random source for fault sampling.
//!
//! SplitMix64: tiny state (persisted across restarts so a device's fault
//! sequence continues where it stopped), fast enough to draw once per NAND
//! operation, and statistically adequate for Bernoulli/Poisson sampling.

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng { state: seed ^ 0x5DEE_CE66_D1CE_4E5B }
    }

    pub fn from_state(state: u64) -> Self {
        Rng { state }
    }

    pub fn state(&self) -> u64 {
        self.state
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    #[inline]
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, n).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// True with the probability encoded by `threshold` (see [`prob_threshold`]).
    /// Integer compare keeps the per-operation cost to one draw.
    #[inline]
    pub fn hit(&mut self, threshold: u64) -> bool {
        threshold != 0 && self.next_u64() < threshold
    }

    /// Poisson-distributed count (Knuth's method; the means used here are small).
    pub fn poisson(&mut self, mean: f64) -> u32 {
        if mean <= 0.0 {
            return 0;
        }
        if mean > 30.0 {
            // Normal approximation: adequate for counting corrected bits.
            let u1 = self.f64().max(1e-300);
            let u2 = self.f64();
            let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
            return (mean + z * mean.sqrt()).round().max(0.0) as u32;
        }
        let l = (-mean).exp();
        let mut k = 0u32;
        let mut p = self.f64();
        while p > l {
            k += 1;
            p *= self.f64();
        }
        k
    }
}

/// Encodes a probability as a u64 threshold for [`Rng::hit`].
pub fn prob_threshold(p: f64) -> u64 {
    if !(p > 0.0) {
        0
    } else if p >= 1.0 {
        u64::MAX
    } else {
        (p * 18_446_744_073_709_551_616.0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let mut c = Rng::new(8);
        let va: Vec<u64> = (0..16).map(|_| a.next_u64()).collect();
        let vb: Vec<u64> = (0..16).map(|_| b.next_u64()).collect();
        let vc: Vec<u64> = (0..16).map(|_| c.next_u64()).collect();
        assert_eq!(va, vb);
        assert_ne!(va, vc);
    }

    #[test]
    fn hit_rate_matches_probability() {
        let mut r = Rng::new(1);
        let t = prob_threshold(0.25);
        let n = 200_000;
        let hits = (0..n).filter(|_| r.hit(t)).count() as f64 / n as f64;
        assert!((hits - 0.25).abs() < 0.01, "{hits}");
        assert!(!r.hit(prob_threshold(0.0)));
    }

    #[test]
    fn poisson_mean() {
        let mut r = Rng::new(3);
        for mean in [0.5, 4.0, 50.0] {
            let n = 50_000;
            let s: u64 = (0..n).map(|_| r.poisson(mean) as u64).sum();
            let m = s as f64 / n as f64;
            assert!((m - mean).abs() < 0.05 * mean.max(1.0), "{mean} {m}");
        }
    }
}
