//! flashbed-emu: serves an emulated flash device as a file through FUSE.
//!
//!   flashbed-emu serve --preset PATH --state DIR --mount DIR --control SOCK
//!                      [--capacity SIZE] [--pace real|none|virtual] [--seed N] [--set PATH=VALUE]... [--crash-log DIR]
//!   flashbed-emu describe --preset PATH [--capacity SIZE] [--set PATH=VALUE]...
//!   flashbed-emu jobs --preset PATH [--capacity SIZE] [--set PATH=VALUE]... --jobs JSON [--max-request BYTES]
//!   flashbed-emu presets-check FILE...
//!   flashbed-emu crash-states --log DIR [--after LABEL|POS] [--seed N] [--subsets N] [--tears N] [--marks true|false] [--images true|false]
//!   flashbed-emu crash-image --log DIR --state ID --image FILE

mod control;
mod crash;
mod fusefs;
mod modeljobs;
mod reqsize;
mod shared;

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::SystemTime;

use flash_model::config::{block_of, load_preset, parse_preset, parse_size, read_preset, DeviceConfig, Preset, Set};
use flash_model::state;

use crate::control::{Control, Event};
use crate::shared::{Pace, Shared};

const USAGE: &str = "usage:
  flashbed-emu serve --preset PATH --state DIR --mount DIR --control SOCK [--capacity SIZE] [--pace real|none|virtual] [--seed N] [--set PATH=VALUE]... [--crash-log DIR]
  flashbed-emu describe --preset PATH [--capacity SIZE] [--set PATH=VALUE]...
  flashbed-emu jobs --preset PATH [--capacity SIZE] [--set PATH=VALUE]... --jobs JSON [--max-request BYTES]
  flashbed-emu presets-check FILE...
  flashbed-emu crash-states --log DIR [--after LABEL|POS] [--seed N] [--subsets N] [--tears N] [--marks true|false] [--images true|false]
  flashbed-emu crash-image --log DIR --state ID --image FILE";

fn die(msg: impl std::fmt::Display) -> ! {
    eprintln!("flashbed-emu: error: {msg}");
    std::process::exit(2);
}

/// `--key value` options; `flags_ok` lists the accepted keys.
fn options(args: &[String], accepted: &[&str]) -> HashMap<String, String> {
    let mut m = HashMap::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let Some(key) = a.strip_prefix("--") else { die(format!("unexpected argument `{a}`\n{USAGE}")) };
        let (key, val) = match key.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => {
                i += 1;
                let v = args.get(i).unwrap_or_else(|| die(format!("--{key} needs a value")));
                (key.to_string(), v.clone())
            }
        };
        if !accepted.contains(&key.as_str()) {
            die(format!("unknown option --{key}\n{USAGE}"));
        }
        m.insert(key, val);
        i += 1;
    }
    m
}

/// The `--set PATH=VALUE` fields (repeatable: a preset's variant, see `config::Set`), and
/// the other arguments.
fn sets_opt(args: &[String]) -> (Vec<Set>, Vec<String>) {
    let (mut sets, mut rest) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < args.len() {
        let given = if args[i] == "--set" {
            i += 1;
            Some(args.get(i).unwrap_or_else(|| die("--set needs PATH=VALUE")).clone())
        } else {
            args[i].strip_prefix("--set=").map(str::to_string)
        };
        match given {
            Some(text) => sets.push(Set::parse(&text).unwrap_or_else(|e| die(e))),
            None => rest.push(args[i].clone()),
        }
        i += 1;
    }
    (sets, rest)
}

/// The block preset of `--preset` with `sets` on top, at `--capacity`: its text (what the
/// device is made from) and its configuration.
fn block_config(o: &HashMap<String, String>, sets: &[Set], capacity: Option<u64>) -> (String, DeviceConfig) {
    let (text, file, stem) = read_preset(Path::new(required(o, "preset")), sets).unwrap_or_else(|e| die(e));
    let cfg = parse_preset(&text, &file, &stem, capacity).and_then(block_of).unwrap_or_else(|e| die(e));
    (text, cfg)
}

fn capacity_opt(o: &HashMap<String, String>) -> Option<u64> {
    o.get("capacity").map(|c| parse_size(c).unwrap_or_else(|| die(format!("--capacity `{c}` is not a size (bytes or e.g. 64M, 1G)"))))
}

