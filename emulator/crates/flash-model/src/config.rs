//! Device presets: parsing, validation and geometry derivation.
//!
//! A preset is a TOML file describing one device. Every error names the file
//! and the offending field in one line, because presets are hand-edited.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellType {
    Slc,
    Mlc,
    Tlc,
}

impl CellType {
    pub fn bits(self) -> u32 {
        match self {
            CellType::Slc => 1,
            CellType::Mlc => 2,
            CellType::Tlc => 3,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            CellType::Slc => "slc",
            CellType::Mlc => "mlc",
            CellType::Tlc => "tlc",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FtlKind {
    Page,
    Hybrid,
}

impl FtlKind {
    pub fn name(self) -> &'static str {
        match self {
            FtlKind::Page => "page",
            FtlKind::Hybrid => "hybrid",
        }
    }
}

/// Physical NAND layout. Blocks are numbered so that `block % planes` is the
/// plane: a "row" of `planes` blocks (one per plane) is a superblock, the unit
/// the FTLs allocate, program (striped, for plane parallelism) and erase.
#[derive(Debug, Clone, PartialEq)]
pub struct Geometry {
    pub cell: CellType,
    pub page_size: u32,
    pub oob_size: u32,
    pub pages_per_block: u32,
    pub planes: u32,
    /// Rows holding user data plus over-provisioning (superblocks).
    pub data_rows: u32,
    /// Rows of replacement blocks for bad-block management.
    pub spare_rows: u32,
}

impl Geometry {
    pub fn rows(&self) -> u32 {
        self.data_rows + self.spare_rows
    }
    pub fn blocks(&self) -> u32 {
        self.rows() * self.planes
    }
    pub fn pages(&self) -> u64 {
        self.blocks() as u64 * self.pages_per_block as u64
    }
    pub fn block_bytes(&self) -> u64 {
        self.pages_per_block as u64 * self.page_size as u64
    }
    pub fn sb_pages(&self) -> u32 {
        self.pages_per_block * self.planes
    }
    pub fn sb_bytes(&self) -> u64 {
        self.block_bytes() * self.planes as u64
    }
}

/// NAND operation times in nanoseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    pub read_ns: u64,
    /// Program time per page type: SLC [page], MLC [lower, upper],
    /// TLC [lower, middle, upper].
    pub program_ns: Vec<u64>,
    pub erase_ns: u64,
    /// NAND bus (controller <-> flash) rate, bytes/s; 0 = infinitely fast.
    pub bus_bytes_per_s: u64,
    /// Host interface rate (eMMC/SD bus, USB), bytes/s; 0 = infinitely fast.
    pub host_bytes_per_s: u64,
    /// Controller firmware time per host read / write command (mapping
    /// lookups and updates the NAND model does not charge), serialised on
    /// the controller.
    pub read_overhead_ns: u64,
    pub write_overhead_ns: u64,
    /// Program time of a page in SLC mode (the SLC write buffer's pages;
    /// see `FtlParams::slc_cache_bytes`); 0 when there is no buffer.
    pub slc_program_ns: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Reliability {
    pub endurance: u32,
    pub rber_fresh: f64,
    pub rber_eol: f64,
    pub ecc_bits: u32,
    pub ecc_codeword: u32,
    pub factory_bad_ratio: f64,
    pub program_fail_eol: f64,
    pub erase_fail_eol: f64,
    pub protect_paired_pages: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FtlParams {
    pub kind: FtlKind,
    pub over_provisioning: f64,
    pub spare_ratio: f64,
    pub map_unit: u32,
    pub cache_bytes: u64,
    pub journal_interval: u32,
    pub wear_level_threshold: u32,
    pub open_aus: u32,
    /// Hybrid FTL: log blocks accept pages only in order (gaps are filled
    /// from the data block; a backward write closes the AU), as in the
    /// cheapest cards and sticks.
    pub sequential_log: bool,
    /// Page FTL: bytes of SLC-mode write buffer in front of the MLC/TLC
    /// array (0: none). Host data lands there first and is folded into the
    /// array later, in the background when the device is idle, in the
    /// foreground when the buffer is full.
    pub slc_cache_bytes: u64,
    /// Idle time after which the controller starts folding the buffer.
    pub slc_idle_ns: u64,
    /// A run of logically consecutive host units at least this long is a
    /// sequential stream: its further units bypass the SLC buffer and are
    /// programmed straight into the array (0: every host write goes through
    /// the buffer).
    pub slc_bypass_bytes: u64,
}

/// The rates a preset reproduces: `[published]`, measurements of the named
/// real part (or `[declared]`, the older table of the same four figures).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Declared {
    pub seq_read_mb_s: f64,
    pub seq_write_mb_s: f64,
    pub rand_write_4k_iops: f64,
    pub rand_read_4k_iops: f64,
    /// Bytes the published random 4 KiB figures spread over (0: unknown).
    pub span: u64,
    /// How the figures were measured (tool, host, through a filesystem...).
    pub method: String,
    /// Where each figure comes from, by figure name.
    pub sources: BTreeMap<String, String>,
}

/// The real device a preset is a twin of (`[part]`): free-text fields.
pub type Part = BTreeMap<String, String>;

const FIGURES: [&str; 4] = ["seq_read_mb_s", "seq_write_mb_s", "rand_read_4k_iops", "rand_write_4k_iops"];

#[derive(Debug, Clone, PartialEq)]
pub struct DeviceConfig {
    pub name: String,
    pub description: String,
    /// Logical (host-visible) capacity in bytes.
    pub capacity: u64,
    pub geo: Geometry,
    pub timing: Timing,
    pub rel: Reliability,
    pub ftl: FtlParams,
    pub declared: Declared,
    pub part: Part,
}

/// Superblocks the page FTL keeps beyond the over-provisioning: the two open
/// write points and the free reserve greedy GC refills. Kept out of the OP
/// figure so the configured OP is what GC actually sees.
pub const PAGE_FTL_RESERVE_SBS: u32 = 3;

impl DeviceConfig {
    /// Host mapping unit: the granularity reads/writes are cached and mapped at.
    pub fn unit_bytes(&self) -> u32 {
        match self.ftl.kind {
            FtlKind::Page => self.ftl.map_unit,
            FtlKind::Hybrid => self.geo.page_size,
        }
    }
    pub fn units(&self) -> u64 {
        self.capacity / self.unit_bytes() as u64
    }
    /// The FTL's erase unit as seen from the host (what mkfs tuning should
    /// align to): the superblock, i.e. an allocation unit for the hybrid FTL.
    pub fn erase_unit_bytes(&self) -> u64 {
        self.geo.sb_bytes()
    }
    /// Bytes a superblock holds in SLC mode: one bit per cell.
    pub fn slc_sb_bytes(&self) -> u64 {
        self.geo.sb_bytes() / self.geo.cell.bits() as u64
    }
    /// Superblocks set aside as the SLC write buffer.
    pub fn slc_sbs(&self) -> u32 {
        self.ftl.slc_cache_bytes.div_ceil(self.slc_sb_bytes()) as u32
    }

    /// JSON description used by `flashbed-emu describe` and READY.
    pub fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name,
            "kind": "block",
            "description": self.description,
            "ftl": self.ftl.kind.name(),
            "cell": self.geo.cell.name(),
            "capacity_bytes": self.capacity,
            "page_size": self.geo.page_size,
            "oob_size": self.geo.oob_size,
            "map_unit": self.unit_bytes(),
            "pages_per_block": self.geo.pages_per_block,
            "planes": self.geo.planes,
            "physical_block_bytes": self.geo.block_bytes(),
            "erase_block_bytes": self.erase_unit_bytes(),
            "blocks": self.geo.blocks(),
            "spare_blocks": self.geo.spare_rows * self.geo.planes,
            "over_provisioning": self.ftl.over_provisioning,
            "open_aus": if self.ftl.kind == FtlKind::Hybrid { Some(self.ftl.open_aus) } else { None },
            "sequential_log": self.ftl.kind == FtlKind::Hybrid && self.ftl.sequential_log,
            "cache_bytes": self.ftl.cache_bytes,
            "slc_cache_bytes": self.ftl.slc_cache_bytes,
            "slc_program_us": self.timing.slc_program_ns as f64 / 1000.0,
            "slc_idle_ms": self.ftl.slc_idle_ns as f64 / 1e6,
            "slc_bypass_bytes": self.ftl.slc_bypass_bytes,
            // The host interface's rate (bytes/s, 0: unlimited): no write is the device's before
            // its bytes crossed it (the report's device check)
            "host_bytes_per_s": self.timing.host_bytes_per_s,
            "endurance": self.rel.endurance,
            // a cut during an upper-page program damages the lower pages of its wordline unless
            // the part protects them (crash states: data the device, not the filesystem, lost)
            "protect_paired_pages": self.rel.protect_paired_pages,
            "declared": {
                "seq_read_mb_s": self.declared.seq_read_mb_s,
                "seq_write_mb_s": self.declared.seq_write_mb_s,
                "rand_write_4k_iops": self.declared.rand_write_4k_iops,
                "rand_read_4k_iops": self.declared.rand_read_4k_iops,
                "span_bytes": self.declared.span,
                "method": self.declared.method,
                "sources": self.declared.sources,
            },
            "part": self.part,
        })
    }
}

