//! Shared helpers for the model tests: small presets and a data pattern
//! that identifies which write a unit's content came from.
#![allow(dead_code)]

use flash_model::config::{parse_preset, DeviceConfig, Preset};
use flash_model::store::{MemStore, NullStore};
use flash_model::Device;

pub fn cfg(text: &str, capacity: Option<u64>) -> DeviceConfig {
    match parse_preset(text, "test.toml", "test", capacity).unwrap() {
        Preset::Block(c) => c,
        _ => unreachable!(),
    }
}

pub fn mem_device(text: &str, seed: u64) -> Device {
    let c = cfg(text, None);
    let ps = c.geo.page_size;
    Device::new(c, Box::new(MemStore::new(ps)), seed)
}

pub fn null_device(text: &str, capacity: Option<u64>, seed: u64) -> Device {
    Device::new(cfg(text, capacity), Box::new(NullStore), seed)
}

/// SLC, page-mapped, 4 KiB pages, two planes, write cache.
pub const PAGE_SLC: &str = r#"
name = "page-slc"
[nand]
cell = "slc"
page_size = 4096
pages_per_block = 16
planes = 2
endurance = 100000
[nand.timing]
read_us = 25
program_us = [200]
erase_us = 1500
bus_mb_s = 200
[ftl]
type = "page"
capacity = "2M"
over_provisioning = 0.25
cache = "32K"
journal_interval = 64
"#;

/// MLC with 16 KiB pages mapped in 4 KiB units, paired-page protection.
pub const PAGE_MLC: &str = r#"
name = "page-mlc"
[nand]
cell = "mlc"
page_size = 16384
pages_per_block = 8
planes = 2
endurance = 3000
protect_paired_pages = true
[nand.timing]
read_us = 50
program_us = [500, 2000]
erase_us = 3000
bus_mb_s = 200
[ftl]
type = "page"
capacity = "2M"
over_provisioning = 0.15
map_unit = 4096
cache = "16K"
journal_interval = 16
"#;

/// Hybrid log-block FTL, MLC, 2 open AUs of 128 KiB.
pub const HYBRID: &str = r#"
name = "hybrid"
[nand]
cell = "mlc"
page_size = 4096
pages_per_block = 16
planes = 2
endurance = 3000
protect_paired_pages = true
[nand.timing]
read_us = 50
program_us = [500, 1500]
erase_us = 3000
bus_mb_s = 100
[ftl]
type = "hybrid"
capacity = "1M"
over_provisioning = 0.1
open_aus = 2
cache = "8K"
"#;

pub const UNIT_MAGIC: u64 = 0xF1A5_4BED;

/// Content of unit `addr` written as version `ver` (ver > 0).
pub fn pattern(buf: &mut [u8], addr: u64, ver: u64) {
    let mut x = addr.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ver.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
    buf[0..8].copy_from_slice(&UNIT_MAGIC.to_le_bytes());
    buf[8..16].copy_from_slice(&addr.to_le_bytes());
    buf[16..24].copy_from_slice(&ver.to_le_bytes());
}

/// All zero bytes: an OR over the whole slice, which the compiler vectorizes (a byte-by-byte
/// `all` with its early exit does not): most of the model checks' time was this test.
pub fn zeroes(b: &[u8]) -> bool {
    b.iter().fold(0u8, |acc, &x| acc | x) == 0
}

/// Which version a unit holds: Some(0) for zeroes, Some(v) for an intact
/// pattern of unit `addr`, None for anything else (foreign or mixed data).
pub fn decode(buf: &[u8], addr: u64) -> Option<u64> {
    if zeroes(buf) {
        return Some(0);
    }
    let ver = u64::from_le_bytes(buf[16..24].try_into().unwrap());
    let mut expect = vec![0u8; buf.len()];
    pattern(&mut expect, addr, ver);
    if expect == buf {
        Some(ver)
    } else {
        None
    }
}

/// What each block of a device (unit or sector, `size` bytes) may hold: its
/// latest version, its last flushed one, and those written since that flush.
pub struct Versions {
    pub size: u64,
    /// The last version handed out (versions count up from 1; 0 means zeroes).
    pub last: u64,
    pub current: Vec<u64>,
    pub flushed: Vec<u64>,
    pub since_flush: Vec<Vec<u64>>,
}

impl Versions {
    pub fn new(blocks: u64, size: u64) -> Versions {
        let n = blocks as usize;
        Versions { size, last: 0, current: vec![0; n], flushed: vec![0; n], since_flush: vec![vec![]; n] }
    }

    /// Fills the front of `buf` with a new version of each of `count` blocks
    /// from `first` on, records them, and returns the filled part.
    pub fn new_versions<'a>(&mut self, buf: &'a mut [u8], first: u64, count: u64) -> &'a [u8] {
        let size = self.size as usize;
        for i in 0..count {
            self.last += 1;
            let i = i as usize;
            pattern(&mut buf[i * size..(i + 1) * size], first + i as u64, self.last);
            self.wrote(first + i as u64, self.last);
        }
        &buf[..count as usize * size]
    }

    /// Block `a` now holds `ver` (0: zeroes, after a discard).
    pub fn wrote(&mut self, a: u64, ver: u64) {
        self.current[a as usize] = ver;
        self.since_flush[a as usize].push(ver);
    }

    pub fn flushed_all(&mut self) {
        for a in 0..self.current.len() {
            self.flushed[a] = self.current[a];
            self.since_flush[a].clear();
        }
    }

    /// After a cut and restart: every block must hold its last flushed version
    /// or one written after that flush, never anything else. What it holds
    /// becomes the new flushed state. Returns the clock after the reads.
    pub fn check_after_cut(&mut self, d: &mut Device, mut t: u64) -> Result<u64, String> {
        let mut buf = vec![0u8; self.size as usize];
        for a in 0..self.current.len() as u64 {
            t = d.read(t, a * self.size, &mut buf).map_err(|e| format!("read after cut, block {a}: {e:?}"))?;
            let got = decode(&buf, a).ok_or_else(|| format!("block {a}: content never written there"))?;
            let i = a as usize;
            if got != self.flushed[i] && !self.since_flush[i].contains(&got) {
                return Err(format!("block {a}: version {got} after cut; flushed {}, later {:?}",
                                   self.flushed[i], self.since_flush[i]));
            }
            self.current[i] = got;
            self.flushed[i] = got;
            self.since_flush[i].clear();
        }
        Ok(t)
    }
}

/// `PAGE_MLC` with an SLC-mode write buffer of two superblocks (256 KiB).
pub fn page_mlc_slc(idle_ms: f64) -> String {
    PAGE_MLC
        .replace("bus_mb_s = 200", "bus_mb_s = 200\nslc_program_us = 250")
        .replace("journal_interval = 16", &format!("journal_interval = 16\nslc_cache = \"256K\"\nslc_idle_ms = {idle_ms}"))
}
