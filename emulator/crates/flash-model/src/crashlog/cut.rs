//! Crash states: a cut position in the log and a damage choice, what the
//! device holds after it, and the bounded, seeded enumeration of them.
//!
//! A state is written `POS[+CHOICE]` (`StateId`), e.g. `812`, `812+k5`:
//!  - `POS`: the model's own power cut right after record POS was
//!    acknowledged: what is durable stays, everything volatile is lost,
//!    programs still under way are torn (with their paired-page damage).
//!    At a flush this is "everything acknowledged by the flush".
//!  - `POS+mHEX`: as POS, but the volatile versions selected by the bits of
//!    HEX (bit i: the i-th, in write order) were persisted (n <= 64), and no
//!    program was torn: subset states are the block layer's reorderings,
//!    valid for any device, kept apart from flash damage so that a loss in
//!    one says which of the two caused it;
//!  - `POS+kK`: the first K volatile versions persisted (in-order write-back
//!    cut short);
//!  - `POS+rSEED`: each volatile version persisted with probability 1/2,
//!    drawn from SEED (stable: a hash of the seed and the version);
//!  - `POS+tJ`: the cut comes while program J (numbered in the log) is under
//!    way; POS is the record that issued it, which may be unacknowledged.
//!  - `ID+u` (after any of the above): its undamaged twin, the same cut with
//!    the flash damage left out (every unit it damaged reads as its durable
//!    version). A state that fails while its twin survives lost data to the
//!    device, not to the filesystem (`Cut::undamaged`).
//! "Volatile versions" at a cut: unit versions written since the last
//! acknowledged flush that are not durable at the cut and not superseded by a
//! later durable version. The id alone rebuilds the state from the log.

use std::fmt;
use std::str::FromStr;

use super::index::{Index, NONE};
use crate::cache::FastMap;
use crate::rng::Rng;

type FastSet = std::collections::HashSet<u32, std::hash::BuildHasherDefault<crate::cache::FastHasher>>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Choice {
    Model,
    Mask(u64),
    Prefix(u32),
    Random(u64),
    Tear(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StateId {
    pub pos: u32,
    pub choice: Choice,
}

impl fmt::Display for StateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.choice {
            Choice::Model => write!(f, "{}", self.pos),
            Choice::Mask(m) => write!(f, "{}+m{m:x}", self.pos),
            Choice::Prefix(k) => write!(f, "{}+k{k}", self.pos),
            Choice::Random(s) => write!(f, "{}+r{s}", self.pos),
            Choice::Tear(j) => write!(f, "{}+t{j}", self.pos),
        }
    }
}

impl FromStr for StateId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("crash state `{s}` is not POS, POS+mHEX, POS+kN, POS+rSEED or POS+tN");
        let (p, c) = match s.split_once('+') {
            Some((p, c)) => (p, Some(c)),
            None => (s, None),
        };
        let pos = p.parse::<u32>().map_err(|_| bad())?;
        let choice = match c {
            None => Choice::Model,
            Some(c) if c.len() >= 2 => {
                let (k, v) = c.split_at(1);
                match k {
                    "m" => Choice::Mask(u64::from_str_radix(v, 16).map_err(|_| bad())?),
                    "k" => Choice::Prefix(v.parse().map_err(|_| bad())?),
                    "r" => Choice::Random(v.parse().map_err(|_| bad())?),
                    "t" => Choice::Tear(v.parse().map_err(|_| bad())?),
                    _ => return Err(bad()),
                }
            }
            Some(_) => return Err(bad()),
        };
        Ok(StateId { pos, choice })
    }
}

fn mix(x: u64) -> u64 {
    Rng::from_state(x).next_u64()
}

