//! Request-size histogram per host operation (read, write, discard), as the
//! FUSE requests arrive: power-of-two buckets, lock-free. It shows what the
//! lab's block layer and the host's FUSE hand the device model (one 4 KiB
//! request per segment, or whole multi-block requests as an eMMC sees them).

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{json, Map, Value};

#[derive(Clone, Copy, Debug)]
pub enum Op {
    Read,
    Write,
    Discard,
}

const OPS: [(Op, &str); 3] = [(Op::Read, "read"), (Op::Write, "write"), (Op::Discard, "discard")];
const BUCKETS: usize = 64;

pub struct RequestSizes {
    counts: [[AtomicU64; BUCKETS]; 3],
}

impl Default for RequestSizes {
    fn default() -> Self {
        RequestSizes { counts: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))) }
    }
}

/// Bucket k holds sizes in [2^k, 2^(k+1)); an empty request goes to bucket 0.
fn bucket(bytes: u64) -> usize {
    if bytes == 0 {
        0
    } else {
        63 - bytes.leading_zeros() as usize
    }
}

impl RequestSizes {
    pub fn record(&self, op: Op, bytes: u64) {
        self.counts[op as usize][bucket(bytes)].fetch_add(1, Ordering::Relaxed);
    }

    pub fn reset(&self) {
        for c in self.counts.iter().flatten() {
            c.store(0, Ordering::Relaxed);
        }
    }

    /// `{"read": {"4096": n, "524288": m}, "write": {..}, "discard": {..}}`:
    /// each key is its bucket's lower bound in bytes; empty buckets are left out.
    pub fn json(&self) -> Value {
        let mut out = Map::new();
        for (op, name) in OPS {
            let mut m = Map::new();
            for (k, c) in self.counts[op as usize].iter().enumerate() {
                let n = c.load(Ordering::Relaxed);
                if n > 0 {
                    m.insert((1u64 << k).to_string(), json!(n));
                }
            }
            out.insert(name.to_string(), Value::Object(m));
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_fall_in_their_power_of_two_bucket_per_op() {
        let h = RequestSizes::default();
        h.record(Op::Write, 4096);
        h.record(Op::Write, 8191);
        h.record(Op::Write, 524288);
        h.record(Op::Read, 512);
        h.record(Op::Discard, 1 << 30);
        let j = h.json();
        assert_eq!(j["write"]["4096"], 2);
        assert_eq!(j["write"]["524288"], 1);
        assert_eq!(j["read"]["512"], 1);
        assert_eq!(j["discard"]["1073741824"], 1);
        assert!(j["write"].get("8192").is_none());
        h.reset();
        assert_eq!(h.json(), json!({"read": {}, "write": {}, "discard": {}}));
    }
}