fn required<'a>(o: &'a HashMap<String, String>, k: &str) -> &'a str {
    o.get(k).map(String::as_str).unwrap_or_else(|| die(format!("--{k} is required\n{USAGE}")))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("serve") => serve(&args[1..]),
        Some("describe") => describe(&args[1..]),
        Some("jobs") => jobs(&args[1..]),
        Some("presets-check") => presets_check(&args[1..]),
        Some("crash-states") => crash_states(&args[1..]),
        Some("crash-image") => crash_image(&args[1..]),
        Some("-h") | Some("--help") | Some("help") => println!("{USAGE}"),
        Some("-V") | Some("--version") => println!("flashbed-emu {}", env!("CARGO_PKG_VERSION")),
        Some(other) => die(format!("unknown command `{other}`\n{USAGE}")),
        None => die(USAGE),
    }
}

fn describe(args: &[String]) {
    let (sets, args) = sets_opt(args);
    let o = options(&args, &["preset", "capacity"]);
    let (_, cfg) = block_config(&o, &sets, capacity_opt(&o));
    println!("{}", cfg.describe());
}

/// fio's QD1 jobs on a fresh device of the model, in-process (modeljobs.rs): one JSON line.
fn jobs(args: &[String]) {
    let (sets, args) = sets_opt(args);
    let o = options(&args, &["preset", "capacity", "jobs", "max-request"]);
    let (_, cfg) = block_config(&o, &sets, capacity_opt(&o));
    let jobs = modeljobs::parse(required(&o, "jobs")).unwrap_or_else(|e| die(e));
    let max = o.get("max-request").map_or(512 << 10, |m| {
        parse_size(m).filter(|&n| n >= 512).unwrap_or_else(|| die(format!("--max-request `{m}` is not a size of at least 512 bytes")))
    });
    let mut d = flash_model::Device::new(cfg, Box::new(flash_model::store::NullStore), 1);
    let out = modeljobs::run(&mut d, &jobs, max).unwrap_or_else(|e| die(e));
    println!("{out}");
}

fn presets_check(files: &[String]) {
    if files.is_empty() {
        die("presets-check needs preset files");
    }
    let mut bad = 0;
    for f in files {
        match load_preset(Path::new(f), None) {
            Ok(Preset::Block(c)) => println!("ok {f}: {} ({} FTL, {} bytes)", c.name, c.ftl.kind.name(), c.capacity),
            Ok(Preset::Nandsim { name }) => println!("ok {f}: {name} (raw NAND for nandsim; not served by flashbed-emu)"),
            Ok(Preset::File { name }) => println!("ok {f}: {name} (plain file; not served by flashbed-emu)"),
            Err(e) => {
                eprintln!("flashbed-emu: error: {e}");
                bad += 1;
            }
        }
    }
    if bad > 0 {
        std::process::exit(1);
    }
}

fn load_log(o: &HashMap<String, String>) -> flash_model::crashlog::Index {
    flash_model::crashlog::Index::load(Path::new(required(o, "log"))).unwrap_or_else(|e| die(e))
}

/// Prints a reply-shaped JSON object; a failed one is an error line, exit 2.
fn print_reply(v: serde_json::Value) {
    if v["ok"] == serde_json::json!(false) {
        die(v["error"].as_str().unwrap_or("failed"));
    }
    println!("{v}");
}

/// Crash states of a kept log, as `crash-states` on the control socket lists them.
fn crash_states(args: &[String]) {
    let o = options(args, &["log", "after", "seed", "subsets", "tears", "marks", "images"]);
    let ix = load_log(&o);
    let mut req = serde_json::json!({});
    for k in ["seed", "subsets", "tears"] {
        if let Some(v) = o.get(k) {
            req[k] = serde_json::json!(v.parse::<u64>().unwrap_or_else(|_| die(format!("--{k} `{v}` is not a non-negative integer"))));
        }
    }
    if let Some(a) = o.get("after") {
        req["after"] = a.parse::<u64>().map_or_else(|_| serde_json::json!(a), |p| serde_json::json!(p));
    }
    for k in ["marks", "images"] {
        if let Some(m) = o.get(k) {
            req[k] = serde_json::json!(m.parse::<bool>().unwrap_or_else(|_| die(format!("--{k} `{m}` is not true or false"))));
        }
    }
    print_reply(crash::listing(&ix, &req));
}