/// A crash state evaluated against a log: which commits are durable, which
/// volatile versions it keeps, which units it damaged.
#[derive(Clone, Debug)]
pub struct Cut {
    pub id: StateId,
    /// Effective cut time (device ns).
    pub t: u64,
    /// Commits durable at the cut (a prefix of the log's commits).
    pub(crate) ncd: u32,
    /// Records acknowledged at the cut (0..acked).
    pub acked: u32,
    /// The last acknowledged flush before the cut.
    pub last_flush: Option<u32>,
    /// Volatile versions (ids, write order).
    pub volatile: Vec<u32>,
    pub(crate) kept: FastSet,
    /// Units whose durable copy sits in a page the cut damaged.
    pub damaged: Vec<u32>,
    pub(crate) damaged_set: FastSet,
    /// The undamaged twin of `id` (`ID+u`): the damage is left out.
    pub undamaged: bool,
}

/// The suffix of an undamaged twin's id.
pub const UNDAMAGED: &str = "+u";

/// A state id as the control socket and the offline tools take it: `ID` or `ID+u`.
pub fn parse_state(s: &str) -> Result<(StateId, bool), String> {
    match s.strip_suffix(UNDAMAGED) {
        Some(base) => Ok((base.parse()?, true)),
        None => Ok((s.parse()?, false)),
    }
}

impl Cut {
    pub fn new(ix: &Index, id: StateId) -> Result<Cut, String> {
        Cut::build(ix, id, false)
    }

    /// The undamaged twin of state `id`: the same cut, every unit it would
    /// damage left with its durable version.
    pub fn undamaged(ix: &Index, id: StateId) -> Result<Cut, String> {
        Cut::build(ix, id, true)
    }

    /// The state an id of `parse_state` names.
    pub fn parse(ix: &Index, s: &str) -> Result<Cut, String> {
        let (id, twin) = parse_state(s)?;
        Cut::build(ix, id, twin)
    }

    fn build(ix: &Index, id: StateId, undamaged: bool) -> Result<Cut, String> {
        let pos = id.pos;
        let n = ix.recs.len() as u32;
        if pos >= n {
            return Err(format!("crash state {id}: the log has {n} records (0..{})", n.saturating_sub(1)));
        }
        let before = if pos > 0 { ix.done_max[pos as usize - 1] } else { 0 };
        let (raw, torn) = match id.choice {
            Choice::Tear(j) => {
                let p = ix.progs.get(j as usize).ok_or_else(|| format!("crash state {id}: the log has {} programs", ix.progs.len()))?;
                if p.pos != pos {
                    return Err(format!("crash state {id}: program {j} was issued by record {}", p.pos));
                }
                // Never before a request already acknowledged.
                (p.s.max(before), Some(p))
            }
            _ => (ix.done_max[pos as usize], None),
        };
        let t = raw.max(ix.erase_max(pos));
        if let Some(p) = torn {
            if t >= p.e {
                return Err(format!("crash state {id}: program {} is not under way at the cut (it ends at {} ns, the cut is at {t} ns)", id.choice_index(), p.e));
            }
        }
        let ncd = ix.commits.partition_point(|c| c.pos <= pos && c.d <= t) as u32;
        let r = &ix.recs[pos as usize];
        let acked = if r.done <= t { pos + 1 } else { pos };
        let last_flush = ix.last_flush(acked);
        let mut cut = Cut {
            id,
            t,
            ncd,
            acked,
            last_flush,
            volatile: Vec::new(),
            kept: FastSet::default(),
            damaged: Vec::new(),
            damaged_set: FastSet::default(),
            undamaged,
        };
        cut.volatile = cut.volatile_versions(ix);
        let vol = &cut.volatile;
        let nv = vol.len();
        match id.choice {
            Choice::Model | Choice::Tear(_) => {}
            Choice::Mask(m) => {
                if nv > 64 || (nv < 64 && m >> nv != 0) {
                    return Err(format!("crash state {id}: the mask selects beyond the {nv} volatile versions"));
                }
                cut.kept = (0..nv).filter(|&i| m >> i & 1 == 1).map(|i| vol[i]).collect();
            }
            Choice::Prefix(k) => {
                if k as usize > nv {
                    return Err(format!("crash state {id}: there are only {nv} volatile versions"));
                }
                cut.kept = vol[..k as usize].iter().copied().collect();
            }
            Choice::Random(s) => {
                cut.kept = vol.iter().copied().filter(|&v| mix(s ^ (v as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)) & 1 == 1).collect();
            }
        }
        if !ix.protect && !undamaged && matches!(id.choice, Choice::Model | Choice::Tear(_)) {
            cut.damage(ix);
        }
        Ok(cut)
    }