/// Parses "4096", "64K", "64M", "1G", "1T" (binary units).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1u64 << 10),
        'm' | 'M' => (&s[..s.len() - 1], 1u64 << 20),
        'g' | 'G' => (&s[..s.len() - 1], 1u64 << 30),
        't' | 'T' => (&s[..s.len() - 1], 1u64 << 40),
        _ => (s, 1),
    };
    let n: u64 = num.trim().parse().ok()?;
    n.checked_mul(mult)
}

pub enum Preset {
    Block(DeviceConfig),
    /// Raw NAND preset served by nandsim inside the lab kernel.
    Nandsim { name: String },
    /// A plain host file handed to the lab without any flash model.
    File { name: String },
}

/// Loads a preset file; `capacity` overrides the logical capacity.
pub fn load_preset(path: &Path, capacity: Option<u64>) -> Result<Preset, ConfigError> {
    let (text, file, stem) = read_preset(path, &[])?;
    parse_preset(&text, &file, &stem, capacity)
}

/// A preset file's text with `sets` on top (`with_sets`), its name for messages, and its stem.
pub fn read_preset(path: &Path, sets: &[Set]) -> Result<(String, String, String), ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError(format!("preset {}: cannot read: {e}", path.display())))?;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("preset").to_string();
    let text = with_sets(&text, sets).map_err(|e| ConfigError(format!("preset {}: {e}", path.display())))?;
    Ok((text, path.display().to_string(), stem))
}

/// Loads a preset and insists it is a block-device preset.
pub fn load_block_preset(path: &Path, capacity: Option<u64>) -> Result<DeviceConfig, ConfigError> {
    block_of(load_preset(path, capacity)?)
}

/// A block-device preset, or why not.
pub fn block_of(p: Preset) -> Result<DeviceConfig, ConfigError> {
    match p {
        Preset::Block(c) => Ok(c),
        Preset::Nandsim { name } => Err(nandsim_refusal(&name)),
        Preset::File { name } => Err(file_refusal(&name)),
    }
}

pub fn file_refusal(name: &str) -> ConfigError {
    ConfigError(format!("preset {name} is a plain-file preset used directly by the lab; flashbed-emu serves emulated flash block devices"))
}

pub fn nandsim_refusal(name: &str) -> ConfigError {
    ConfigError(format!(
        "preset {name} is a raw NAND preset for nandsim in the lab; flashbed-emu serves block devices"
    ))
}

/// Typed access to one TOML table that remembers which keys were read, so
/// unknown (misspelt) keys can be reported.
struct Fields<'a> {
    file: &'a str,
    prefix: String,
    table: &'a toml::Table,
    seen: BTreeSet<String>,
}