/// Rebuilds one crash state's device image from a kept log.
fn crash_image(args: &[String]) {
    let o = options(args, &["log", "state", "image"]);
    let state = required(&o, "state");
    flash_model::crashlog::cut::parse_state(state).unwrap_or_else(|e| die(e));
    let ix = load_log(&o);
    print_reply(crash::image(&ix, state, Path::new(required(&o, "image"))));
}

/// First field in which two device configurations differ.
fn first_difference(a: &DeviceConfig, b: &DeviceConfig) -> String {
    let (da, db) = (a.describe(), b.describe());
    if let (Some(ma), Some(mb)) = (da.as_object(), db.as_object()) {
        for (k, va) in ma {
            if mb.get(k) != Some(va) {
                return format!("{k}: stored {va}, given {}", mb.get(k).cloned().unwrap_or_default());
            }
        }
    }
    "timing or reliability parameters".into()
}

fn open_or_create(o: &HashMap<String, String>, sets: &[Set], seed: u64) -> flash_model::Device {
    let preset_path = PathBuf::from(required(o, "preset"));
    let state_dir = PathBuf::from(required(o, "state"));
    let capacity = capacity_opt(o);
    // the preset with its variant's fields: the text the device is made from
    let (text, file, stem) = read_preset(&preset_path, sets).unwrap_or_else(|e| die(e));
    if state::exists(&state_dir) {
        let meta = state::read_meta(&state_dir).unwrap_or_else(|e| die(e));
        if let Some(c) = capacity {
            let given = block_config(o, sets, Some(c)).1;
            if given.capacity != meta.capacity {
                die(format!(
                    "state {} holds a device of {} bytes; --capacity {} does not match",
                    state_dir.display(),
                    meta.capacity,
                    c
                ));
            }
        }
        let stored = state::stored_config(&state_dir, &meta).unwrap_or_else(|e| die(e));
        let given = parse_preset(&text, &file, &stem, Some(meta.capacity)).and_then(block_of).unwrap_or_else(|e| die(e));
        if given != stored {
            die(format!(
                "state {} holds a device made from preset {}; preset {} differs ({})",
                state_dir.display(),
                meta.preset_name,
                preset_path.display(),
                first_difference(&stored, &given)
            ));
        }
        state::open(&state_dir, &meta).unwrap_or_else(|e| die(e))
    } else {
        let cfg = parse_preset(&text, &file, &stem, capacity).and_then(block_of).unwrap_or_else(|e| die(e));
        state::create(&state_dir, cfg, &text, seed).unwrap_or_else(|e| die(e))
    }
}

fn block_signals() -> libc::sigset_t {
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGHUP);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

fn unmount(dir: &Path) {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    unsafe {
        if libc::umount2(c.as_ptr(), 0) == 0 {
            return;
        }
        // Still open (a lab kernel holding the file): detach now; the
        // connection ends when this process exits.
        if libc::umount2(c.as_ptr(), libc::MNT_DETACH) == 0 {
            return;
        }
    }
    for tool in ["fusermount3", "fusermount"] {
        if std::process::Command::new(tool).args(["-u", "-z"]).arg(dir).status().map_or(false, |s| s.success()) {
            return;
        }
    }
}

