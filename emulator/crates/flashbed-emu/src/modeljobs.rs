//! fio's queue-depth-1 jobs on the device model in this process, in the model's own
//! time: what a virtual-time lab measures of them without the lab. In virtual time each
//! request completes when the model says and the guest's CPU costs no time (no CPU cost
//! profile), so fio's next request is submitted at the completion of the last; a request
//! larger than the lab's block layer passes on reaches the device as pieces submitted at
//! once (lab patch 0003: at most 512 KiB each), each arriving when the device is free
//! (`Shared::io` in virtual time). flashbed refits a preset variant's firmware times with
//! this (devices/refit.py), checked against the lab by `flashbed bench refit`.
//!
//! Jobs (JSON, one after another on one fresh device): `name`, `rw` (read, write,
//! randread, randwrite), `bs`, `offset` and `size` in bytes, `runtime` (seconds of model
//! time, time-based; 0: the job moves `size` bytes once), `number_ios` (random jobs: this
//! many requests, 0: none), `seed` (random offsets: uniform over the `size / bs` blocks).

use flash_model::rng::Rng;
use flash_model::Device;
use serde_json::{json, Map, Value};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Rw {
    Read,
    Write,
    RandRead,
    RandWrite,
}

pub struct Job {
    name: String,
    rw: Rw,
    bs: u64,
    offset: u64,
    size: u64,
    runtime_ns: u64,
    ios: u64,
    seed: u64,
}

fn field_u64(j: &Value, k: &str, default: Option<u64>) -> Result<u64, String> {
    match j.get(k) {
        None => default.ok_or_else(|| format!("job has no `{k}`")),
        Some(v) => v.as_u64().ok_or_else(|| format!("job `{k}` must be a non-negative integer")),
    }
}

/// The jobs of a JSON array (see the module doc).
pub fn parse(text: &str) -> Result<Vec<Job>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("--jobs is not JSON: {e}"))?;
    let arr = v.as_array().ok_or("--jobs must be a JSON array of jobs")?;
    arr.iter()
        .map(|j| {
            let rw = match j.get("rw").and_then(Value::as_str) {
                Some("read") => Rw::Read,
                Some("write") => Rw::Write,
                Some("randread") => Rw::RandRead,
                Some("randwrite") => Rw::RandWrite,
                other => return Err(format!("job `rw` {other:?} is not read, write, randread or randwrite")),
            };
            let runtime = j.get("runtime").map_or(Some(0.0), Value::as_f64).ok_or("job `runtime` must be a number")?;
            let job = Job {
                name: j.get("name").and_then(Value::as_str).ok_or("job has no `name`")?.to_string(),
                rw,
                bs: field_u64(j, "bs", None)?,
                offset: field_u64(j, "offset", Some(0))?,
                size: field_u64(j, "size", None)?,
                runtime_ns: (runtime * 1e9) as u64,
                ios: field_u64(j, "number_ios", Some(0))?,
                seed: field_u64(j, "seed", Some(1))?,
            };
            if job.bs == 0 || job.size < job.bs {
                return Err(format!("job {}: `size` must hold at least one `bs` request", job.name));
            }
            Ok(job)
        })
        .collect()
}