impl<'a> Fields<'a> {
    fn new(file: &'a str, prefix: &str, table: &'a toml::Table) -> Self {
        Fields { file, prefix: prefix.to_string(), table, seen: BTreeSet::new() }
    }

    fn path(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.prefix)
        }
    }

    fn err(&self, key: &str, msg: impl fmt::Display) -> ConfigError {
        ConfigError(format!("preset {}: field `{}`: {msg}", self.file, self.path(key)))
    }

    fn get(&mut self, key: &str) -> Option<&'a toml::Value> {
        self.seen.insert(key.to_string());
        self.table.get(key)
    }

    fn sub(&mut self, key: &str) -> Result<Option<Fields<'a>>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(toml::Value::Table(t)) => Ok(Some(Fields::new(self.file, &self.path(key), t))),
            Some(_) => Err(self.err(key, "must be a table")),
        }
    }

    fn string(&mut self, key: &str) -> Result<Option<String>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.err(key, "must be a string")),
        }
    }

    fn boolean(&mut self, key: &str, default: bool) -> Result<bool, ConfigError> {
        match self.get(key) {
            None => Ok(default),
            Some(toml::Value::Boolean(b)) => Ok(*b),
            Some(_) => Err(self.err(key, "must be true or false")),
        }
    }

    fn float(&mut self, key: &str) -> Result<Option<f64>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(toml::Value::Float(f)) if f.is_finite() => Ok(Some(*f)),
            Some(toml::Value::Integer(i)) => Ok(Some(*i as f64)),
            Some(_) => Err(self.err(key, "must be a number")),
        }
    }

    fn float_in(&mut self, key: &str, default: f64, lo: f64, hi: f64) -> Result<f64, ConfigError> {
        let v = self.float(key)?.unwrap_or(default);
        if v < lo || v > hi {
            return Err(self.err(key, format!("{v} is out of range [{lo}, {hi}]")));
        }
        Ok(v)
    }

    fn req_float_in(&mut self, key: &str, lo: f64, hi: f64) -> Result<f64, ConfigError> {
        if self.table.get(key).is_none() {
            return Err(self.err(key, "is missing"));
        }
        self.float_in(key, 0.0, lo, hi)
    }

    fn int(&mut self, key: &str) -> Result<Option<u64>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(toml::Value::Integer(i)) if *i >= 0 => Ok(Some(*i as u64)),
            Some(_) => Err(self.err(key, "must be a non-negative integer")),
        }
    }

    fn req_int_in(&mut self, key: &str, lo: u64, hi: u64) -> Result<u64, ConfigError> {
        let v = self.int(key)?.ok_or_else(|| self.err(key, "is missing"))?;
        if v < lo || v > hi {
            return Err(self.err(key, format!("{v} is out of range [{lo}, {hi}]")));
        }
        Ok(v)
    }

    fn int_in(&mut self, key: &str, default: u64, lo: u64, hi: u64) -> Result<u64, ConfigError> {
        let v = self.int(key)?.unwrap_or(default);
        if v < lo || v > hi {
            return Err(self.err(key, format!("{v} is out of range [{lo}, {hi}]")));
        }
        Ok(v)
    }

    /// A byte size: integer, or string with a binary K/M/G/T suffix.
    fn size(&mut self, key: &str) -> Result<Option<u64>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(toml::Value::Integer(i)) if *i >= 0 => Ok(Some(*i as u64)),
            Some(toml::Value::String(s)) => parse_size(s)
                .map(Some)
                .ok_or_else(|| self.err(key, format!("`{s}` is not a size (bytes or e.g. 512K, 64M, 8G)"))),
            Some(_) => Err(self.err(key, "must be a size (bytes or e.g. 512K, 64M, 8G)")),
        }
    }

    fn finish(self) -> Result<(), ConfigError> {
        for k in self.table.keys() {
            if !self.seen.contains(k) {
                return Err(ConfigError(format!(
                    "preset {}: field `{}`: unknown field",
                    self.file,
                    self.path(k)
                )));
            }
        }
        Ok(())
    }
}

fn t_err_path(file: &str, path: &str, msg: &str) -> ConfigError {
    ConfigError(format!("preset {file}: field `{path}`: {msg}"))
}

fn us_to_ns(us: f64) -> u64 {
    (us * 1000.0).round() as u64
}

fn mb_s(v: f64) -> u64 {
    (v * 1e6) as u64
}

/// One preset field set on top of the file's: VALUE is a TOML value (`ftl.slc_cache="4M"`,
/// `nand.planes=2`, `nand.timing.program_us=[600, 3100]`). A variant of a preset (another
/// value of one of its assumptions, its fitted fields refitted: flashbed's robust pass) is
/// its preset's text with a `[variant]` table of such fields at its end (`with_sets`), so the
/// text a device is made from (kept in its state and in its write log's header) says all of
/// it, and the same parser checks the set values as the file's.
#[derive(Debug, Clone, PartialEq)]
pub struct Set {
    pub path: String,
    /// VALUE as given (TOML)
    pub raw: String,
}

/// The tables a set field may be in: the device model's; a part's published figures and its
/// free text are the part's, not settings.
const SETTABLE: [&str; 3] = ["nand", "nand.timing", "ftl"];

impl Set {
    /// `PATH=VALUE`, as `flashbed-emu --set` takes it.
    pub fn parse(text: &str) -> Result<Set, ConfigError> {
        let (path, value) = text
            .split_once('=')
            .ok_or_else(|| ConfigError(format!("--set `{text}`: give PATH=VALUE, e.g. ftl.slc_cache=\"4M\"")))?;
        let set = Set { path: path.trim().to_string(), raw: value.trim().to_string() };
        set.value().map_err(|why| ConfigError(format!("--set `{text}`: {why}")))?;
        Ok(set)
    }

