//! The SLC-mode write buffer of the page FTL: host writes land in it at SLC
//! speed while it has room, run at the array's sustained (fold-bound) rate
//! once it is full, it drains when the device idles, and what it holds is
//! durable like any other programmed, committed page.

mod common;
use common::*;
use flash_model::Device;

const MIB: u64 = 1 << 20;

/// One 16 KiB-page MLC plane, 64 pages a block (1 MiB), a 4 MiB buffer.
fn preset(slc: bool) -> String {
    let text = r#"
name = "slc-buffer"
[nand]
cell = "mlc"
page_size = 16384
pages_per_block = 64
planes = 1
endurance = 3000
protect_paired_pages = true
[nand.timing]
read_us = 60
program_us = [600, 2600]
erase_us = 3500
bus_mb_s = 200
[ftl]
type = "page"
capacity = "64M"
over_provisioning = 0.07
map_unit = 4096
cache = "512K"
"#
    .to_string();
    if slc {
        text.replace("bus_mb_s = 200", "bus_mb_s = 200\nslc_program_us = 300")
            .replace("cache = \"512K\"", "cache = \"512K\"\nslc_cache = \"4M\"\nslc_idle_ms = 10")
    } else {
        text
    }
}

/// Writes `len` bytes from `off` in 1 MiB requests at queue depth 1 from
/// `t`; returns (end, MB/s).
fn stream(d: &mut Device, t: u64, off: u64, len: u64) -> (u64, f64) {
    let buf = vec![0x5au8; MIB as usize];
    let mut now = t;
    let mut a = off;
    while a < off + len {
        now = d.write(now, a, &buf).unwrap();
        a += MIB;
    }
    (now, len as f64 / ((now - t) as f64 / 1e9) / 1e6)
}

fn stat(d: &Device, key: &str) -> u64 {
    d.stats_json()["slc"][key].as_u64().unwrap()
}

/// The array's sustained rate with a full buffer, from the part's times:
/// each 16 KiB page is programmed in SLC mode, read back and programmed
/// into the array (lower and upper pages alternate), on one plane.
fn fold_bound_mb_s() -> f64 {
    let xfer = 16384.0 / 200e6 * 1e9;
    let per_page_ns = (300e3 + xfer) + (60e3 + xfer) + ((600e3 + 2600e3) / 2.0 + xfer);
    16384.0 / per_page_ns * 1e3
}

#[test]
fn writes_fill_the_buffer_fast_then_run_at_the_sustained_rate() {
    let mut d = null_device(&preset(true), None, 1);
    let (t, burst) = stream(&mut d, 0, 0, 3 * MIB);
    let (_, sustained) = stream(&mut d, t, 3 * MIB, 24 * MIB);
    let bound = fold_bound_mb_s();
    // in the buffer: SLC programs, well above the array's rate
    assert!(burst > 2.0 * sustained, "burst {burst:.1} MB/s vs sustained {sustained:.1} MB/s");
    // past it: every page programmed twice and read once, the fold's bound
    // (less the buffer blocks' erases)
    assert!(sustained <= bound * 1.02 && sustained > bound * 0.85, "sustained {sustained:.2} MB/s vs fold bound {bound:.2}");
    assert!(stat(&d, "folds") > 0);
    d.ftl.check(&d.media).unwrap();
}

#[test]
fn with_a_full_buffer_every_request_sees_the_sustained_rate() {
    // the foreground fold is paced a step per page the host fills: 1 MiB
    // requests take about the same time each, no request a whole fold's
    // stall (a median of request times tells the rate, as the probe reads it)
    let mut d = null_device(&preset(true), None, 1);
    let (mut t, _) = stream(&mut d, 0, 0, 8 * MIB);
    let buf = vec![0u8; MIB as usize];
    let mut lat = Vec::new();
    for i in 8..32 {
        let done = d.write(t, i * MIB, &buf).unwrap();
        lat.push(done - t);
        t = done;
    }
    lat.sort();
    let (median, max) = (lat[lat.len() / 2], lat[lat.len() - 1]);
    let mean = lat.iter().sum::<u64>() / lat.len() as u64;
    assert!(max < median * 3 / 2, "median {median} ns, max {max} ns");
    assert!(mean < median * 11 / 10 && median < mean * 11 / 10, "median {median} ns, mean {mean} ns");
}

#[test]
fn without_a_buffer_the_array_rate_is_unchanged() {
    let mut d = null_device(&preset(false), None, 1);
    let (_, rate) = stream(&mut d, 0, 0, 24 * MIB);
    assert_eq!(stat(&d, "page_programs"), 0);
    assert_eq!(stat(&d, "bytes"), 0);
    // straight to MLC: faster than through a full buffer, slower than SLC
    let mut s = null_device(&preset(true), None, 1);
    let (t, _) = stream(&mut s, 0, 0, 8 * MIB);
    let (_, through_full) = stream(&mut s, t, 8 * MIB, 16 * MIB);
    assert!(rate > 1.1 * through_full, "direct {rate:.2} vs through a full buffer {through_full:.2}");
}

