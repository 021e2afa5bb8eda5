//! Benchmarks that print figures (one result per line):
//!   flashbed-bench model  [--preset P] [--capacity 1G] [--runs 5] [--writes N]
//!       model core alone (no data store, pace none): random 4 KiB writes/s
//!   flashbed-bench fuse   [--preset P] [--reads N]
//!       pread 4 KiB through the FUSE file vs a plain file: added latency
//!   flashbed-bench rates  [--preset P ...] [--seconds S]
//!       modelled sequential/random rates next to the preset's declared ones,
//!       in-process and through the FUSE file with real pacing
//!   flashbed-bench crashstates [--preset P ...] [--capacity 256M] [--writes N] [--every K]
//!       write log and crash states in-process: a workload logged (sequential
//!       fill, then random 4 KiB writes with a flush every K), its states
//!       listed, then states materialised per second (switch alone, and
//!       switch plus scattered reads), image writing, and the log's cost
//!   flashbed-bench all    everything, for every block preset in presets/

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use flash_model::config::{load_block_preset, load_preset, parse_size, DeviceConfig, Preset};
use flash_model::crashlog::{self, cut::enumerate, cut::Bounds, View};
use flash_model::store::{MemStore, NullStore};
use flash_model::Device;

fn die(msg: impl std::fmt::Display) -> ! {
    eprintln!("flashbed-bench: error: {msg}");
    std::process::exit(2);
}

fn exe_dir() -> PathBuf {
    std::env::current_exe().ok().and_then(|p| p.parent().map(Path::to_path_buf)).unwrap_or_default()
}

/// presets/ of the repository this binary was built in (target/release ->
/// emulator -> repo), else ./presets.
fn presets_dir() -> PathBuf {
    let guess = exe_dir().join("../../../presets");
    if guess.is_dir() {
        guess
    } else {
        PathBuf::from("presets")
    }
}

