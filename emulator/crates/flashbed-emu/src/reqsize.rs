//! Request-size histogram per host operation (read, write, discard), as the
//! FUSE requests arrive: power-of-two buckets, lock-free. It shows what the
//! lab's block layer and the host's FUSE hand the device model (one 4 KiB
//! request per segment, or whole multi-block requests as an eMMC sees them).
//! Writes also count how many started where the previous write ended: the
//! sequential share tells a filesystem that turns random writes into a log
//! (copy-on-write, log-structured) from one that writes in place.

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
    /// End of the latest write (byte offset); u64::MAX before the first.
    last_write_end: AtomicU64,
    seq_writes: AtomicU64,
    seq_write_bytes: AtomicU64,
}

impl Default for RequestSizes {
    fn default() -> Self {
        RequestSizes {
            counts: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            last_write_end: AtomicU64::new(u64::MAX),
            seq_writes: AtomicU64::new(0),
            seq_write_bytes: AtomicU64::new(0),
        }
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

    /// A write of `bytes` at byte offset `off`: its size, and whether it
    /// continued the previous write.
    pub fn record_write(&self, off: u64, bytes: u64) {
        self.record(Op::Write, bytes);
        if self.last_write_end.swap(off.saturating_add(bytes), Ordering::Relaxed) == off {
            self.seq_writes.fetch_add(1, Ordering::Relaxed);
            self.seq_write_bytes.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    pub fn reset(&self) {
        for c in self.counts.iter().flatten() {
            c.store(0, Ordering::Relaxed);
        }
        self.seq_writes.store(0, Ordering::Relaxed);
        self.seq_write_bytes.store(0, Ordering::Relaxed);
    }

    /// `{"sequential_writes": n, "sequential_write_bytes": b}`: writes that
    /// started where the previous one ended.
    pub fn pattern_json(&self) -> Value {
        json!({"sequential_writes": self.seq_writes.load(Ordering::Relaxed),
               "sequential_write_bytes": self.seq_write_bytes.load(Ordering::Relaxed)})
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

    #[test]
    fn a_write_that_continues_the_last_one_is_sequential() {
        let h = RequestSizes::default();
        h.record_write(0, 4096); // the first: nothing before it
        h.record_write(4096, 4096); // continues
        h.record_write(65536, 8192); // a jump
        h.record_write(73728, 4096); // continues
        h.record_write(4096, 4096); // back: not sequential
        let p = h.pattern_json();
        assert_eq!(p["sequential_writes"], 2);
        assert_eq!(p["sequential_write_bytes"], 8192);
        assert_eq!(h.json()["write"]["4096"], 4);
        h.reset();
        assert_eq!(h.pattern_json()["sequential_writes"], 0);
    }
}