#[test]
fn the_buffer_drains_when_the_device_idles() {
    let mut d = null_device(&preset(true), None, 1);
    let (t, _) = stream(&mut d, 0, 0, 8 * MIB);
    let (t, full) = stream(&mut d, t, 8 * MIB, 2 * MIB);
    let folds = stat(&d, "folds");
    // a short pause (below the idle time) folds nothing
    let mut b = vec![0u8; 4096];
    let t = d.read(t + 5_000_000, 0, &mut b).unwrap();
    assert_eq!(stat(&d, "folds"), folds);
    // two seconds of idleness: the buffer is folded away, and the next burst
    // runs at SLC speed again
    let t = d.read(t + 2_000_000_000, 0, &mut b).unwrap();
    assert!(stat(&d, "folds") > folds, "no fold while idle");
    assert!(d.stats_json()["background_busy_ns"].as_u64().unwrap() > 0, "idle folds are background work");
    let (_, again) = stream(&mut d, t, 10 * MIB, 2 * MIB);
    assert!(again > 2.0 * full, "after idling {again:.1} MB/s vs full buffer {full:.1} MB/s");
    d.ftl.check(&d.media).unwrap();
}

#[test]
fn a_request_during_idle_folding_waits_for_one_step_not_a_whole_fold() {
    let mut d = null_device(&preset(true), None, 1);
    let (t, _) = stream(&mut d, 0, 0, 6 * MIB);
    let mut b = vec![0u8; 4096];
    // idle long enough to start folding (10 ms), not to fold a whole
    // buffer superblock (2 MiB, ~300 ms): the read arrives mid-fold and
    // waits for the step under way (a page read and an array page program,
    // ~2 ms), not for the rest of the fold
    let arrive = t + 10_000_000 + 50_000_000;
    let done = d.read(arrive, 0, &mut b).unwrap();
    assert!(done - arrive < 5_000_000, "waited {} us", (done - arrive) / 1000);
    assert!(d.stats_json()["nand"]["fold_page_programs"].as_u64().unwrap() > 10, "no folding while idle");
    d.ftl.check(&d.media).unwrap();
}

fn slc_blocks(d: &Device) -> Vec<u32> {
    let first = d.cfg.geo.data_rows - d.cfg.slc_sbs();
    let sbt = d.ftl.sbt();
    (first..d.cfg.geo.data_rows).flat_map(|sb| (0..sbt.planes).map(move |p| sbt.member(sb, p))).collect()
}

#[test]
fn data_in_the_buffer_is_durable_once_programmed_and_flushed() {
    let mut d = mem_device(&page_mlc_slc(1000.0), 2);
    let u = 4096usize;
    let mut b = vec![0u8; u];
    let mut t = 0;
    for a in 0..6u64 {
        pattern(&mut b, a, 1);
        t = d.write(t, a * u as u64, &b).unwrap();
    }
    let t = d.flush(t).unwrap();
    // it is in the buffer, on lower pages only (SLC mode)
    let (blk, pg) = d.locate(0).unwrap();
    assert!(slc_blocks(&d).contains(&blk), "block {blk} is not a buffer block");
    assert_eq!(d.media.nand.page_type(pg), 0);
    d.power_cut(t);
    d.restart();
    let t = d.clock;
    for a in 0..6u64 {
        d.read(t, a * u as u64, &mut b).unwrap();
        assert_eq!(decode(&b, a), Some(1), "unit {a}");
    }
    d.ftl.check(&d.media).unwrap();
}

#[test]
fn a_cut_during_a_fold_loses_nothing_flushed() {
    // cut at several moments of a fold triggered by idleness
    for frac in [1u64, 3, 5, 7, 9] {
        let mut d = mem_device(&page_mlc_slc(1.0), 3);
        let u = 4096u64;
        let units = 2 * 128 * 1024 / u; // both buffer superblocks, then more
        let mut b = vec![0u8; u as usize];
        let mut t = 0;
        for a in 0..units + 8 {
            pattern(&mut b, a, 1);
            t = d.write(t, a * u, &b).unwrap();
        }
        let t = d.flush(t).unwrap();
        let folds = stat(&d, "folds");
        // an idle gap: the device folds, then the next request arrives
        let later = t + 1_000_000_000;
        d.read(later, 0, &mut b).unwrap();
        assert!(stat(&d, "folds") > folds);
        let end = d.media.tl.drained();
        let idle_from = t + 1_000_000;
        d.power_cut(idle_from + (end - idle_from) * frac / 10);
        d.restart();
        let t = d.clock;
        for a in 0..units + 8 {
            d.read(t, a * u, &mut b).unwrap();
            assert_eq!(decode(&b, a), Some(1), "unit {a} after a cut at {frac}/10 of the fold");
        }
        d.ftl.check(&d.media).unwrap();
    }
}

