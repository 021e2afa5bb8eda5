//! A device's persistent state directory:
//!   device.json  what it was made from (preset text, capacity, seed)
//!   data.img     sparse backing file, one slot per physical NAND page
//!   nand.bin     wear, block and page states, injected errors, RNG state
//!   ftl.bin      the durable mapping and the bad-block/spare table
//!   RUNNING      present while served; a leftover means it was not saved
//! Saves write new files and rename them in, so a crash during a save keeps
//! the previous state.

use std::fs;
use std::path::{Path, PathBuf};

use crate::config::{parse_preset, DeviceConfig, Preset};
use crate::device::Device;
use crate::ftl::hybrid::HybridFtl;
use crate::ftl::page::PageFtl;
use crate::ftl::Ftl;
use crate::media::Media;
use crate::nand::Nand;
use crate::persist::{Reader, Writer};
use crate::rng::Rng;
use crate::store::FileStore;
use crate::timing::Timeline;

const FORMAT: u64 = 1;

pub struct Meta {
    pub preset_name: String,
    pub preset_text: String,
    pub capacity: u64,
    pub seed: u64,
}

fn p(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

pub fn exists(dir: &Path) -> bool {
    p(dir, "device.json").exists()
}

fn err(dir: &Path, what: &str, e: impl std::fmt::Display) -> String {
    format!("state {}: {what}: {e}", dir.display())
}

fn write_atomic(dir: &Path, name: &str, data: &[u8]) -> Result<(), String> {
    let tmp = p(dir, &format!("{name}.tmp"));
    let f = fs::File::create(&tmp).and_then(|mut f| {
        use std::io::Write;
        f.write_all(data)?;
        f.sync_all()
    });
    f.map_err(|e| err(dir, &format!("cannot write {name}"), e))?;
    fs::rename(&tmp, p(dir, name)).map_err(|e| err(dir, &format!("cannot write {name}"), e))
}

pub fn read_meta(dir: &Path) -> Result<Meta, String> {
    let text = fs::read_to_string(p(dir, "device.json")).map_err(|e| err(dir, "cannot read device.json", e))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| err(dir, "device.json is damaged", e))?;
    let get_u = |k: &str| v.get(k).and_then(|x| x.as_u64()).ok_or_else(|| err(dir, "device.json is damaged", format!("no `{k}`")));
    if get_u("format")? != FORMAT {
        return Err(err(dir, "unsupported state format", get_u("format")?));
    }
    let get_s = |k: &str| {
        v.get(k).and_then(|x| x.as_str()).map(str::to_string).ok_or_else(|| err(dir, "device.json is damaged", format!("no `{k}`")))
    };
    Ok(Meta { preset_name: get_s("preset_name")?, preset_text: get_s("preset_text")?, capacity: get_u("capacity")?, seed: get_u("seed")? })
}

pub fn stored_config(dir: &Path, meta: &Meta) -> Result<DeviceConfig, String> {
    match parse_preset(&meta.preset_text, &format!("{}/device.json", dir.display()), &meta.preset_name, Some(meta.capacity)) {
        Ok(Preset::Block(c)) => Ok(c),
        Ok(_) => Err(err(dir, "device.json is damaged", "not a block preset")),
        Err(e) => Err(e.0),
    }
}

/// Creates a new device in an empty (or absent) directory.
pub fn create(dir: &Path, cfg: DeviceConfig, preset_text: &str, seed: u64) -> Result<Device, String> {
    fs::create_dir_all(dir).map_err(|e| err(dir, "cannot create", e))?;
    let store = FileStore::open(&p(dir, "data.img"), cfg.geo.page_size, cfg.geo.pages())
        .map_err(|e| err(dir, "cannot create data.img", e))?;
    let meta = serde_json::json!({
        "format": FORMAT,
        "preset_name": cfg.name,
        "preset_text": preset_text,
        "capacity": cfg.capacity,
        "seed": seed,
    });
    let dev = Device::new(cfg, Box::new(store), seed);
    save(&dev, dir)?;
    write_atomic(dir, "device.json", serde_json::to_string_pretty(&meta).unwrap().as_bytes())?;
    mark_running(dir)?;
    Ok(dev)
}

fn mark_running(dir: &Path) -> Result<(), String> {
    fs::write(p(dir, "RUNNING"), b"").map_err(|e| err(dir, "cannot write RUNNING", e))
}