    fn value(&self) -> Result<toml::Value, String> {
        let (table, key) = self.path.rsplit_once('.').ok_or("PATH names a table and a field, e.g. ftl.cache")?;
        if !SETTABLE.contains(&table) || key.is_empty() {
            return Err(format!("only fields of [{}] can be set", SETTABLE.join("], [")));
        }
        let doc: toml::Table =
            format!("v = {}", self.raw).parse().map_err(|_| "VALUE is not a TOML value (a string needs quotes)")?;
        Ok(doc["v"].clone())
    }
}

/// A preset's text with `sets` on top (its `[variant]` table).
pub fn with_sets(text: &str, sets: &[Set]) -> Result<String, ConfigError> {
    if sets.is_empty() {
        return Ok(text.to_string());
    }
    let table: Result<toml::Table, _> = text.parse();
    if table.map_or(false, |t| t.contains_key("variant")) {
        return Err(ConfigError("the preset is a variant already ([variant]): set its fields there".into()));
    }
    let mut out = text.to_string();
    out.push_str("\n[variant]\n");
    for s in sets {
        out.push_str(&format!("\"{}\" = {}\n", s.path, s.raw));
    }
    Ok(out)
}

/// Applies a preset's `[variant]` table to the rest of it.
fn apply_variant(table: &mut toml::Table, file: &str) -> Result<(), ConfigError> {
    let Some(v) = table.remove("variant") else { return Ok(()) };
    let toml::Value::Table(fields) = v else {
        return Err(ConfigError(format!("preset {file}: field `variant`: must be a table")));
    };
    for (path, value) in fields {
        let bad = |why: String| ConfigError(format!("preset {file}: field `variant.\"{path}\"`: {why}"));
        let probe = Set { path: path.clone(), raw: "0".into() }; // where it may go; the value is the parser's
        if let Err(why) = probe.value() {
            return Err(bad(why));
        }
        let parts: Vec<&str> = path.split('.').collect();
        let mut t = &mut *table;
        for name in &parts[..parts.len() - 1] {
            t = match t.entry(name.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new())) {
                toml::Value::Table(inner) => inner,
                _ => return Err(bad(format!("`{name}` is not a table"))),
            };
        }
        t.insert(parts[parts.len() - 1].to_string(), value);
    }
    Ok(())
}