    fn volatile_versions(&self, ix: &Index) -> Vec<u32> {
        let lo = self.last_flush.map_or(0, |f| ix.versions_upto(f));
        let hi = ix.versions_upto(self.id.pos);
        let mut durable_later = FastSet::default();
        let mut out = Vec::new();
        for v in (lo..hi).rev() {
            let ver = &ix.versions[v];
            if ver.commit < self.ncd {
                durable_later.insert(ver.lpn);
            } else if !durable_later.contains(&ver.lpn) {
                out.push(v as u32);
            }
        }
        out.reverse();
        out
    }

    /// Programs under way at the cut are torn, and damage their paired pages.
    /// On each plane programs run one after another, so scanning back stops
    /// at the first program per plane that ended before the cut.
    fn damage(&mut self, ix: &Index) {
        let last = ix.progs.partition_point(|p| p.pos <= self.id.pos);
        let planes = ix.planes as usize;
        let mut closed = vec![false; planes];
        let mut open = planes;
        for j in (0..last).rev() {
            let p = ix.progs[j];
            let plane = (p.block as usize) % planes;
            if closed[plane] {
                continue;
            }
            if p.e <= self.t {
                closed[plane] = true;
                open -= 1;
                if open == 0 {
                    break;
                }
                continue;
            }
            if p.s > self.t {
                continue; // never started: holds nothing durable
            }
            let first = p.block as u64 * ix.ppb;
            for page in std::iter::once(p.page).chain(ix.pairs[p.page as usize].iter().copied()) {
                if let Some(list) = ix.res.get(&(first + page as u64)) {
                    for r in list {
                        if r.from < self.ncd && (r.until == NONE || r.until >= self.ncd) && self.damaged_set.insert(r.lpn) {
                            self.damaged.push(r.lpn);
                        }
                    }
                }
            }
        }
        self.damaged.sort_unstable();
    }

    /// The id as written: `ID`, or `ID+u` for an undamaged twin.
    pub fn label(&self) -> String {
        if self.undamaged {
            format!("{}{UNDAMAGED}", self.id)
        } else {
            self.id.to_string()
        }
    }

    /// Each damaged unit with whether the version it lost had been flushed:
    /// written before the last flush the host saw acknowledged before the cut
    /// (data the host was promised), not only made durable by the FTL's own
    /// mapping commits.
    pub fn damaged_units(&self, ix: &Index) -> Vec<(u32, bool)> {
        self.damaged
            .iter()
            .map(|&lpn| {
                let h = ix.hist(lpn);
                let upto = h.partition_point(|&v| ix.versions[v as usize].rec <= self.id.pos);
                let durable = h[..upto].iter().rev().find(|&&v| ix.versions[v as usize].commit < self.ncd);
                let flushed = match (durable, self.last_flush) {
                    (Some(&v), Some(f)) => ix.versions[v as usize].rec < f,
                    _ => false,
                };
                (lpn, flushed)
            })
            .collect()
    }