fn preset_path(name: &str) -> PathBuf {
    let p = PathBuf::from(name);
    if p.exists() {
        p
    } else {
        presets_dir().join(format!("{name}.toml"))
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn opts(args: &[String]) -> HashMap<String, Vec<String>> {
    let mut m: HashMap<String, Vec<String>> = HashMap::new();
    let mut i = 0;
    while i < args.len() {
        let k = args[i].strip_prefix("--").unwrap_or_else(|| die(format!("unexpected `{}`", args[i])));
        let v = args.get(i + 1).unwrap_or_else(|| die(format!("--{k} needs a value"))).clone();
        m.entry(k.to_string()).or_default().push(v);
        i += 2;
    }
    m
}

fn one<'a>(o: &'a HashMap<String, Vec<String>>, k: &str, d: &'a str) -> &'a str {
    o.get(k).and_then(|v| v.last()).map(String::as_str).unwrap_or(d)
}

fn cfg(preset: &str, cap: Option<u64>) -> DeviceConfig {
    load_block_preset(&preset_path(preset), cap).unwrap_or_else(|e| die(e))
}

// ---------------------------------------------------------------- model

fn bench_model(preset: &str, capacity: u64, runs: usize, writes: u64) {
    let c = cfg(preset, Some(capacity));
    let name = c.name.clone();
    let mut d = Device::new(c, Box::new(NullStore), 1);
    let n = d.capacity() / 4096;
    let buf = [0u8; 4096];
    // Precondition: every unit written once, then one random pass, so GC runs
    // at steady state during the measurement.
    let mut t = 0;
    for a in 0..n {
        t = d.write(t, a * 4096, &buf).unwrap();
    }
    let mut r = Rng(0x2545_F491_4F6C_DD1D);
    for _ in 0..n {
        t = d.write(t, r.next() % n * 4096, &buf).unwrap();
    }
    let mut rates = Vec::new();
    for run in 1..=runs {
        let start = Instant::now();
        for _ in 0..writes {
            t = d.write(t, r.next() % n * 4096, &buf).unwrap();
        }
        let rate = writes as f64 / start.elapsed().as_secs_f64();
        println!("model {name} {} MiB: run {run}: {:.0} random 4 KiB writes/s", capacity >> 20, rate);
        rates.push(rate);
    }
    let s = d.stats_json();
    println!(
        "model {name} {} MiB: median {:.0} random 4 KiB writes/s (pace none, no data store, one core; WA {:.2})",
        capacity >> 20,
        median(rates),
        s["write_amplification"].as_f64().unwrap_or(0.0)
    );
}

// ---------------------------------------------------------------- crash states

/// The logged workload: a sequential fill of a quarter of the device (what
/// mkfs and a first copy write), then `writes` random 4 KiB writes over the
/// device with a flush after every `every` (fsync-heavy, as the powercut
/// workload is). Returns requests per second.
fn crash_workload(d: &mut Device, writes: u64, every: u64) -> f64 {
    let start = Instant::now();
    let cap = d.capacity();
    let big = vec![0x5Au8; 256 << 10];
    let mut t = 0;
    let mut reqs = 0u64;
    for i in 0..cap / 4 / big.len() as u64 {
        t = d.write(t, i * big.len() as u64, &big).unwrap();
        reqs += 1;
    }
    t = d.flush(t).unwrap();
    let mut r = Rng(0x2545_F491_4F6C_DD1D);
    let mut small = [0u8; 4096];
    for i in 0..writes {
        small[..8].copy_from_slice(&i.to_le_bytes());
        t = d.write(t, r.next() % (cap / 4096) * 4096, &small).unwrap();
        reqs += 1;
        if (i + 1) % every == 0 {
            t = d.flush(t).unwrap();
            reqs += 1;
        }
    }
    d.flush(t).unwrap();
    reqs as f64 / start.elapsed().as_secs_f64()
}

fn bench_crashstates(preset: &str, capacity: u64, writes: u64, every: u64) {
    let path = preset_path(preset);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| die(format!("{}: {e}", path.display())));
    let c = cfg(preset, Some(capacity));
    let name = c.name.clone();
    let ps = c.geo.page_size;
    let dir = std::env::temp_dir().join(format!("flashbed-bench-crashlog-{}", std::process::id()));
    let mut plain = Device::new(c.clone(), Box::new(MemStore::new(ps)), 1);
    let off_rate = crash_workload(&mut plain, writes, every);
    drop(plain);
    let mut d = Device::new(c, Box::new(MemStore::new(ps)), 1);
    crashlog::start(&mut d, &dir, &text, 1).unwrap_or_else(|e| die(e));
    let on_rate = crash_workload(&mut d, writes, every);
    let ix = crashlog::stop(&mut d).unwrap_or_else(|e| die(e));
    drop(d);
    let mib = capacity >> 20;
    println!(
        "crashstates {name} {mib} MiB: logged {} requests ({} flushes, {:.1} MiB of data) at {on_rate:.0} requests/s, {off_rate:.0} without the log",
        ix.recs.len(),
        ix.flush_pos.len(),
        ix.bytes() as f64 / (1 << 20) as f64
    );
    let b = Bounds { after: Some(ix.flush_pos[0]), seed: 1, subsets: 4, tears: 2, at_marks: false };
    let start = Instant::now();
    let states = enumerate(&ix, &b);
    let list_s = start.elapsed().as_secs_f64();
    let count = |k: &str| states.iter().filter(|s| s.kind == k).count();
    println!(
        "crashstates {name} {mib} MiB: {} states ({} flush, {} cut, {} subset, {} tear) listed in {list_s:.2} s",
        states.len(),
        count("flush"),
        count("cut"),
        count("subset"),
        count("tear")
    );
    let ix = std::sync::Arc::new(ix);
    let mut view = View::new(ix.clone(), states[0].id).unwrap();
    let mut per_state = Vec::with_capacity(states.len());
    for s in &states {
        let t0 = Instant::now();
        view.switch(s.id).unwrap();
        per_state.push(t0.elapsed().as_secs_f64());
    }
    let total: f64 = per_state.iter().sum();
    println!(
        "crashstates {name} {mib} MiB: switch median {:.1} us, {:.0} states/s over all states (one core)",
        median(per_state) * 1e6,
        states.len() as f64 / total
    );
    // What checking a state reads is mostly metadata spread over the device:
    // 256 scattered 4 KiB reads (1 MiB) per state.
    let mut r = Rng(0x9E37_79B9_7F4A_7C15);
    let mut buf = [0u8; 4096];
    let units = capacity / 4096;
    let t0 = Instant::now();
    let mut unreadable = 0u64;
    for s in &states {
        view.switch(s.id).unwrap();
        for _ in 0..256 {
            if view.read(r.next() % units * 4096, &mut buf).is_err() {
                unreadable += 1;
            }
        }
    }
    let el = t0.elapsed().as_secs_f64();
    println!(
        "crashstates {name} {mib} MiB: switch + 256 scattered 4 KiB reads: {:.0} states/s ({} reads hit damaged units)",
        states.len() as f64 / el,
        unreadable
    );
    let img = dir.join("state.img");
    let n = states.len().min(5);
    let t0 = Instant::now();
    for s in &states[states.len() - n..] {
        let cut = flash_model::crashlog::Cut::new(&ix, s.id).unwrap();
        let _ = std::fs::remove_file(&img);
        flash_model::crashlog::write_image(&ix, &cut, &img).unwrap_or_else(|e| die(e));
    }
    let el = t0.elapsed().as_secs_f64() / n as f64;
    println!("crashstates {name} {mib} MiB: a state's image file in {:.0} ms ({:.0} MiB/s)", el * 1e3, mib as f64 / el);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------- emulator process

struct Emu {
    child: Child,
    dir: PathBuf,
    device: PathBuf,
    control: PathBuf,
}

impl Emu {
    fn start(preset: &str, capacity: &str, pace: &str) -> Emu {
        let dir = std::env::temp_dir().join(format!("flashbed-bench-{}-{}", std::process::id(), preset.replace('/', "_")));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("mnt")).unwrap();
        let control = dir.join("ctl.sock");
        let mut child = Command::new(exe_dir().join("flashbed-emu"))
            .arg("serve")
            .arg("--preset")
            .arg(preset_path(preset))
            .arg("--state")
            .arg(dir.join("state"))
            .arg("--mount")
            .arg(dir.join("mnt"))
            .arg("--control")
            .arg(&control)
            .args(["--capacity", capacity, "--pace", pace])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| die(format!("cannot start flashbed-emu (build it first): {e}")));
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        if !line.starts_with("READY ") {
            let _ = child.wait();
            die(format!("flashbed-emu did not start for {preset}"));
        }
        Emu { child, device: dir.join("mnt/device"), dir, control }
    }

    fn cmd(&self, c: &str) -> serde_json::Value {
        let mut s = UnixStream::connect(&self.control).unwrap();
        writeln!(s, "{{\"cmd\":\"{c}\"}}").unwrap();
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }

    fn stop(mut self) {
        self.cmd("shutdown");
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// ---------------------------------------------------------------- fuse

fn bench_fuse(preset: &str, reads: usize) {
    let cap = 64u64 << 20;
    let emu = Emu::start(preset, "64M", "none");
    let plain_path = emu.dir.join("plain.img");
    let dev = OpenOptions::new().read(true).write(true).open(&emu.device).unwrap();
    let plain = OpenOptions::new().read(true).write(true).create(true).open(&plain_path).unwrap();
    let chunk = vec![0x5Au8; 1 << 20];
    for i in 0..cap / chunk.len() as u64 {
        dev.write_all_at(&chunk, i * chunk.len() as u64).unwrap();
        plain.write_all_at(&chunk, i * chunk.len() as u64).unwrap();
    }
    dev.sync_all().unwrap();
    plain.sync_all().unwrap();
    let lat = |f: &std::fs::File| {
        let mut r = Rng(0x9E37_79B9_7F4A_7C15);
        let mut buf = [0u8; 4096];
        let mut v = Vec::with_capacity(reads);
        for _ in 0..reads {
            let off = r.next() % (cap / 4096) * 4096;
            let s = Instant::now();
            f.read_exact_at(&mut buf, off).unwrap();
            v.push(s.elapsed().as_nanos() as f64 / 1000.0);
        }
        median(v)
    };
    let _ = lat(&plain); // warm the page cache of the plain file
    let p = lat(&plain);
    let fz = lat(&dev);
    println!("fuse {preset}: pread 4 KiB median {fz:.1} us through FUSE, {p:.1} us plain file: {:.1} us added ({reads} reads)", fz - p);
    drop(dev);
    emu.stop();
}

// ---------------------------------------------------------------- rates

struct Rates {
    seq_write: f64,
    seq_read: f64,
    rand_write_span: f64,
    rand_write_all: f64,
    rand_read: f64,
}

/// Rates the model gives in-process (modelled time, closed loop, QD1).
fn model_rates(c: DeviceConfig) -> Rates {
    let mut d = Device::new(c, Box::new(NullStore), 1);
    let cap = d.capacity();
    let eu = d.cfg.erase_unit_bytes();
    let big = vec![0u8; 512 << 10];
    let seq_len = (256u64 << 20).min(cap / eu * eu / 2).max(eu);
    let mut t = 0;
    // Fill the device so merges and GC copy real data.
    for i in 0..cap / big.len() as u64 {
        t = d.write(t, i * big.len() as u64, &big).unwrap();
    }
    t = d.flush(t).unwrap();
    let t0 = t;
    for i in 0..seq_len / big.len() as u64 {
        t = d.write(t, i * big.len() as u64, &big).unwrap();
    }
    t = d.flush(t).unwrap();
    let seq_write = seq_len as f64 / ((t - t0) as f64 / 1e9) / 1e6;
    let t0 = t;
    let mut rb = vec![0u8; big.len()];
    for i in 0..seq_len / big.len() as u64 {
        t = d.read(t, i * big.len() as u64, &mut rb).unwrap();
    }
    let seq_read = seq_len as f64 / ((t - t0) as f64 / 1e9) / 1e6;
    let small = [0u8; 4096];
    let mut r = Rng(77);
    let mut rand_iops = |d: &mut Device, span: u64, n: u64, t: &mut u64| {
        let t0 = *t;
        for _ in 0..n {
            *t = match d.write(*t, r.next() % (span / 4096) * 4096, &small) {
                Ok(e) => e,
                Err(e) => {
                    let s = d.stats_json();
                    die(format!("{}: random write failed ({e:?}); nand {} bad {}", d.cfg.name, s["nand"], s["bad_blocks"]["grown"]))
                }
            };
        }
        *t = d.flush(*t).unwrap();
        n as f64 / ((*t - t0) as f64 / 1e9)
    };
    // Span of one erase unit: what a filesystem's small random writes in
    // one place see; the whole device: the worst case.
    let _ = rand_iops(&mut d, eu, 2000, &mut t);
    let rand_write_span = rand_iops(&mut d, eu, 4000, &mut t);
    let n_all = if d.cfg.ftl.kind == flash_model::config::FtlKind::Hybrid { 300 } else { 20000 };
    let rand_write_all = rand_iops(&mut d, cap, n_all, &mut t);
    let t0 = t;
    let mut b = [0u8; 4096];
    for _ in 0..5000 {
        t = d.read(t, r.next() % (cap / 4096) * 4096, &mut b).unwrap();
    }
    let rand_read = 5000.0 / ((t - t0) as f64 / 1e9);
    Rates { seq_write, seq_read, rand_write_span, rand_write_all, rand_read }
}

/// Rates through the FUSE file with real pacing: short runs, wall clock.
fn fuse_rates(preset: &str, seconds: f64, eu: u64) -> (f64, f64, f64) {
    let cap = (256u64 << 20).max(eu * 8);
    let emu = Emu::start(preset, &format!("{}", cap), "real");
    let f = OpenOptions::new().read(true).write(true).open(&emu.device).unwrap();
    let big = vec![0x11u8; 512 << 10];
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed().as_secs_f64() < seconds && (n + 1) * big.len() as u64 <= cap {
        f.write_all_at(&big, n * big.len() as u64).unwrap();
        n += 1;
    }
    f.sync_data().unwrap();
    let seq_write = (n * big.len() as u64) as f64 / start.elapsed().as_secs_f64() / 1e6;
    let written = n * big.len() as u64;
    let start = Instant::now();
    let mut rb = vec![0u8; big.len()];
    let mut m = 0u64;
    while start.elapsed().as_secs_f64() < seconds && m < n {
        f.read_exact_at(&mut rb, m * big.len() as u64).unwrap();
        m += 1;
    }
    let seq_read = (m * big.len() as u64) as f64 / start.elapsed().as_secs_f64() / 1e6;
    let mut r = Rng(99);
    let small = [0u8; 4096];
    let span = eu.min(written.max(eu));
    let start = Instant::now();
    let mut k = 0u64;
    while start.elapsed().as_secs_f64() < seconds {
        f.write_all_at(&small, r.next() % (span / 4096) * 4096).unwrap();
        k += 1;
    }
    f.sync_data().unwrap();
    let rand = k as f64 / start.elapsed().as_secs_f64();
    drop(f);
    emu.stop();
    (seq_write, seq_read, rand)
}

fn bench_rates(preset: &str, seconds: f64) {
    let c = cfg(preset, None);
    let dcl = c.declared.clone();
    let name = c.name.clone();
    let eu = c.erase_unit_bytes();
    let m = model_rates(c);
    println!(
        "rates {name} declared: seq write {:.1} MB/s, seq read {:.1} MB/s, random 4 KiB write {:.0} IOPS, random 4 KiB read {:.0} IOPS",
        dcl.seq_write_mb_s, dcl.seq_read_mb_s, dcl.rand_write_4k_iops, dcl.rand_read_4k_iops
    );
    println!(
        "rates {name} model: seq write {:.1} MB/s, seq read {:.1} MB/s, random 4 KiB write {:.0} IOPS within one erase unit / {:.1} IOPS over the whole device, random 4 KiB read {:.0} IOPS",
        m.seq_write, m.seq_read, m.rand_write_span, m.rand_write_all, m.rand_read
    );
    if seconds > 0.0 {
        let (w, r, rw) = fuse_rates(preset, seconds, eu);
        println!(
            "rates {name} fuse (pace real, {seconds} s runs): seq write {w:.1} MB/s, seq read {r:.1} MB/s, random 4 KiB write {rw:.0} IOPS within one erase unit"
        );
    }
}

fn block_presets() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(presets_dir())
        .map(|it| it.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.extension().map_or(false, |x| x == "toml")).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter(|p| matches!(load_preset(p, None), Ok(Preset::Block(_))))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (cmd, rest) = args.split_first().unwrap_or_else(|| die("usage: flashbed-bench model|fuse|rates|crashstates|all [options]"));
    let o = opts(rest);
    let size = |k: &str, d: &str| parse_size(one(&o, k, d)).unwrap_or_else(|| die(format!("--{k}: not a size")));
    let num = |k: &str, d: &str| one(&o, k, d).parse::<f64>().unwrap_or_else(|_| die(format!("--{k}: not a number")));
    match cmd.as_str() {
        "model" => bench_model(one(&o, "preset", "emmc-8g"), size("capacity", "1G"), num("runs", "5") as usize, num("writes", "2000000") as u64),
        "fuse" => bench_fuse(one(&o, "preset", "ideal"), num("reads", "20000") as usize),
        "rates" => {
            let presets = o.get("preset").cloned().unwrap_or_else(block_presets);
            for p in presets {
                bench_rates(&p, num("seconds", "2"));
            }
        }
        "crashstates" => {
            let presets = o.get("preset").cloned().unwrap_or_else(|| vec!["emmc-8g".into(), "sd-class10".into()]);
            for p in presets {
                bench_crashstates(&p, size("capacity", "256M"), num("writes", "20000") as u64, num("every", "8") as u64);
            }
        }
        "all" => {
            bench_model("emmc-8g", 1 << 30, 5, 2_000_000);
            bench_fuse("ideal", 20000);
            // The SD card's random writes merge whole AUs: fewer keep it short.
            bench_crashstates("emmc-8g", 256 << 20, 20000, 8);
            bench_crashstates("sd-class10", 256 << 20, 4000, 8);
            for p in block_presets() {
                bench_rates(&p, num("seconds", "2"));
            }
        }
        other => die(format!("unknown benchmark `{other}` (model, fuse, rates, crashstates, all)")),
    }
}