pub fn parse_preset(
    text: &str,
    file: &str,
    default_name: &str,
    capacity_override: Option<u64>,
) -> Result<Preset, ConfigError> {
    let mut table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let msg = e.message().to_string();
        ConfigError(format!("preset {file}: not valid TOML: {}", msg.lines().next().unwrap_or("")))
    })?;
    apply_variant(&mut table, file)?;
    let mut top = Fields::new(file, "", &table);
    let name = top.string("name")?.unwrap_or_else(|| default_name.to_string());
    let kind = top.string("kind")?.unwrap_or_else(|| "block".into());
    match kind.as_str() {
        "block" => {}
        "nandsim" => return Ok(Preset::Nandsim { name }),
        "file" => return Ok(Preset::File { name }),
        other => return Err(top.err("kind", format!("`{other}` is not one of block, nandsim, file"))),
    }
    let description = top.string("description")?.unwrap_or_default();

    let mut nand = top.sub("nand")?.ok_or_else(|| top.err("nand", "section is missing"))?;
    let cell = match nand.string("cell")?.as_deref() {
        Some("slc") => CellType::Slc,
        Some("mlc") => CellType::Mlc,
        Some("tlc") => CellType::Tlc,
        Some(o) => return Err(nand.err("cell", format!("`{o}` is not one of slc, mlc, tlc"))),
        None => return Err(nand.err("cell", "is missing")),
    };
    let page_size = nand.req_int_in("page_size", 512, 65536)? as u32;
    if !page_size.is_power_of_two() {
        return Err(nand.err("page_size", format!("{page_size} is not a power of two")));
    }
    let oob_size = nand.int_in("oob_size", (page_size / 32) as u64, 0, 8192)? as u32;
    let ppb = nand.req_int_in("pages_per_block", 2, 4096)? as u32;
    if cell == CellType::Mlc && ppb % 2 != 0 {
        return Err(nand.err("pages_per_block", format!("{ppb} is odd; an MLC block holds two pages per wordline")));
    }
    // SLC and MLC erase blocks are power-of-two page counts on real parts (a block of 63
    // pages would put every erase unit the host aligns to off its boundary); TLC parts
    // also come in whole wordlines of three pages (e.g. 384)
    if !ppb.is_power_of_two() && (cell != CellType::Tlc || ppb % 3 != 0) {
        let want = if cell == CellType::Tlc { "a power of two or a multiple of 3" } else { "a power of two" };
        return Err(nand.err("pages_per_block", format!("{ppb} is not {want} (e.g. 64, 128, 256)")));
    }
    let planes = nand.int_in("planes", 1, 1, 64)? as u32;
    let endurance = nand.req_int_in("endurance", 1, 10_000_000)? as u32;
    let rber_fresh = nand.float_in("rber_fresh", 0.0, 0.0, 0.01)?;
    let rber_eol = nand.float_in("rber_eol", rber_fresh, 0.0, 0.05)?;
    if rber_eol < rber_fresh {
        return Err(nand.err("rber_eol", "must not be below rber_fresh"));
    }
    let ecc_codeword = nand.int_in("ecc_codeword", 1024.min(page_size as u64), 64, page_size as u64)? as u32;
    if page_size % ecc_codeword != 0 {
        return Err(nand.err("ecc_codeword", format!("{ecc_codeword} does not divide page_size {page_size}")));
    }
    let ecc_bits = nand.int_in("ecc_bits", 8, 0, 1000)? as u32;
    let factory_bad_ratio = nand.float_in("factory_bad_ratio", 0.0, 0.0, 0.1)?;
    let program_fail_eol = nand.float_in("program_fail_eol", 0.0, 0.0, 1.0)?;
    let erase_fail_eol = nand.float_in("erase_fail_eol", 0.0, 0.0, 1.0)?;
    let protect_paired_pages = nand.boolean("protect_paired_pages", false)?;

    let mut t = nand.sub("timing")?.ok_or_else(|| nand.err("timing", "section is missing"))?;
    let read_ns = us_to_ns(t.req_float_in("read_us", 0.0, 1e6)?);
    let program_ns: Vec<u64> = match t.get("program_us") {
        None => return Err(t.err("program_us", "is missing")),
        Some(toml::Value::Array(a)) => {
            let mut v = Vec::new();
            for x in a {
                let f = match x {
                    toml::Value::Float(f) => *f,
                    toml::Value::Integer(i) => *i as f64,
                    _ => return Err(t.err("program_us", "must be an array of numbers")),
                };
                if !(0.0..=1e6).contains(&f) {
                    return Err(t.err("program_us", format!("{f} is out of range [0, 1000000]")));
                }
                v.push(us_to_ns(f));
            }
            v
        }
        Some(toml::Value::Float(f)) => vec![us_to_ns(*f)],
        Some(toml::Value::Integer(i)) => vec![us_to_ns(*i as f64)],
        Some(_) => return Err(t.err("program_us", "must be a number or an array of numbers")),
    };
    if program_ns.len() != cell.bits() as usize {
        return Err(t.err(
            "program_us",
            format!(
                "has {} entries; a {} cell needs {} (one per page type: lower{}{})",
                program_ns.len(),
                cell.name(),
                cell.bits(),
                if cell.bits() == 3 { ", middle" } else { "" },
                if cell.bits() > 1 { ", upper" } else { "" }
            ),
        ));
    }
    let erase_ns = us_to_ns(t.req_float_in("erase_us", 0.0, 1e7)?);
    let bus = t.float_in("bus_mb_s", 0.0, 0.0, 1e5)?;
    let slc_program = t.float("slc_program_us")?;
    if let Some(v) = slc_program {
        if !(1.0..=1e6).contains(&v) {
            return Err(t.err("slc_program_us", format!("{v} is out of range [1, 1000000]")));
        }
        if cell == CellType::Slc {
            return Err(t.err("slc_program_us", "applies to mlc and tlc parts (an slc part has no SLC mode)"));
        }
    }
    t.finish()?;
    nand.finish()?;

    let mut f = top.sub("ftl")?.ok_or_else(|| top.err("ftl", "section is missing"))?;
    let kind = match f.string("type")?.as_deref() {
        Some("page") => FtlKind::Page,
        Some("hybrid") => FtlKind::Hybrid,
        Some(o) => return Err(f.err("type", format!("`{o}` is not one of page, hybrid"))),
        None => return Err(f.err("type", "is missing")),
    };
    let preset_capacity = f.size("capacity")?.ok_or_else(|| f.err("capacity", "is missing"))?;
    let over_provisioning = f.float_in("over_provisioning", 0.07, 0.0, 4.0)?;
    if kind == FtlKind::Page && over_provisioning < 0.01 {
        return Err(f.err("over_provisioning", "a page-mapped FTL needs at least 0.01 for garbage collection"));
    }
    let spare_ratio = f.float_in("spare_ratio", 0.02, 0.0, 0.5)?;
    let map_unit = f.int_in("map_unit", 4096.min(page_size as u64), 512, page_size as u64)? as u32;
    if kind == FtlKind::Page && (!map_unit.is_power_of_two() || page_size % map_unit != 0) {
        return Err(f.err("map_unit", format!("{map_unit} must be a power of two dividing page_size {page_size}")));
    }
    let cache_bytes = f.size("cache")?.unwrap_or(0);
    if cache_bytes > (1 << 30) {
        return Err(f.err("cache", "must be at most 1G"));
    }
    let journal_interval = f.int_in("journal_interval", 1024, 1, 1 << 24)? as u32;
    let wear_level_threshold = f.int_in("wear_level_threshold", 100, 1, 1 << 24)? as u32;
    let open_aus = f.int_in("open_aus", 2, 1, 64)? as u32;
    let host = f.float_in("host_mb_s", 0.0, 0.0, 1e5)?;
    let read_overhead_ns = us_to_ns(f.float_in("read_overhead_us", 0.0, 0.0, 1e6)?);
    let write_overhead_ns = us_to_ns(f.float_in("write_overhead_us", 0.0, 0.0, 1e6)?);
    let sequential_log = f.boolean("sequential_log", false)?;
    if sequential_log && kind != FtlKind::Hybrid {
        return Err(f.err("sequential_log", "applies to the hybrid FTL only"));
    }
    let slc_cache_bytes = f.size("slc_cache")?.unwrap_or(0);
    let slc_idle_ns = us_to_ns(f.float_in("slc_idle_ms", 0.0, 0.0, 1e5)? * 1000.0);
    if f.table.contains_key("slc_idle_ms") && slc_cache_bytes == 0 {
        return Err(f.err("slc_idle_ms", "needs `ftl.slc_cache` (the buffer it flushes)"));
    }
    let slc_bypass_bytes = f.size("slc_bypass")?.unwrap_or(0);
    if f.table.contains_key("slc_bypass") && slc_cache_bytes == 0 {
        return Err(f.err("slc_bypass", "needs `ftl.slc_cache` (the buffer sequential streams bypass)"));
    }
    if slc_bypass_bytes % map_unit as u64 != 0 {
        return Err(f.err("slc_bypass", format!("{slc_bypass_bytes} is not a whole number of mapping units ({map_unit} bytes)")));
    }
    if slc_cache_bytes > 0 {
        if kind != FtlKind::Page {
            return Err(f.err("slc_cache", "applies to the page FTL only"));
        }
        if cell == CellType::Slc {
            return Err(f.err("slc_cache", "needs an mlc or tlc part (an slc part has no faster mode)"));
        }
        if slc_program.is_none() {
            return Err(f.err("slc_cache", "needs `nand.timing.slc_program_us` (the page program time in SLC mode)"));
        }
    } else if slc_program.is_some() {
        return Err(t_err_path(file, "nand.timing.slc_program_us", "needs `ftl.slc_cache` (the buffer programmed in SLC mode)"));
    }
    f.finish()?;

    let mut declared = Declared::default();
    let published = top.sub("published")?;
    let older = top.sub("declared")?;
    if published.is_some() && older.is_some() {
        return Err(top.err("declared", "give the rates once, in [published]"));
    }
    let is_published = published.is_some();
    if let Some(mut d) = published.or(older) {
        declared.seq_read_mb_s = d.float_in("seq_read_mb_s", 0.0, 0.0, 1e5)?;
        declared.seq_write_mb_s = d.float_in("seq_write_mb_s", 0.0, 0.0, 1e5)?;
        declared.rand_write_4k_iops = d.float_in("rand_write_4k_iops", 0.0, 0.0, 1e8)?;
        declared.rand_read_4k_iops = d.float_in("rand_read_4k_iops", 0.0, 0.0, 1e8)?;
        if is_published {
            declared.span = d.size("span")?.unwrap_or(0);
            declared.method = d.string("method")?.unwrap_or_default();
            if let Some(mut src) = d.sub("sources")? {
                for k in src.table.keys() {
                    if !FIGURES.contains(&k.as_str()) {
                        return Err(src.err(k, format!("is not one of {}", FIGURES.join(", "))));
                    }
                }
                for k in FIGURES {
                    if let Some(v) = src.string(k)? {
                        declared.sources.insert(k.to_string(), v);
                    }
                }
                src.finish()?;
            }
        }
        d.finish()?;
    }
    // What the preset says about its own values (assumptions with their ranges, fitted and
    // measured fields): flashbed reads and checks these tables (devices/assumptions.py); the
    // device model is the same whatever they say.
    for table in ["assumptions", "fitted", "measured"] {
        top.sub(table)?;
    }
    let mut part = Part::new();
    if let Some(mut t) = top.sub("part")? {
        for k in t.table.keys().cloned().collect::<Vec<_>>() {
            let v = t.string(&k)?.unwrap_or_default();
            part.insert(k, v);
        }
        t.finish()?;
    }
    top.finish()?;

    let geo0 = Geometry {
        cell,
        page_size,
        oob_size,
        pages_per_block: ppb,
        planes,
        data_rows: 0,
        spare_rows: 0,
    };
    let sb_bytes = geo0.sb_bytes();
    let unit = if kind == FtlKind::Page { map_unit as u64 } else { page_size as u64 };
    let requested = capacity_override.unwrap_or(preset_capacity);
    let cap_field = if capacity_override.is_some() { "--capacity".to_string() } else { format!("preset {file}: field `ftl.capacity`") };
    // The hybrid FTL maps whole allocation units; the page FTL maps units.
    let capacity = if kind == FtlKind::Hybrid { requested / sb_bytes * sb_bytes } else { requested / unit * unit };
    let min_sbs: u64 = match kind {
        FtlKind::Page => 4,
        FtlKind::Hybrid => open_aus as u64 + 1,
    };
    if capacity < min_sbs * sb_bytes {
        return Err(ConfigError(format!(
            "{cap_field}: capacity {requested} is too small for preset {name}: at least {} bytes ({min_sbs} erase units of {sb_bytes})",
            min_sbs * sb_bytes
        )));
    }
    if capacity > (1u64 << 44) {
        return Err(ConfigError(format!("{cap_field}: capacity {requested} is too large (at most 16T)")));
    }
    let logical_sbs = capacity.div_ceil(sb_bytes);
    let data_rows = match kind {
        FtlKind::Page => {
            ((capacity as f64 * (1.0 + over_provisioning)) / sb_bytes as f64).ceil() as u64
                + PAGE_FTL_RESERVE_SBS as u64
        }
        // Data AUs, one log block per open AU, over-provisioning as free
        // AUs for merges (at least one: a full merge needs a fresh AU).
        FtlKind::Hybrid => {
            logical_sbs + open_aus as u64 + ((logical_sbs as f64 * over_provisioning).ceil() as u64).max(1)
        }
    };
    // The SLC buffer's superblocks come on top of the data rows (and their
    // share of spares): a static buffer, so the MLC over-provisioning GC
    // works with is what the preset says.
    let slc_sb_bytes = sb_bytes / cell.bits() as u64;
    let slc_rows = slc_cache_bytes.div_ceil(slc_sb_bytes);
    if slc_cache_bytes > 0 && slc_rows * slc_sb_bytes > capacity / 2 {
        return Err(ConfigError(format!(
            "{cap_field}: capacity {requested} is too small for the {slc_cache_bytes}-byte SLC buffer of preset {name} (at most half the capacity)"
        )));
    }
    let data_rows = data_rows + slc_rows;
    let spare_rows = (data_rows as f64 * (spare_ratio + factory_bad_ratio)).ceil() as u64;
    if (data_rows + spare_rows) * planes as u64 > u32::MAX as u64 / 2 {
        return Err(ConfigError(format!("{cap_field}: capacity {requested} needs too many blocks for this geometry")));
    }
    // Page indexes must fit the u32 mapping tables.
    if (data_rows + spare_rows) * geo0.sb_pages() as u64 * (page_size as u64 / unit).max(1) >= u32::MAX as u64 - 1 {
        return Err(ConfigError(format!("{cap_field}: capacity {requested} is too large for the u32 mapping tables")));
    }
    let geo = Geometry { data_rows: data_rows as u32, spare_rows: spare_rows as u32, ..geo0 };

    Ok(Preset::Block(DeviceConfig {
        name,
        description,
        capacity,
        geo,
        timing: Timing {
            read_ns,
            program_ns,
            erase_ns,
            bus_bytes_per_s: mb_s(bus),
            host_bytes_per_s: mb_s(host),
            read_overhead_ns,
            write_overhead_ns,
            slc_program_ns: slc_program.map_or(0, us_to_ns),
        },
        rel: Reliability {
            endurance,
            rber_fresh,
            rber_eol,
            ecc_bits,
            ecc_codeword,
            factory_bad_ratio,
            program_fail_eol,
            erase_fail_eol,
            protect_paired_pages,
        },
        ftl: FtlParams {
            kind,
            over_provisioning,
            spare_ratio,
            map_unit: unit as u32,
            cache_bytes: cache_bytes / unit * unit,
            journal_interval,
            wear_level_threshold,
            open_aus,
            sequential_log,
            slc_cache_bytes: slc_rows * slc_sb_bytes,
            slc_idle_ns,
            slc_bypass_bytes,
        },
        declared,
        part,
    }))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub const SMALL_PAGE: &str = r#"