    /// The version unit `lpn` holds in this state, `Err(())` if its durable
    /// copy was damaged, `Ok(None)` for zeroes.
    #[inline]
    pub fn version_of(&self, ix: &Index, lpn: u32) -> Result<Option<u32>, ()> {
        let h = ix.hist(lpn);
        let mut i = h.partition_point(|&v| ix.versions[v as usize].rec <= self.id.pos);
        while i > 0 {
            i -= 1;
            let v = h[i];
            if ix.versions[v as usize].commit < self.ncd {
                if !self.damaged_set.is_empty() && self.damaged_set.contains(&lpn) {
                    return Err(());
                }
                return Ok(Some(v));
            }
            if !self.kept.is_empty() && self.kept.contains(&v) {
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    pub fn kind(&self, ix: &Index) -> &'static str {
        match self.id.choice {
            Choice::Model if ix.last_flush(self.id.pos + 1) == Some(self.id.pos) => "flush",
            Choice::Model => "cut",
            Choice::Tear(_) => "tear",
            _ => "subset",
        }
    }

    pub fn info(&self, ix: &Index) -> StateInfo {
        StateInfo {
            id: self.id,
            kind: self.kind(ix),
            t: self.t,
            acked: self.acked,
            last_flush: self.last_flush,
            volatile: self.volatile.len(),
            kept: self.kept.len(),
            damaged: self.damaged.len(),
            undamaged: self.undamaged,
        }
    }
}

impl StateId {
    fn choice_index(&self) -> u64 {
        match self.choice {
            Choice::Tear(j) | Choice::Prefix(j) => j as u64,
            Choice::Mask(x) | Choice::Random(x) => x,
            Choice::Model => 0,
        }
    }
}

/// What a study needs to know about a state without serving it.
#[derive(Clone, Debug, PartialEq)]
pub struct StateInfo {
    pub id: StateId,
    /// flush | cut | subset | tear
    pub kind: &'static str,
    pub t: u64,
    /// Records 0..acked were acknowledged before the cut.
    pub acked: u32,
    pub last_flush: Option<u32>,
    /// Volatile versions at the cut, how many the state keeps.
    pub volatile: usize,
    pub kept: usize,
    /// Units lost to paired-page damage.
    pub damaged: usize,
    /// The undamaged twin of `id` (listed as `ID+u`).
    pub undamaged: bool,
}

impl StateInfo {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "id": if self.undamaged { format!("{}{UNDAMAGED}", self.id) } else { self.id.to_string() },
            "pos": self.id.pos,
            "kind": self.kind,
            "t_ns": self.t,
            "acked": self.acked,
            "last_flush": self.last_flush,
            "volatile": self.volatile,
            "kept": self.kept,
            "damaged": self.damaged,
        })
    }
}

/// Bounds of an enumeration.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Only cuts after this record (the study's mark) are listed.
    pub after: Option<u32>,
    pub seed: u64,
    /// Subset states per interval between flushes, beside its plain cut.
    pub subsets: u32,
    /// Torn-program states per interval (presets without paired-page
    /// protection only; those whose damage hits durable data).
    pub tears: u32,
    /// Also the plain cut right after every mark (where the study knows what
    /// was acknowledged), unless it holds nothing the last flush or the
    /// previous mark's cut did not.
    pub at_marks: bool,
}