/// Opens a saved device exactly as it was left.
pub fn open(dir: &Path, meta: &Meta) -> Result<Device, String> {
    if p(dir, "RUNNING").exists() {
        return Err(format!(
            "state {}: the device was not saved when its emulator last stopped (killed?); its mapping is older than its data; remove the directory to start over",
            dir.display()
        ));
    }
    let cfg = stored_config(dir, meta)?;
    let nand_bytes = fs::read(p(dir, "nand.bin")).map_err(|e| err(dir, "cannot read nand.bin", e))?;
    let ftl_bytes = fs::read(p(dir, "ftl.bin")).map_err(|e| err(dir, "cannot read ftl.bin", e))?;
    let mut nand = Nand::new(cfg.geo.clone(), cfg.rel.clone(), meta.seed);
    load_nand(&mut nand, &nand_bytes).map_err(|e| err(dir, "nand.bin is damaged", e))?;
    let store = FileStore::open(&p(dir, "data.img"), cfg.geo.page_size, cfg.geo.pages())
        .map_err(|e| err(dir, "cannot open data.img", e))?;
    let media = Media::new(nand, Box::new(store), Timeline::new(cfg.timing.clone(), cfg.geo.planes));
    let mut r = Reader::new(&ftl_bytes);
    let kind = r.u8().map_err(|e| err(dir, "ftl.bin is damaged", e))?;
    let ftl: Box<dyn Ftl> = match (kind, cfg.ftl.kind) {
        (0, crate::config::FtlKind::Page) => Box::new(PageFtl::load(&cfg, &media, &mut r).map_err(|e| err(dir, "ftl.bin is damaged", e))?),
        (1, crate::config::FtlKind::Hybrid) => Box::new(HybridFtl::load(&cfg, &media, &mut r).map_err(|e| err(dir, "ftl.bin is damaged", e))?),
        _ => return Err(err(dir, "ftl.bin is damaged", "FTL type does not match the preset")),
    };
    let dev = Device::assemble(cfg, media, ftl);
    mark_running(dir)?;
    Ok(dev)
}

/// Saves the device. Call only when the mapping is durable (after a flush
/// or a power cut), which is what a clean stop and a cut leave.
pub fn save(dev: &Device, dir: &Path) -> Result<(), String> {
    let _ = dev.media.io_error.as_ref().map(|e| err(dir, "backing store failed", e));
    let mut w = Writer::default();
    save_nand(&dev.media.nand, &mut w);
    write_atomic(dir, "nand.bin", &w.buf)?;
    let mut w = Writer::default();
    w.u8(match dev.cfg.ftl.kind {
        crate::config::FtlKind::Page => 0,
        crate::config::FtlKind::Hybrid => 1,
    });
    dev.ftl.save(&mut w);
    write_atomic(dir, "ftl.bin", &w.buf)?;
    let _ = fs::remove_file(p(dir, "RUNNING"));
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn save_nand(n: &Nand, w: &mut Writer) {
    w.u64(n.blocks.len() as u64);
    for b in &n.blocks {
        w.u32(b.erase_count);
        w.u32(b.write_ptr);
        w.u8(b.flags);
    }
    w.bytes(&n.pages);
    let mut inj: Vec<(u64, u32)> = n.injected.iter().map(|(&k, &v)| (k, v)).collect();
    inj.sort();
    w.u64(inj.len() as u64);
    for (k, v) in inj {
        w.u64(k);
        w.u32(v);
    }
    w.u64(n.rng.state());
}

fn load_nand(n: &mut Nand, bytes: &[u8]) -> std::io::Result<()> {
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "does not match the geometry");
    let mut r = Reader::new(bytes);
    if r.u64()? as usize != n.blocks.len() {
        return Err(bad());
    }
    for b in n.blocks.iter_mut() {
        b.erase_count = r.u32()?;
        b.write_ptr = r.u32()?;
        b.flags = r.u8()?;
    }
    let pages = r.bytes()?;
    if pages.len() != n.pages.len() {
        return Err(bad());
    }
    n.pages = pages;
    n.injected.clear();
    for _ in 0..r.u64()? {
        let k = r.u64()?;
        let v = r.u32()?;
        n.injected.insert(k, v);
    }
    n.rng = Rng::from_state(r.u64()?);
    n.refresh_all();
    Ok(())
}