name = "t"
[nand]
cell = "slc"
page_size = 4096
pages_per_block = 64
planes = 2
endurance = 100000
[nand.timing]
read_us = 25
program_us = [200]
erase_us = 1500
bus_mb_s = 200
[ftl]
type = "page"
capacity = "16M"
over_provisioning = 0.25
cache = "64K"
"#;

    fn block(text: &str, cap: Option<u64>) -> Result<DeviceConfig, ConfigError> {
        match parse_preset(text, "t.toml", "t", cap)? {
            Preset::Block(c) => Ok(c),
            _ => panic!("not a block preset"),
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64M"), Some(64 << 20));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("12x"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn derives_geometry_with_op_and_spares() {
        let c = block(SMALL_PAGE, None).unwrap();
        assert_eq!(c.capacity, 16 << 20);
        let sb = c.geo.sb_bytes();
        assert_eq!(sb, 4096 * 64 * 2);
        let data = (c.geo.data_rows - PAGE_FTL_RESERVE_SBS) as u64 * sb;
        assert!(data as f64 >= c.capacity as f64 * 1.25);
        assert!(c.geo.spare_rows >= 1);
        assert_eq!(c.geo.blocks(), c.geo.rows() * 2);
    }

    #[test]
    fn capacity_override_scales_blocks_not_geometry() {
        let a = block(SMALL_PAGE, None).unwrap();
        let b = block(SMALL_PAGE, Some(64 << 20)).unwrap();
        assert_eq!(b.capacity, 64 << 20);
        assert_eq!(a.geo.pages_per_block, b.geo.pages_per_block);
        assert!(b.geo.blocks() > 3 * a.geo.blocks());
        let e = block(SMALL_PAGE, Some(4096)).err().unwrap();
        assert!(e.0.contains("too small"), "{e}");
    }

    #[test]
    fn errors_name_the_field() {
        let bad = SMALL_PAGE.replace("page_size = 4096", "page_size = 4000");
        let e = block(&bad, None).err().unwrap();
        assert!(e.0.contains("`nand.page_size`") && e.0.contains("t.toml"), "{e}");
        let bad = SMALL_PAGE.replace("erase_us", "erase_usec");
        let e = block(&bad, None).err().unwrap();
        assert!(e.0.contains("nand.timing.erase_us") || e.0.contains("nand.timing.erase_usec"), "{e}");
        let bad = SMALL_PAGE.replace("program_us = [200]", "program_us = [200, 300]");
        let e = block(&bad, None).err().unwrap();
        assert!(e.0.contains("program_us"), "{e}");
        let bad = SMALL_PAGE.replace("cache = \"64K\"", "cache = \"lots\"");
        assert!(block(&bad, None).err().unwrap().0.contains("`ftl.cache`"));
        let e = block("not toml [", None).err().unwrap();
        assert!(e.0.contains("not valid TOML") && !e.0.contains('\n'), "{e}");
        let bad = SMALL_PAGE.replace("pages_per_block = 64", "pages_per_block = 63");
        let e = block(&bad, None).err().unwrap();
        assert!(e.0.contains("`nand.pages_per_block`") && e.0.contains("not a power of two"), "{e}");
    }

    #[test]
    fn published_rates_name_their_sources() {
        let text = format!(
            "{SMALL_PAGE}[part]\nmodel = \"X 16 GB\"\n[published]\nseq_write_mb_s = 8.2\nspan = \"100M\"\n\
             method = \"iozone\"\n[published.sources]\nseq_write_mb_s = \"a table\"\n"
        );
        let c = block(&text, None).unwrap();
        assert_eq!(c.declared.seq_write_mb_s, 8.2);
        assert_eq!(c.declared.span, 100 << 20);
        assert_eq!(c.declared.sources["seq_write_mb_s"], "a table");
        assert_eq!(c.part["model"], "X 16 GB");
        let bad = text.replace("[published.sources]\nseq_write_mb_s", "[published.sources]\nseq_write");
        let e = block(&bad, None).err().unwrap();
        assert!(e.0.contains("`published.sources.seq_write`"), "{e}");
        let both = format!("{text}[declared]\nseq_read_mb_s = 1\n");
        assert!(block(&both, None).err().unwrap().0.contains("`declared`"));
        let bad = text.replace("model = \"X 16 GB\"", "model = 16");
        assert!(block(&bad, None).err().unwrap().0.contains("`part.model`"));
    }

    #[test]
    fn slc_buffer_keys_are_checked() {
        let mlc = SMALL_PAGE.replace("cell = \"slc\"", "cell = \"mlc\"").replace("program_us = [200]", "program_us = [300, 900]");
        let on = mlc
            .replace("bus_mb_s = 200", "bus_mb_s = 200\nslc_program_us = 150")
            .replace("cache = \"64K\"", "cache = \"64K\"\nslc_cache = \"1M\"\nslc_idle_ms = 5");
        let c = block(&on, None).unwrap();
        let off = block(&mlc, None).unwrap();
        // whole SLC-mode superblocks (half an MLC one each) on top of the data rows
        assert_eq!(c.slc_sbs(), 4);
        assert_eq!(c.ftl.slc_cache_bytes, 1 << 20);
        assert_eq!(c.geo.data_rows, off.geo.data_rows + 4);
        assert_eq!((c.timing.slc_program_ns, c.ftl.slc_idle_ns), (150_000, 5_000_000));
        assert_eq!((off.ftl.slc_cache_bytes, off.slc_sbs(), off.timing.slc_program_ns), (0, 0, 0));
        assert_eq!(c.ftl.slc_bypass_bytes, 0, "no bypass unless asked");
        let by = block(&on.replace("slc_idle_ms = 5", "slc_idle_ms = 5\nslc_bypass = \"256K\""), None).unwrap();
        assert_eq!(by.ftl.slc_bypass_bytes, 256 << 10);
        let cases = [
            (on.replace("slc_program_us = 150\n", ""), "`ftl.slc_cache`: needs `nand.timing.slc_program_us`"),
            (mlc.replace("bus_mb_s = 200", "bus_mb_s = 200\nslc_program_us = 150"), "`nand.timing.slc_program_us`: needs `ftl.slc_cache`"),
            (mlc.replace("cache = \"64K\"", "cache = \"64K\"\nslc_idle_ms = 5"), "`ftl.slc_idle_ms`: needs `ftl.slc_cache`"),
            (on.replace("slc_cache = \"1M\"", "slc_cache = \"lots\""), "`ftl.slc_cache`: `lots` is not a size"),
            (on.replace("slc_idle_ms = 5", "slc_idle_ms = -1"), "`ftl.slc_idle_ms`: -1 is out of range"),
            (mlc.replace("cache = \"64K\"", "cache = \"64K\"\nslc_bypass = \"256K\""), "`ftl.slc_bypass`: needs `ftl.slc_cache`"),
            (on.replace("slc_idle_ms = 5", "slc_idle_ms = 5\nslc_bypass = 6000"), "`ftl.slc_bypass`: 6000 is not a whole number of mapping units"),
            (on.replace("slc_idle_ms = 5", "slc_idle_ms = 5\nslc_bypass = \"far\""), "`ftl.slc_bypass`: `far` is not a size"),
            (on.replace("type = \"page\"", "type = \"hybrid\""), "`ftl.slc_cache`: applies to the page FTL only"),
            (SMALL_PAGE.replace("bus_mb_s = 200", "bus_mb_s = 200\nslc_program_us = 150"), "`nand.timing.slc_program_us`: applies to mlc and tlc"),
            (on.replace("slc_cache = \"1M\"", "slc_cache = \"64M\""), "too small for the"),
        ];
        for (text, want) in cases {
            let e = block(&text, None).err().unwrap_or_else(|| panic!("accepted: {want}"));
            assert!(e.0.contains(want) && !e.0.contains('\n'), "{e} (wanted {want})");
        }
    }

    fn variant(text: &str, sets: &[&str]) -> Result<DeviceConfig, ConfigError> {
        let sets: Vec<Set> = sets.iter().map(|s| Set::parse(s)).collect::<Result<_, _>>()?;
        block(&with_sets(text, &sets)?, None)
    }

    #[test]
    fn a_variant_sets_fields_before_the_checks() {
        let c = variant(SMALL_PAGE, &["ftl.cache=\"128K\"", "nand.planes=4", "nand.timing.program_us=[300]"]).unwrap();
        assert_eq!((c.ftl.cache_bytes, c.geo.planes, c.timing.program_ns[0]), (128 << 10, 4, 300_000));
        // a field the file leaves at its default can be set too
        assert_eq!(variant(SMALL_PAGE, &["ftl.write_overhead_us=50"]).unwrap().timing.write_overhead_ns, 50_000);
        // the parser's own checks apply to a set value
        let e = variant(SMALL_PAGE, &["nand.page_size=4000"]).err().unwrap();
        assert!(e.0.contains("`nand.page_size`"), "{e}");
        let e = variant(SMALL_PAGE, &["ftl.cahce=1"]).err().unwrap();
        assert!(e.0.contains("`ftl.cahce`: unknown field"), "{e}");
        for (bad, want) in [
            ("ftl.cache", "give PATH=VALUE"),
            ("cache=1", "names a table and a field"),
            ("published.seq_write_mb_s=3", "only fields of [nand], [nand.timing], [ftl]"),
            ("ftl.slc_cache=4M", "not a TOML value"),
        ] {
            let e = Set::parse(bad).err().unwrap();
            assert!(e.0.contains(want) && !e.0.contains('\n'), "{e} (wanted {want})");
        }
        // the text a variant is made from says all of it; it is not a variant twice
        let sets = [Set::parse("ftl.cache = \"128K\"").unwrap()];
        let text = with_sets(SMALL_PAGE, &sets).unwrap();
        assert!(text.ends_with("[variant]\n\"ftl.cache\" = \"128K\"\n"), "{text}");
        assert!(with_sets(&text, &sets).err().unwrap().0.contains("a variant already"));
        let e = block(&format!("{SMALL_PAGE}[variant]\n\"published.x\" = 1\n"), None).err().unwrap();
        assert!(e.0.contains("`variant.\"published.x\"`: only fields of"), "{e}");
    }

    #[test]
    fn assumption_tables_are_flashbeds() {
        let text = format!("{SMALL_PAGE}[assumptions.\"ftl.cache\"]\nlow = \"16K\"\n[fitted]\nx = 1\n[measured]\ny = 2\n");
        assert_eq!(block(&text, None).unwrap(), block(SMALL_PAGE, None).unwrap());
    }

    #[test]
    fn nandsim_presets_are_recognised() {
        let p = parse_preset("name = \"nand-slc\"\nkind = \"nandsim\"\n[whatever]\nx=1\n", "n.toml", "n", None).unwrap();
        match p {
            Preset::Nandsim { name } => {
                assert_eq!(nandsim_refusal(&name).0, "preset nand-slc is a raw NAND preset for nandsim in the lab; flashbed-emu serves block devices")
            }
            _ => panic!(),
        }
    }
}