fn serve(args: &[String]) {
    let (sets, args) = sets_opt(args);
    let o = options(&args, &["preset", "state", "mount", "control", "capacity", "pace", "seed", "crash-log"]);
    let pace = match o.get("pace").map(String::as_str).unwrap_or("real") {
        "real" => Pace::Real,
        "none" => Pace::None,
        "virtual" => Pace::Virtual,
        p => die(format!("--pace `{p}` must be real, none or virtual")),
    };
    let seed: u64 = o.get("seed").map_or(1, |s| s.parse().unwrap_or_else(|_| die(format!("--seed `{s}` is not an integer"))));
    let mount = PathBuf::from(required(&o, "mount"));
    let mount = std::fs::canonicalize(&mount).unwrap_or(mount);
    let control = PathBuf::from(required(&o, "control"));
    let state_dir = PathBuf::from(required(&o, "state"));
    match std::fs::read_dir(&mount) {
        Ok(mut it) => {
            if it.next().is_some() {
                die(format!("--mount {} is not empty", mount.display()));
            }
        }
        Err(e) => die(format!("--mount {}: {e} (it must be an existing empty directory)", mount.display())),
    }
    // Refuse to steal a socket another emulator is serving.
    if control.exists() {
        if std::os::unix::net::UnixStream::connect(&control).is_ok() {
            die(format!("--control {} is in use by another process", control.display()));
        }
        let _ = std::fs::remove_file(&control);
    }

    let sigset = block_signals();
    let dev = open_or_create(&o, &sets, seed);
    let info = serde_json::json!({
        "device": mount.join(fusefs::DEVICE_NAME),
        "state": mount.join(fusefs::STATE_NAME),
        "capacity_bytes": dev.capacity(),
        "page_size": dev.cfg.geo.page_size,
        "map_unit": dev.cfg.unit_bytes(),
        "erase_block_bytes": dev.cfg.erase_unit_bytes(),
        "preset": dev.cfg.name,
        "ftl": dev.cfg.ftl.kind.name(),
        "pace": pace.name(),
        "pid": std::process::id(),
    });
    let capacity = dev.capacity();
    let sh = Arc::new(Shared::new(dev, pace, capacity));
    if let Some(log) = o.get("crash-log") {
        // a kept write log's states, served on request; the live device stays blank
        if let Err(e) = sh.crash.offline(Path::new(log), capacity) {
            let d = sh.lock();
            let _ = state::save(&d, &state_dir);
            die(e);
        }
    }

    let fail_and_save = |sh: &Shared, msg: String| -> ! {
        // Nothing was served: leave the state as it was.
        let d = sh.lock();
        let _ = state::save(&d, &state_dir);
        die(msg)
    };

    let listener = UnixListener::bind(&control).unwrap_or_else(|e| fail_and_save(&sh, format!("--control {}: {e}", control.display())));
    let (tx, rx) = mpsc::channel();
    let ctl = Arc::new(Control { sh: sh.clone(), state_dir: state_dir.clone(), events: tx.clone() });
    std::thread::spawn(move || ctl.serve(listener));

    let sig_tx = tx.clone();
    std::thread::spawn(move || loop {
        let mut sig = 0;
        if unsafe { libc::sigwait(&sigset, &mut sig) } == 0 {
            let _ = sig_tx.send(Event::Signal);
        }
    });

    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let fs = fusefs::EmuFs { sh: sh.clone(), uid, gid, created: SystemTime::now() };
    let mut opts = vec![
        fuser::MountOption::FSName("flashbed-emu".into()),
        fuser::MountOption::Subtype("flashbed".into()),
        fuser::MountOption::RW,
    ];
    if uid == 0 {
        opts.push(fuser::MountOption::AllowOther);
    }
    let session = fuser::spawn_mount2(fs, &mount, &opts)
        .unwrap_or_else(|e| fail_and_save(&sh, format!("cannot mount FUSE at {}: {e}", mount.display())));

    // Ready only once the file answers through the mount.
    let dev_path = mount.join(fusefs::DEVICE_NAME);
    let ok = (0..200).any(|_| {
        if std::fs::metadata(&dev_path).map_or(false, |m| m.size() == capacity) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        false
    });
    if !ok {
        unmount(&mount);
        fail_and_save(&sh, format!("the FUSE mount at {} did not come up", mount.display()));
    }
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "READY {info}");
        let _ = out.flush();
    }

    let ev = rx.recv().unwrap_or(Event::Signal);
    if let Event::Signal = ev {
        let mut d = sh.lock();
        crash::close(&mut d);
        if d.powered() {
            let t = sh.now(&d);
            if d.shutdown(t).is_err() {
                let t = sh.cut_time(&d);
                d.power_cut(t);
            }
        }
        if let Err(e) = state::save(&d, &state_dir) {
            eprintln!("flashbed-emu: error: {e}");
        }
    }
    // The device is off (cut or stopped): I/O fails from here on.
    unmount(&mount);
    let _ = std::fs::remove_file(&control);
    std::mem::forget(session);
    std::process::exit(0);
}