/// Runs the jobs one after another from model time 0; per job: requests, bytes, seconds of
/// model time, IOPS and MB/s (10^6 bytes, as fio's figures in flashbed).
pub fn run(d: &mut Device, jobs: &[Job], max_request: u64) -> Result<Value, String> {
    let mut out = Map::new();
    let mut t = d.clock;
    let mut buf = vec![0u8; max_request as usize];
    for job in jobs {
        if job.offset + job.size > d.capacity() {
            return Err(format!("job {}: offset + size is past the device's {} bytes", job.name, d.capacity()));
        }
        let blocks = job.size / job.bs;
        // the model's own generator (fio's is not reproduced: the figures are rates over
        // thousands of uniform requests)
        let mut rng = Rng::new(job.seed);
        let start = t;
        let (mut ios, mut bytes, mut next) = (0u64, 0u64, 0u64);
        loop {
            let elapsed = t - start;
            let done_by_time = job.runtime_ns > 0 && elapsed >= job.runtime_ns;
            let done_by_ios = job.ios > 0 && ios >= job.ios;
            let sequential = matches!(job.rw, Rw::Read | Rw::Write);
            let done_by_size = job.runtime_ns == 0 && job.ios == 0 && bytes >= job.size;
            if done_by_time || done_by_ios || done_by_size {
                break;
            }
            let block = if sequential {
                let b = next % blocks;
                next += 1;
                b
            } else {
                rng.next_u64() % blocks
            };
            let off = job.offset + block * job.bs;
            let write = matches!(job.rw, Rw::Write | Rw::RandWrite);
            // the pieces of one request are submitted together; each arrives when the device
            // is free (virtual time: `Shared::io`)
            let mut done = t;
            let mut pos = 0;
            while pos < job.bs {
                let n = (job.bs - pos).min(max_request);
                let at = t.max(d.clock);
                let piece = &mut buf[..n as usize];
                let end = if write { d.write(at, off + pos, piece) } else { d.read(at, off + pos, piece) };
                done = done.max(end.map_err(|e| format!("job {}: the model failed a request: {e:?}", job.name))?);
                pos += n;
            }
            t = done;
            ios += 1;
            bytes += job.bs;
        }
        let secs = (t - start) as f64 / 1e9;
        let rate = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
        out.insert(
            job.name.clone(),
            json!({"ios": ios, "bytes": bytes, "seconds": secs, "iops": rate(ios as f64),
                   "bandwidth": rate(bytes as f64) / 1e6}),
        );
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use flash_model::config::{block_of, parse_preset};
    use flash_model::store::NullStore;

    const FIXED: &str = r#"
[nand]
cell = "slc"
page_size = 4096
pages_per_block = 64
endurance = 100000
[nand.timing]
read_us = 50
program_us = [200]
erase_us = 1000
[ftl]
type = "page"
capacity = "16M"
read_overhead_us = 100
"#;

    fn device() -> Device {
        let cfg = block_of(parse_preset(FIXED, "t.toml", "t", None).unwrap()).unwrap();
        Device::new(cfg, Box::new(NullStore), 1)
    }

    #[test]
    fn a_qd1_read_takes_its_modelled_latency() {
        let mut d = device();
        let jobs = parse(r#"[{"name": "fill", "rw": "write", "bs": 1048576, "size": 4194304},
                              {"name": "r", "rw": "randread", "bs": 4096, "size": 4194304, "number_ios": 1000}]"#)
            .unwrap();
        let out = run(&mut d, &jobs, 512 << 10).unwrap();
        assert_eq!(out["fill"]["bytes"], 4 << 20);
        assert_eq!(out["r"]["ios"], 1000);
        // no bus, no host bus: a read is the command's firmware time and tR (the first one
        // also waits for the fill's last program)
        let iops = out["r"]["iops"].as_f64().unwrap();
        assert!((iops / (1e6 / 150.0) - 1.0).abs() < 0.002, "{iops}");
    }

    #[test]
    fn a_time_based_job_runs_its_model_time() {
        let mut d = device();
        let jobs = parse(r#"[{"name": "r", "rw": "read", "bs": 65536, "size": 1048576, "runtime": 0.5}]"#).unwrap();
        let out = run(&mut d, &jobs, 512 << 10).unwrap();
        let secs = out["r"]["seconds"].as_f64().unwrap();
        assert!((0.5..0.51).contains(&secs), "{secs}");
        for bad in [r#"{}"#, r#"[{"name": "x", "rw": "trim", "bs": 1, "size": 1}]"#,
                    r#"[{"name": "x", "rw": "read", "bs": 8192, "size": 4096}]"#] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
