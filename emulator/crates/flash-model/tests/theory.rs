//! Model checks against theory.

mod common;
use common::*;
use flash_model::theory::{wa_agarwal, wa_greedy};

/// Uniform random 4 KiB overwrites of a full page-mapped device settle at the
/// greedy-GC write amplification predicted for its over-provisioning.
#[test]
fn page_ftl_greedy_gc_matches_lambert_w_write_amplification() {
    for op in [0.1, 0.25] {
        let text = format!(
            r#"
name = "wa"
[nand]
cell = "slc"
page_size = 4096
pages_per_block = 128
planes = 1
endurance = 10000000
[nand.timing]
read_us = 0
program_us = [0]
erase_us = 0
[ftl]
type = "page"
capacity = "128M"
over_provisioning = {op}
journal_interval = 1000000
wear_level_threshold = 10000000
"#
        );
        let mut d = null_device(&text, None, 1);
        let u = 4096u64;
        let n = d.capacity() / u;
        let buf = vec![0u8; u as usize];
        let mut t = 0;
        for a in 0..n {
            t = d.write(t, a * u, &buf).unwrap();
        }
        let mut x = 0x1234_5678_9ABC_DEF0u64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // Warm up to steady state, then measure.
        for _ in 0..4 * n {
            t = d.write(t, rnd() % n * u, &buf).unwrap();
        }
        d.reset_stats();
        for _ in 0..4 * n {
            t = d.write(t, rnd() % n * u, &buf).unwrap();
        }
        let s = d.stats_json();
        let wa = s["ftl_write_amplification"].as_f64().unwrap();
        let rho = d.ftl.effective_op().unwrap();
        let theory = wa_greedy(rho);
        eprintln!("op {op}: effective rho {rho:.4}, measured WA {wa:.3}, Lambert-W {theory:.3}, Agarwal {:.3}", wa_agarwal(rho));
        assert!((wa - theory).abs() / theory < 0.10, "measured {wa} vs greedy theory {theory}");
    }
}

/// Random 4 KiB writes on the hybrid FTL: cheap while they stay within the
/// open allocation units, collapsing once they spread over more AUs than it
/// can keep open (each write then forces a full merge).
#[test]
fn hybrid_random_writes_collapse_beyond_open_aus() {
    let text = r#"
name = "sd"
[nand]
cell = "mlc"
page_size = 16384
pages_per_block = 128
planes = 2
endurance = 3000
[nand.timing]
read_us = 60
program_us = [600, 2400]
erase_us = 3000
bus_mb_s = 100
[ftl]
type = "hybrid"
capacity = "64M"
over_provisioning = 0.1
open_aus = 2
"#;
    let mut d = null_device(text, None, 2);
    let au = d.cfg.erase_unit_bytes();
    let aus = d.capacity() / au;
    let iops = |d: &mut flash_model::Device, span_aus: u64, n: u64| {
        let buf = vec![0u8; 4096];
        let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ span_aus;
        let mut t = d.clock;
        let t0 = t;
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let off = (x % (span_aus * au / 4096)) * 4096;
            t = d.write(t, off, &buf).unwrap();
        }
        n as f64 / ((t - t0) as f64 / 1e9)
    };
    // A full card: merges have real data to copy.
    let fill = vec![0u8; au as usize];
    let mut t = 0;
    for a in 0..aus {
        t = d.write(t, a * au, &fill).unwrap();
    }
    t = d.flush(t).unwrap();
    let _ = t;
    let inside = iops(&mut d, 2, 2000);
    let outside = iops(&mut d, aus, 300);
    // Expected ratio from the geometry: outside the open AUs almost every
    // write pays a full merge (copy of one AU: its pages read and programmed,
    // two planes working in parallel); inside, a merge is amortised over the
    // pages a log block holds.
    let t = &d.cfg.timing;
    let prog = (t.program_ns[0] + t.program_ns[1]) as f64 / 2.0;
    let pages = d.cfg.geo.sb_pages() as f64;
    let merge = pages * (t.read_ns as f64 + prog) / d.cfg.geo.planes as f64;
    let write = t.read_ns as f64 + prog;
    let p_miss = 1.0 - 2.0 / aus as f64;
    let predicted = (write + p_miss * merge) / (write + merge / pages);
    eprintln!("hybrid random 4K: {inside:.0} IOPS within open AUs, {outside:.1} IOPS over {aus} AUs; ratio {:.1}, predicted {predicted:.1}", inside / outside);
    assert!(inside / outside > predicted / 2.0, "ratio {} below half the predicted {predicted}", inside / outside);
    assert!(inside / outside > 10.0);
}