/// The buffered preset with sequential streams of `bypass` bytes and more
/// sent straight to the array.
fn preset_bypass(bypass: &str) -> String {
    preset(true).replace("slc_idle_ms = 10", &format!("slc_idle_ms = 10\nslc_bypass = \"{bypass}\""))
}

/// `n` random 4 KiB writes over the first `span` bytes at queue depth 1
/// from `t`; returns (end, IO/s).
fn random(d: &mut Device, t: u64, span: u64, n: u64, seed: u64) -> (u64, f64) {
    let b = [0x33u8; 4096];
    let mut x = seed | 1;
    let mut now = t;
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        now = d.write(now, x % (span / 4096) * 4096, &b).unwrap();
    }
    (now, n as f64 / ((now - t) as f64 / 1e9))
}

#[test]
fn a_sequential_stream_bypasses_the_buffer_and_leaves_it_to_random_writes() {
    // a large file: past the first 256 KiB of the run, straight into the
    // array at its direct rate, and nothing to fold
    let mut d = null_device(&preset_bypass("256K"), None, 1);
    let (t, seq) = stream(&mut d, 0, 0, 24 * MIB);
    let slc_pages = stat(&d, "page_programs");
    assert!(slc_pages * 16384 <= 256 * 1024, "{slc_pages} buffer pages for a sequential stream");
    assert_eq!(stat(&d, "folds"), 0);
    let mut direct = null_device(&preset(false), None, 1);
    let (_, array) = stream(&mut direct, 0, 0, 24 * MIB);
    assert!((seq / array - 1.0).abs() < 0.05, "bypassing stream {seq:.2} MB/s vs the array alone {array:.2}");
    // the random writes after it land in the empty buffer at SLC speed;
    // without the bypass the same writes find it full of the stream and
    // wait for folds
    let (_, absorbed) = random(&mut d, t, 32 * MIB, 512, 7);
    let mut full = null_device(&preset(true), None, 1);
    let (t2, _) = stream(&mut full, 0, 0, 24 * MIB);
    let (_, folding) = random(&mut full, t2, 32 * MIB, 512, 7);
    assert!(absorbed > 2.0 * folding, "random writes after a bypassing stream {absorbed:.0} IO/s, after a buffered one {folding:.0}");
    d.ftl.check(&d.media).unwrap();
}

#[test]
fn runs_shorter_than_the_bypass_stay_in_the_buffer() {
    let mut d = null_device(&preset_bypass("256K"), None, 1);
    // 128 KiB runs, each somewhere else: all buffered
    let buf = vec![0u8; 128 * 1024];
    let mut t = 0;
    for i in 0..32u64 {
        t = d.write(t, (i * 7 % 32) * MIB, &buf).unwrap();
    }
    d.flush(t).unwrap();
    assert!(stat(&d, "page_programs") >= 32 * 128 * 1024 / 16384, "short runs were not buffered");
    assert_eq!(d.stats_json()["nand"]["host_page_programs"].as_u64().unwrap(), stat(&d, "page_programs"));
}

#[test]
fn a_unit_rewritten_across_the_two_paths_reads_back_its_last_version() {
    // (a unit's older copy waiting in the other path's page is programmed first)
    // a stream (straight to the array) rewritten in places by small writes
    // (into the buffer) and then by the stream again, with a cut after a
    // flush: every unit reads back the version written last
    let mut d = mem_device(&page_mlc_slc(1000.0).replace("slc_idle_ms = 1000", "slc_idle_ms = 1000\nslc_bypass = \"16K\""), 4);
    let u = 4096u64;
    let mut b = vec![0u8; u as usize];
    let mut t = 0;
    let mut ver = vec![0u64; 64];
    for (round, step) in [(1u64, 1u64), (2, 5), (3, 1), (4, 3)] {
        let mut a = 0;
        while a < 64 {
            pattern(&mut b, a, round);
            t = d.write(t, a * u, &b).unwrap();
            ver[a as usize] = round;
            a += step;
        }
        // read back before any flush: the controller's pages are consulted
        for a in 0..64u64 {
            d.read(t, a * u, &mut b).unwrap();
            assert_eq!(decode(&b, a), Some(ver[a as usize]), "unit {a} in round {round}");
        }
    }
    let t = d.flush(t).unwrap();
    d.power_cut(t);
    d.restart();
    let t = d.clock;
    for a in 0..64u64 {
        d.read(t, a * u, &mut b).unwrap();
        assert_eq!(decode(&b, a), Some(ver[a as usize]), "unit {a} after the cut");
    }
    d.ftl.check(&d.media).unwrap();
}