/// The crash states of a log, in log order: every acknowledged flush; at
/// the end of each interval between flushes, the plain cut and up to
/// `subsets` subsets of its volatile versions (all of them when there are few
/// enough, else evenly spaced prefixes and seeded random halves); with
/// `at_marks`, the plain cut right after each mark that differs from the last
/// flush and from the previous mark's; and up to `tears` torn programs per
/// interval, sampled with the seed.
pub fn enumerate(ix: &Index, b: &Bounds) -> Vec<StateInfo> {
    let after = |p: u32| b.after.map_or(true, |a| p > a);
    let mut out: Vec<(u32, u32, StateInfo)> = Vec::new(); // (pos, order, info)
    let n = ix.recs.len() as u32;
    let mut ends: Vec<u32> = ix.flush_pos.iter().filter(|&&f| f > 0).map(|&f| f - 1).collect();
    if n > 0 && ix.flush_pos.last() != Some(&(n - 1)) {
        ends.push(n - 1);
    }
    for &f in &ix.flush_pos {
        if after(f) {
            if let Ok(c) = Cut::new(ix, StateId { pos: f, choice: Choice::Model }) {
                out.push((f, 1, c.info(ix)));
            }
        }
    }
    for &p in &ends {
        if !after(p) || ix.flush_pos.binary_search(&p).is_ok() {
            continue;
        }
        let Ok(c) = Cut::new(ix, StateId { pos: p, choice: Choice::Model }) else { continue };
        let nv = c.volatile.len() as u64;
        if nv == 0 && c.damaged.is_empty() {
            continue; // the same contents as the flush that follows
        }
        out.push((p, 0, c.info(ix)));
        let mut choices = Vec::new();
        if nv > 0 && nv <= 16 && (1u64 << nv) - 2 <= b.subsets as u64 {
            choices.extend((1..(1u64 << nv) - 1).map(Choice::Mask));
        } else if nv > 1 {
            let q = (b.subsets / 2) as u64;
            let mut ks: Vec<u32> = (1..=q).map(|i| (i * nv / (q + 1)) as u32).filter(|&k| k > 0 && (k as u64) < nv).collect();
            ks.dedup();
            choices.extend(ks.into_iter().map(Choice::Prefix));
            let mut i = 0u64;
            while (choices.len() as u32) < b.subsets {
                choices.push(Choice::Random(mix(b.seed ^ (p as u64) << 24 ^ i) >> 16));
                i += 1;
            }
        }
        for ch in choices {
            if let Ok(c) = Cut::new(ix, StateId { pos: p, choice: ch }) {
                out.push((p, 0, c.info(ix)));
            }
        }
    }
    if b.at_marks {
        let mut prev: Option<(usize, u32)> = None; // (versions written, commits durable) at the last mark listed
        for &(p, _) in &ix.marks {
            if !after(p) || ends.binary_search(&p).is_ok() {
                continue;
            }
            let Ok(c) = Cut::new(ix, StateId { pos: p, choice: Choice::Model }) else { continue };
            let key = (ix.versions_upto(p), c.ncd);
            let since_flush = c.last_flush.map_or(0, |f| ix.versions_upto(f));
            let same = c.damaged.is_empty() && ((c.volatile.is_empty() && key.0 == since_flush) || prev == Some(key));
            if !same {
                out.push((p, 0, c.info(ix)));
                prev = Some(key);
            }
        }
    }
    if !ix.protect && b.tears > 0 {
        // Candidates grouped by the interval they fall in.
        let mut groups: FastMap<usize, Vec<StateInfo>> = FastMap::default();
        for (j, p) in ix.progs.iter().enumerate() {
            if !after(p.pos) || ix.pairs[p.page as usize].is_empty() {
                continue;
            }
            let Ok(c) = Cut::new(ix, StateId { pos: p.pos, choice: Choice::Tear(j as u32) }) else { continue };
            if !c.damaged.is_empty() {
                let g = ix.flush_pos.partition_point(|&f| f < p.pos);
                groups.entry(g).or_default().push(c.info(ix));
            }
        }
        let mut keys: Vec<usize> = groups.keys().copied().collect();
        keys.sort_unstable();
        for g in keys {
            let mut cands = groups.remove(&g).unwrap();
            let mut rng = Rng::new(b.seed ^ (g as u64).wrapping_mul(0xA24B_AED4_963E_E407));
            let take = (b.tears as usize).min(cands.len());
            for i in 0..take {
                let k = i + rng.below((cands.len() - i) as u64) as usize;
                cands.swap(i, k);
            }
            cands.truncate(take);
            cands.sort_by_key(|c| c.id.choice_index());
            out.extend(cands.into_iter().map(|c| (c.id.pos, 0, c)));
        }
    }
    out.sort_by_key(|(p, o, _)| (*p, *o));
    out.into_iter().map(|(_, _, i)| i).collect()
}
