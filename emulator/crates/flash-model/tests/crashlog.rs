//! Write log and crash states against the model itself.
//!  - the state at every flush equals a reference replay of the logged host
//!    requests up to it, and the device's own contents at that flush;
//!  - every state the log rebuilds (plain cuts and torn programs) equals what
//!    the model's own power cut gives at that moment, damage included, on a
//!    re-run of the same requests;
//!  - no state loses anything an earlier flush made durable, except units in
//!    paired pages the model damages, only without paired-page protection and
//!    never in subset states;
//!  - subset states lose and keep cached, unflushed writes;
//!  - an image written to a file reads back as the served state, and a log
//!    loaded from its files gives the same states as the live one;
//!  - two states share an image class exactly when they hold the same image.

mod common;
use std::path::PathBuf;
use std::sync::Arc;

use common::*;
use flash_model::crashlog::{self, cut::Bounds, cut::enumerate, view::unit_content, Choice, Cut, Images, Index, StateId, UnitContent, View};
use flash_model::{Device, IoError};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// Bytes, not units: sub-unit and unaligned writes exercise read-modify-write.
    Write { off: u64, len: u64 },
    Flush,
    Discard { unit: u64, len: u64 },
    /// Not logged, but keeps planes busy: it moves later programs and commits.
    Read { unit: u64, len: u64 },
}

fn op(units: u64, unit: u64) -> impl Strategy<Value = Op> {
    let bytes = units * unit;
    prop_oneof![
        8 => (0..units, 1..6u64).prop_map(move |(u, n)| Op::Write { off: u * unit, len: n * unit }),
        3 => (0..bytes / 512, 1..12u64).prop_map(|(s, n)| Op::Write { off: s * 512, len: n * 512 }),
        2 => Just(Op::Flush),
        1 => (0..units, 1..8u64).prop_map(|(unit, len)| Op::Discard { unit, len }),
        2 => (0..units, 1..8u64).prop_map(|(unit, len)| Op::Read { unit, len }),
    ]
}

struct Dir(PathBuf);
impl Dir {
    fn new(tag: &str) -> Dir {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!("flashbed-crashlog-{}-{tag}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_dir_all(&p);
        Dir(p)
    }
}
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Applies one op at `t`; returns its completion.
fn apply(d: &mut Device, o: &Op, t: u64, tag: u64) -> Result<u64, IoError> {
    let cap = d.capacity();
    let u = d.cfg.unit_bytes() as u64;
    match *o {
        Op::Write { off, len } => {
            let len = len.min(cap - off);
            let mut buf = vec![0u8; len as usize];
            pattern(&mut buf, off, tag);
            if tag % 7 == 0 {
                buf.fill(0); // zero writes are stored as nothing
            }
            d.write(t, off, &buf)
        }
        Op::Flush => d.flush(t),
        Op::Discard { unit, len } => {
            let len = len.min(cap / u - unit);
            d.discard(t, unit * u, len * u)
        }
        Op::Read { unit, len } => {
            let len = len.min(cap / u - unit);
            d.read(t, unit * u, &mut vec![0u8; (len * u) as usize])
        }
    }
}

fn read_all(d: &mut Device, t: &mut u64) -> Vec<Result<Vec<u8>, IoError>> {
    let u = d.cfg.unit_bytes() as u64;
    (0..d.capacity() / u)
        .map(|l| {
            let mut b = vec![0u8; u as usize];
            match d.read(*t, l * u, &mut b) {
                Ok(e) => {
                    *t = e;
                    Ok(b)
                }
                Err(e) => Err(e),
            }
        })
        .collect()
}

struct Logged {
    ix: Index,
    /// Arrival time of each op; device time only moves on, as in the
    /// emulator (each op arrives when the previous one completed).
    times: Vec<u64>,
    /// The op behind each record (reads make none).
    op_of_rec: Vec<usize>,
    /// Device contents after a final flush, at the end.
    last: Vec<Result<Vec<u8>, IoError>>,
    _dir: Dir,
}

fn run_logged(text: &str, ops: &[Op], seed: u64) -> Result<Logged, TestCaseError> {
    let dir = Dir::new("run");
    let mut d = mem_device(text, seed);
    crashlog::start(&mut d, &dir.0, text, seed).map_err(TestCaseError::fail)?;
    let mut t = 0;
    let mut times = Vec::new();
    let mut op_of_rec = Vec::new();
    for (i, o) in ops.iter().enumerate() {
        times.push(t);
        t = apply(&mut d, o, t, i as u64 + 1).map_err(|e| TestCaseError::fail(format!("op {i} {o:?}: {e:?}")))?;
        if !matches!(o, Op::Read { .. }) {
            op_of_rec.push(i);
        }
    }
    t = d.flush(t).map_err(|e| TestCaseError::fail(format!("final flush: {e:?}")))?;
    op_of_rec.push(ops.len());
    let last = read_all(&mut d, &mut t);
    let ix = crashlog::stop(&mut d).map_err(TestCaseError::fail)?;
    prop_assert_eq!(ix.anomalies, 0, "the log's mirror lost track of the FTL");
    prop_assert_eq!(ix.recs.len(), op_of_rec.len());
    Ok(Logged { ix, times, op_of_rec, last, _dir: dir })
}

/// The same requests at the same times on a fresh device with the same seed,
/// up to and including op `upto`; then the model's own cut at `t`.
fn rerun_and_cut(text: &str, ops: &[Op], times: &[u64], seed: u64, upto: usize, t: u64) -> Vec<Result<Vec<u8>, IoError>> {
    let mut d = mem_device(text, seed);
    for i in 0..=upto {
        apply(&mut d, &ops[i], times[i], i as u64 + 1).unwrap();
    }
    d.power_cut(t);
    d.restart();
    let mut rt = d.clock;
    read_all(&mut d, &mut rt)
}

fn state_image(ix: &Index, cut: &Cut) -> Vec<Option<Option<Vec<u8>>>> {
    // None: damaged; Some(None): zeroes; Some(Some): data
    (0..ix.units as u32)
        .map(|l| match unit_content(ix, cut, l) {
            UnitContent::Damaged => None,
            UnitContent::Zero => Some(None),
            UnitContent::Data(d) => Some(Some(d.to_vec())),
        })
        .collect()
}

fn same(state: &[Option<Option<Vec<u8>>>], dev: &[Result<Vec<u8>, IoError>], what: &str) -> Result<(), TestCaseError> {
    for (l, (s, d)) in state.iter().zip(dev).enumerate() {
        let ok = match (s, d) {
            (None, Err(IoError::Eio)) => true,
            (Some(None), Ok(b)) => zeroes(b),
            (Some(Some(a)), Ok(b)) => a == b,
            _ => false,
        };
        if !ok {
            let desc = |s: &Option<Option<Vec<u8>>>| match s {
                None => "damaged".to_string(),
                Some(None) => "zeroes".to_string(),
                Some(Some(b)) => format!("data {:?}", decode(b, 0).or(Some(u64::from_le_bytes(b[16..24].try_into().unwrap())))),
            };
            let dd = match d {
                Err(e) => format!("{e:?}"),
                Ok(b) if zeroes(b) => "zeroes".into(),
                Ok(b) => format!("data ver {}", u64::from_le_bytes(b[16..24].try_into().unwrap())),
            };
            return Err(TestCaseError::fail(format!("{what}: unit {l}: state has {}, the device {dd}", desc(s))));
        }
    }
    Ok(())
}

/// A flat image from the logged host requests alone (data from the log).
fn reference_replay(ix: &Index, upto: u32) -> Vec<u8> {
    use flash_model::crashlog::ReqKind;
    let mut img = vec![0u8; (ix.units * ix.unit) as usize];
    for r in &ix.recs[..=upto as usize] {
        match r.kind {
            ReqKind::Write if r.ok => {
                let dst = &mut img[r.off as usize..(r.off + r.len) as usize];
                if r.data == u64::MAX {
                    dst.fill(0);
                } else {
                    dst.copy_from_slice(&ix.data[r.data as usize..(r.data + r.len) as usize]);
                }
            }
            ReqKind::Discard if r.ok => img[r.off as usize..(r.off + r.len) as usize].fill(0),
            _ => {}
        }
    }
    img
}

fn check(text: &str, ops: &[Op], seed: u64, cuts: &[usize]) -> Result<(), TestCaseError> {
    let lg = run_logged(text, ops, seed)?;
    let ix = &lg.ix;
    let u = ix.unit as usize;
    // (a) every flush: the reference replay of the logged requests; the
    // last one also the device's own contents.
    let flushes: Vec<u32> = ix.flush_pos.clone();
    prop_assert!(!flushes.is_empty());
    for &f in &flushes {
        let cut = Cut::new(ix, StateId { pos: f, choice: Choice::Model }).map_err(TestCaseError::fail)?;
        prop_assert_eq!(cut.kind(ix), "flush");
        prop_assert!(cut.volatile.is_empty() && cut.damaged.is_empty(), "flush {}: {} volatile, {} damaged", f, cut.volatile.len(), cut.damaged.len());
        let st = state_image(ix, &cut);
        let reference = reference_replay(ix, f);
        for (l, s) in st.iter().enumerate() {
            let want = &reference[l * u..(l + 1) * u];
            let got: &[u8] = match s {
                Some(Some(b)) => b,
                _ => &vec![0u8; u],
            };
            prop_assert!(got == want, "flush at record {}: unit {} differs from the reference replay", f, l);
        }
        if f == *flushes.last().unwrap() {
            same(&st, &lg.last, "the final flush")?;
        }
    }
    // The model's own cut, at chosen positions and during torn programs of
    // those positions.
    let nrec = ix.recs.len() - 1; // the final flush is not among the ops
    for &c in cuts.iter().filter(|_| nrec > 0) {
        let p = c % nrec;
        let op = lg.op_of_rec[p];
        let cut = Cut::new(ix, StateId { pos: p as u32, choice: Choice::Model }).map_err(TestCaseError::fail)?;
        let dev = rerun_and_cut(text, ops, &lg.times, seed, op, cut.t);
        same(&state_image(ix, &cut), &dev, &format!("cut after record {p}"))?;
        let torn: Vec<usize> = ix.progs.iter().enumerate().filter(|(_, pr)| pr.pos == p as u32).map(|(j, _)| j).collect();
        // At most four per position: the first, the last and two between.
        let pick: Vec<usize> = if torn.len() <= 4 { torn } else { (0..4).map(|i| torn[i * (torn.len() - 1) / 3]).collect() };
        for j in pick {
            let pr = ix.progs[j];
            let Ok(cut) = Cut::new(ix, StateId { pos: p as u32, choice: Choice::Tear(j as u32) }) else { continue };
            prop_assert!(cut.t >= pr.s && cut.t < pr.e);
            let dev = rerun_and_cut(text, ops, &lg.times, seed, op, cut.t);
            same(&state_image(ix, &cut), &dev, &format!("cut during program {j} of record {p}"))?;
        }
    }
    // (b) no enumerated state loses what an earlier flush made durable,
    // except through paired-page damage where the preset allows it.
    let states = enumerate(ix, &Bounds { after: None, seed, subsets: 6, tears: 3, at_marks: false });
    // (d) two states share an image class exactly when they hold the same image.
    let classes = Images::new(ix).classes(&states).map_err(TestCaseError::fail)?;
    // Each distinct image numbered once (by hash, then compared in full), so the pairs compare
    // numbers: comparing the images pair by pair was most of this test's time.
    let mut seen: std::collections::HashMap<Vec<Option<Option<Vec<u8>>>>, usize> = Default::default();
    let image_ids: Vec<usize> = states
        .iter()
        .map(|s| {
            let next = seen.len();
            *seen.entry(state_image(ix, &Cut::new(ix, s.id).unwrap())).or_insert(next)
        })
        .collect();
    for i in 0..states.len() {
        for j in i + 1..states.len() {
            prop_assert_eq!(classes[i] == classes[j], image_ids[i] == image_ids[j], "states {} and {}", states[i].id, states[j].id);
        }
    }
    drop(seen);
    let mut by_unit: std::collections::HashMap<u32, Vec<(u32, Option<&[u8]>)>> = Default::default();
    for (i, v) in ix.versions.iter().enumerate() {
        by_unit.entry(v.lpn).or_default().push((v.rec, ix.version_data(i as u32)));
    }
    let mut durables: std::collections::HashMap<Option<u32>, Vec<u8>> = Default::default();
    for s in &states {
        let cut = Cut::new(ix, s.id).map_err(TestCaseError::fail)?;
        prop_assert_eq!(&cut.info(ix), s);
        if ix.cfg.rel.protect_paired_pages || s.kind == "subset" {
            prop_assert!(cut.damaged.is_empty(), "{}: damage on a protected device or in a subset state", s.id);
        }
        let durable = durables.entry(cut.last_flush).or_insert_with(|| {
            cut.last_flush.map(|f| reference_replay(ix, f)).unwrap_or_else(|| vec![0u8; (ix.units * ix.unit) as usize])
        });
        for l in 0..ix.units as u32 {
            let held: Option<Vec<u8>> = match unit_content(ix, &cut, l) {
                UnitContent::Damaged => {
                    prop_assert!(cut.damaged.contains(&l));
                    continue;
                }
                UnitContent::Zero => None,
                UnitContent::Data(d) => Some(d.to_vec()),
            };
            let flushed = &durable[l as usize * u..(l as usize + 1) * u];
            let is_flushed = match &held {
                None => zeroes(flushed),
                Some(h) => h == flushed,
            };
            if is_flushed {
                continue;
            }
            // Otherwise it must be a version written after that flush.
            let lo = cut.last_flush.map_or(0, |f| f + 1);
            let later = by_unit.get(&l).map_or(false, |vs| {
                vs.iter().any(|&(rec, data)| {
                    rec >= lo && rec <= s.id.pos && match (&held, data) {
                        (None, None) => true,
                        (Some(h), Some(d)) => &h[..] == d,
                        _ => false,
                    }
                })
            });
            prop_assert!(later, "{}: unit {} holds neither its flushed contents nor a later write", s.id, l);
        }
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
}

fn unprotected(text: &str) -> String {
    text.replace("protect_paired_pages = true", "protect_paired_pages = false")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), .. ProptestConfig::default() })]

    #[test]
    fn page_slc_with_cache(ops in prop::collection::vec(op(512, 4096), 1..200), seed in 0..1000u64, cuts in prop::collection::vec(0..10_000usize, 3)) {
        check(PAGE_SLC, &ops, seed, &cuts)?;
    }

    #[test]
    fn page_slc_write_through_frequent_commits(ops in prop::collection::vec(op(512, 4096), 1..200), seed in 0..1000u64, cuts in prop::collection::vec(0..10_000usize, 3)) {
        let text = PAGE_SLC.replace("cache = \"32K\"", "cache = 0").replace("journal_interval = 64", "journal_interval = 5");
        check(&text, &ops, seed, &cuts)?;
    }

    #[test]
    fn page_mlc_unprotected_subpage_units(ops in prop::collection::vec(op(512, 4096), 1..200), seed in 0..1000u64, cuts in prop::collection::vec(0..10_000usize, 3)) {
        check(&unprotected(PAGE_MLC), &ops, seed, &cuts)?;
    }

    #[test]
    fn page_mlc_protected(ops in prop::collection::vec(op(512, 4096), 1..150), seed in 0..1000u64, cuts in prop::collection::vec(0..10_000usize, 3)) {
        check(PAGE_MLC, &ops, seed, &cuts)?;
    }

    #[test]
    fn page_mlc_slc_buffer(ops in prop::collection::vec(op(512, 4096), 1..200), seed in 0..1000u64, cuts in prop::collection::vec(0..10_000usize, 3)) {
        // idle folds in every gap: the fold's moves and erases meet the cuts
        check(&unprotected(&page_mlc_slc(0.0)), &ops, seed, &cuts)?;
    }

    #[test]
    fn page_mlc_slc_buffer_with_bypass(ops in prop::collection::vec(op(512, 4096), 1..200), seed in 0..1000u64, cuts in prop::collection::vec(0..10_000usize, 3)) {
        // writes of three units or more continue into the array past their first two: units move
        // between the two paths, and a cut meets both
        let text = page_mlc_slc(0.0).replace("slc_idle_ms = 0", "slc_idle_ms = 0\nslc_bypass = \"8K\"");
        assert!(text.contains("slc_bypass"));
        check(&unprotected(&text), &ops, seed, &cuts)?;
    }

    #[test]
    fn hybrid_unprotected(ops in prop::collection::vec(op(64, 4096), 1..150), seed in 0..1000u64, cuts in prop::collection::vec(0..10_000usize, 3)) {
        check(&unprotected(HYBRID), &ops, seed, &cuts)?;
    }

    #[test]
    fn hybrid_sequential_log_one_open_au(ops in prop::collection::vec(op(64, 4096), 1..150), seed in 0..1000u64, cuts in prop::collection::vec(0..10_000usize, 3)) {
        let text = unprotected(&HYBRID.replace("open_aus = 2", "open_aus = 1\nsequential_log = true"));
        check(&text, &ops, seed, &cuts)?;
    }

    #[test]
    fn tlc_hybrid_unprotected(ops in prop::collection::vec(op(64, 4096), 1..150), seed in 0..1000u64, cuts in prop::collection::vec(0..10_000usize, 3)) {
        let text = unprotected(&HYBRID.replace("cell = \"mlc\"", "cell = \"tlc\"").replace("program_us = [500, 1500]", "program_us = [500, 1500, 3000]").replace("pages_per_block = 16", "pages_per_block = 15"));
        check(&text, &ops, seed, &cuts)?;
    }
}

/// (c) Writes still in the write cache are volatile: the plain cut loses them
/// all, the enumerated subsets keep each of them in some states and lose it
/// in others, and the flush that follows keeps them.
#[test]
fn cached_unflushed_writes_are_lost_in_some_subsets_and_kept_in_others() {
    let dir = Dir::new("cache");
    let mut d = mem_device(PAGE_SLC, 1);
    crashlog::start(&mut d, &dir.0, PAGE_SLC, 1).unwrap();
    let mut buf = vec![0u8; 4096];
    let mut t = 0;
    pattern(&mut buf, 0, 1);
    t = d.write(t, 0, &buf).unwrap();
    t = d.flush(t).unwrap();
    for (i, a) in [3u64, 9, 20].iter().enumerate() {
        pattern(&mut buf, *a, 2 + i as u64);
        t = d.write(t, a * 4096, &buf).unwrap();
    }
    assert_eq!(d.cached_units(), 3);
    d.flush(t).unwrap();
    let ix = crashlog::stop(&mut d).unwrap();
    let states = enumerate(&ix, &Bounds { after: None, seed: 5, subsets: 8, tears: 0, at_marks: false });
    let ids: Vec<String> = states.iter().map(|s| s.id.to_string()).collect();
    // The cut before flush 1 (its write cached), flush 1, then at the end of
    // the next interval the plain cut and all six proper subsets of its three
    // cached writes, then flush 5.
    assert_eq!(ids, ["0", "1", "4", "4+m1", "4+m2", "4+m3", "4+m4", "4+m5", "4+m6", "5"]);
    let holds = |id: &str, a: u64| -> u64 {
        let cut = Cut::new(&ix, id.parse().unwrap()).unwrap();
        match unit_content(&ix, &cut, a as u32) {
            UnitContent::Data(b) => decode(b, a).unwrap(),
            UnitContent::Zero => 0,
            UnitContent::Damaged => panic!("damaged"),
        }
    };
    for (i, a) in [3u64, 9, 20].iter().enumerate() {
        assert_eq!(holds("4", *a), 0, "the plain cut loses cached unit {a}");
        assert_eq!(holds("5", *a), 2 + i as u64, "the flush keeps unit {a}");
        let kept = ids[3..9].iter().filter(|id| holds(id, *a) != 0).count();
        assert_eq!(kept, 3, "unit {a} is kept in half of the proper subsets");
        let bit = format!("4+m{:x}", 1 << i);
        assert_eq!(holds(&bit, *a), 2 + i as u64, "mask bit {i} keeps unit {a}");
    }
    // Flushed data survives every state.
    assert_eq!(holds("0", 0), 0, "unflushed, cached");
    for id in &ids[1..] {
        assert_eq!(holds(id, 0), 1);
    }
    // More volatile writes than the budget: plain cut, prefixes, seeded halves.
    let dir2 = Dir::new("cache2");
    let mut d = mem_device(PAGE_SLC, 1);
    crashlog::start(&mut d, &dir2.0, PAGE_SLC, 1).unwrap();
    let mut t = 0;
    for a in 0..8u64 {
        pattern(&mut buf, a, a + 1);
        t = d.write(t, a * 4096, &buf).unwrap();
    }
    d.flush(t).unwrap();
    let ix = crashlog::stop(&mut d).unwrap();
    let states = enumerate(&ix, &Bounds { after: None, seed: 5, subsets: 6, tears: 0, at_marks: false });
    let kinds: Vec<&str> = states.iter().map(|s| s.kind).collect();
    assert_eq!(kinds, ["cut", "subset", "subset", "subset", "subset", "subset", "subset", "flush"]);
    assert!(matches!(states[1].id.choice, Choice::Prefix(2)), "{:?}", states[1].id);
    assert!(states.iter().all(|s| s.kind == "flush" || s.volatile == 8));
    let again = enumerate(&ix, &Bounds { after: None, seed: 5, subsets: 6, tears: 0, at_marks: false });
    assert_eq!(states, again, "the enumeration is seeded");
    let other = enumerate(&ix, &Bounds { after: None, seed: 6, subsets: 6, tears: 0, at_marks: false });
    assert_ne!(states, other);
}

#[test]
fn marks_add_the_cuts_right_after_them_that_hold_something_new() {
    let dir = Dir::new("marks");
    let mut d = mem_device(PAGE_SLC, 1);
    crashlog::start(&mut d, &dir.0, PAGE_SLC, 1).unwrap();
    let mut buf = vec![0u8; 4096];
    let mut t = 0;
    let mark = |d: &mut Device, t: u64, l: &str| crashlog::mark(d, t, l).unwrap();
    pattern(&mut buf, 0, 1);
    t = d.write(t, 0, &buf).unwrap();
    t = d.flush(t).unwrap(); // record 1
    mark(&mut d, t, "begin"); // 2: nothing since the flush: no state of its own
    pattern(&mut buf, 3, 2);
    t = d.write(t, 3 * 4096, &buf).unwrap(); // 3
    mark(&mut d, t, "ack 1"); // 4: unit 3 cached: a state
    mark(&mut d, t, "intent 2"); // 5: the same as 4: none
    pattern(&mut buf, 5, 3);
    t = d.write(t, 5 * 4096, &buf).unwrap(); // 6
    mark(&mut d, t, "ack 2"); // 7: the interval's end (the flush follows): listed once
    d.flush(t).unwrap(); // 8
    let ix = crashlog::stop(&mut d).unwrap();
    let plain = enumerate(&ix, &Bounds { after: Some(2), seed: 5, subsets: 0, tears: 0, at_marks: false });
    let with = enumerate(&ix, &Bounds { after: Some(2), seed: 5, subsets: 0, tears: 0, at_marks: true });
    let ids = |v: &[crashlog::StateInfo]| v.iter().map(|s| s.id.to_string()).collect::<Vec<_>>();
    assert_eq!(ids(&plain), ["7", "8"]);
    assert_eq!(ids(&with), ["4", "7", "8"]);
    assert_eq!((with[0].kind, with[0].acked, with[0].volatile), ("cut", 5, 1));
}

/// Random ops on a device whose paired pages are unprotected, long enough to
/// tear upper pages holding flushed data.
fn unprotected_log(dir: &Dir) -> Index {
    let text = unprotected(HYBRID);
    let mut d = mem_device(&text, 3);
    crashlog::start(&mut d, &dir.0, &text, 3).unwrap();
    let mut t = 0;
    let mut r = flash_model::rng::Rng::new(11);
    let units = d.capacity() / 4096;
    for i in 0..600u64 {
        let o = match r.below(10) {
            0 | 1 => Op::Flush,
            2 => Op::Discard { unit: r.below(units), len: 1 + r.below(4) },
            3 => Op::Write { off: r.below(units * 8) * 512, len: 512 * (1 + r.below(8)) },
            _ => Op::Write { off: r.below(units) * 4096, len: 4096 * (1 + r.below(4)) },
        };
        t = apply(&mut d, &o, t, i + 1).unwrap();
    }
    d.flush(t).unwrap();
    crashlog::stop(&mut d).unwrap()
}

/// (d) and (e): an image file equals the served state; a log loaded from its
/// files gives the same states, ids and contents as the live one.
#[test]
fn image_files_served_states_and_offline_rebuild_agree() {
    let dir = Dir::new("offline");
    let ix = unprotected_log(&dir);
    assert!(ix.complete);
    let states = enumerate(&ix, &Bounds { after: Some(40), seed: 9, subsets: 4, tears: 3, at_marks: false });
    assert!(states.iter().all(|s| s.id.pos > 40));
    for k in ["flush", "cut", "subset", "tear"] {
        assert!(states.iter().any(|s| s.kind == k), "no {k} state among {}", states.len());
    }
    assert!(states.iter().any(|s| s.damaged > 0), "no torn program hit flushed data");
    let off = Index::load(&dir.0).unwrap();
    assert!(off.complete && off.anomalies == 0);
    assert_eq!(enumerate(&off, &Bounds { after: Some(40), seed: 9, subsets: 4, tears: 3, at_marks: false }), states);
    let live = Arc::new(ix);
    let mut view = View::new(live.clone(), states[0].id).unwrap();
    let img_path = dir.0.join("state.img");
    let cap = live.units * live.unit;
    for s in &states {
        view.switch(s.id).unwrap();
        let cut_off = Cut::new(&off, s.id).unwrap();
        // A new file each time (truncating one in place makes ext4 flush it).
        let _ = std::fs::remove_file(&img_path);
        flash_model::crashlog::write_image(&off, &cut_off, &img_path).unwrap();
        let img = std::fs::read(&img_path).unwrap();
        assert_eq!(img.len() as u64, cap);
        let u = live.unit as usize;
        let mut b = vec![0u8; u];
        for l in 0..live.units as usize {
            match view.read(l as u64 * live.unit, &mut b) {
                Ok(()) => assert!(b[..] == img[l * u..(l + 1) * u], "{}: unit {l} differs between served state and image", s.id),
                Err(()) => {
                    assert!(cut_off.damaged.binary_search(&(l as u32)).is_ok(), "{}: unit {l} unreadable but not damaged", s.id);
                    assert!(zeroes(&img[l * u..(l + 1) * u]));
                }
            }
        }
    }
    // The scratch overlay: writes while a state is served, gone at a switch.
    let id = states.iter().find(|s| s.kind == "flush").unwrap().id;
    view.switch(id).unwrap();
    let mut before = vec![0u8; 8192];
    view.read(4096, &mut before).unwrap();
    view.write(4096 + 100, &[0xAB; 5000]).unwrap();
    let mut after = vec![0u8; 8192];
    view.read(4096, &mut after).unwrap();
    assert_eq!(&after[100..5100], &[0xAB; 5000][..]);
    assert_eq!(&after[..100], &before[..100]);
    assert_eq!(&after[5100..], &before[5100..]);
    view.discard(0, 3 * 4096 + 10).unwrap();
    view.read(0, &mut after).unwrap();
    assert!(zeroes(&after));
    view.switch(id).unwrap();
    view.read(4096, &mut after).unwrap();
    assert_eq!(after, before, "a switch drops what was written to the state");
    assert!(view.read(cap - 10, &mut [0u8; 20]).is_err());
}

#[test]
fn state_ids_round_trip_and_bad_ones_are_refused() {
    for s in ["0", "812", "812+m1f", "812+k5", "812+r99", "812+t88"] {
        assert_eq!(s.parse::<StateId>().unwrap().to_string(), s);
    }
    for s in ["", "x", "12+", "12+q3", "12+k", "-1", "12+mzz"] {
        assert!(s.parse::<StateId>().is_err(), "{s}");
    }
    let dir = Dir::new("ids");
    let ix = unprotected_log(&dir);
    let n = ix.recs.len();
    assert!(Cut::new(&ix, StateId { pos: n as u32, choice: Choice::Model }).unwrap_err().contains("records"));
    let j = ix.progs.iter().position(|p| p.pos > 0).unwrap();
    let wrong = StateId { pos: ix.progs[j].pos - 1, choice: Choice::Tear(j as u32) };
    assert!(Cut::new(&ix, wrong).unwrap_err().contains("issued by record"));
}

/// (f) A damaged state's undamaged twin (`ID+u`) is the same cut with every
/// damaged unit back at its durable version, on a device without paired-page
/// protection; the damage the state lists says which units held flushed data.
#[test]
fn an_undamaged_twin_is_the_same_cut_without_its_damage() {
    let dir = Dir::new("twin");
    let ix = unprotected_log(&dir);
    let states = enumerate(&ix, &Bounds { after: Some(40), seed: 9, subsets: 4, tears: 3, at_marks: false });
    let damaged: Vec<_> = states.iter().filter(|s| s.damaged > 0).collect();
    assert!(!damaged.is_empty());
    let mut flushed_seen = 0;
    for s in damaged {
        let cut = Cut::new(&ix, s.id).unwrap();
        let label = format!("{}+u", s.id);
        let twin = Cut::parse(&ix, &label).unwrap();
        assert!(twin.undamaged && twin.damaged.is_empty() && twin.label() == label);
        assert_eq!(twin.info(&ix).to_json()["id"], serde_json::json!(label));
        assert_eq!((twin.t, twin.acked, twin.volatile.len()), (cut.t, cut.acked, cut.volatile.len()), "{}", s.id);
        for l in 0..ix.units as u32 {
            let (a, b) = (unit_content(&ix, &cut, l), unit_content(&ix, &twin, l));
            match (a, b) {
                (UnitContent::Damaged, UnitContent::Damaged) => panic!("{label}: unit {l} still damaged"),
                (UnitContent::Damaged, _) => assert!(cut.damaged.binary_search(&l).is_ok()),
                (UnitContent::Zero, UnitContent::Zero) => {}
                (UnitContent::Data(x), UnitContent::Data(y)) => assert_eq!(x, y, "{label}: unit {l}"),
                _ => panic!("{label}: unit {l} differs beyond the damage"),
            }
        }
        let units = cut.damaged_units(&ix);
        assert_eq!(units.iter().map(|u| u.0).collect::<Vec<_>>(), cut.damaged);
        for (lpn, flushed) in units {
            // flushed: the version it lost was written before the last flush acknowledged before the cut
            let h: Vec<u32> = (0..ix.versions.len() as u32).filter(|&v| ix.versions[v as usize].lpn == lpn && ix.versions[v as usize].rec <= s.id.pos).collect();
            let written = ix.versions[*h.iter().rev().find(|&&v| ix.versions[v as usize].commit != u32::MAX && (ix.versions[v as usize].commit as usize) < ix.commits.partition_point(|c| c.pos <= s.id.pos && c.d <= cut.t)).unwrap() as usize].rec;
            assert_eq!(flushed, cut.last_flush.map_or(false, |f| written < f), "{}: unit {lpn}", s.id);
            flushed_seen += flushed as usize;
        }
    }
    assert!(flushed_seen > 0, "no damage hit flushed data");
    // a twin of an undamaged state is that state; a twin id must name a state
    let flush = states.iter().find(|s| s.kind == "flush").unwrap();
    assert!(Cut::parse(&ix, &format!("{}+u", flush.id)).unwrap().damaged.is_empty());
    for bad in ["+u", "12+u+u", "12+q+u", "u"] {
        assert!(crashlog::cut::parse_state(bad).is_err(), "{bad}");
    }
}

#[test]
fn a_log_starts_only_on_a_blank_device() {
    let dir = Dir::new("blank");
    let mut d = mem_device(PAGE_SLC, 1);
    d.write(0, 8192, &[1u8; 4096]).unwrap();
    let e = crashlog::start(&mut d, &dir.0, PAGE_SLC, 1).unwrap_err();
    assert!(e.contains("blank"), "{e}");
    let mut d = mem_device(PAGE_SLC, 1);
    let e = crashlog::start(&mut d, &dir.0, HYBRID, 1).unwrap_err();
    assert!(e.contains("does not describe"), "{e}");
}

/// Image classes: states holding the same bytes share one, whatever wrote them;
/// states differing in one unit (its bytes, or a damaged copy) never do.
#[test]
fn image_classes_merge_equal_images_and_only_those() {
    let dir = Dir::new("images");
    let mut d = mem_device(PAGE_SLC, 1);
    crashlog::start(&mut d, &dir.0, PAGE_SLC, 1).unwrap();
    // each write (unit, version) followed by a flush; a version's bytes are the same whenever written
    let mut t = 0;
    let flushed = |d: &mut Device, t: &mut u64, w: Option<(u64, u64)>| {
        if let Some((unit, ver)) = w {
            let mut buf = vec![0u8; 4096];
            pattern(&mut buf, unit, ver);
            *t = d.write(*t, unit * 4096, &buf).unwrap();
        }
        *t = d.flush(*t).unwrap();
    };
    flushed(&mut d, &mut t, Some((0, 1))); // record 1: unit 0 holds write 1
    flushed(&mut d, &mut t, None); // 2: nothing new: the same image as 1
    flushed(&mut d, &mut t, Some((7, 2))); // 4: unit 7 too
    flushed(&mut d, &mut t, Some((7, 3))); // 6: differs from 4 in unit 7 only
    flushed(&mut d, &mut t, Some((7, 2))); // 8: unit 7 back to write 2's bytes, written again: 4's image
    t = d.discard(t, 7 * 4096, 4096).unwrap();
    d.flush(t).unwrap(); // 10: unit 7 trimmed: 1's image
    let ix = crashlog::stop(&mut d).unwrap();
    let states = enumerate(&ix, &Bounds { after: None, seed: 5, subsets: 0, tears: 0, at_marks: false });
    let ids: Vec<String> = states.iter().map(|s| s.id.to_string()).collect();
    let classes = Images::new(&ix).classes(&states).unwrap();
    let class = |id: &str| classes[ids.iter().position(|i| i == id).unwrap()];
    assert_eq!(class("1"), class("2"));
    assert_ne!(class("4"), class("6"), "one unit's bytes differ");
    assert_eq!(class("4"), class("8"), "the same bytes, rewritten");
    assert_eq!(class("1"), class("10"), "trimmed reads as never written");
    assert_ne!(class("1"), class("4"));
}

#[test]
fn a_damaged_unit_is_its_own_image() {
    let dir = Dir::new("images-damage");
    let ix = unprotected_log(&dir);
    let states = enumerate(&ix, &Bounds { after: None, seed: 1, subsets: 0, tears: 50, at_marks: false });
    let imgs = Images::new(&ix);
    let classes = imgs.classes(&states).unwrap();
    let mut damaged = 0;
    for (i, s) in states.iter().enumerate() {
        let cut = Cut::new(&ix, s.id).unwrap();
        let key = imgs.key(&cut);
        for &l in &cut.damaged {
            // read as EIO: a class no bytes (zeroes included) have
            assert_eq!(key.iter().find(|k| k.0 == l).map(|k| k.1), Some(u32::MAX), "{}: unit {l}", s.id);
            damaged += 1;
        }
        for j in 0..i {
            if classes[j] == classes[i] {
                assert_eq!(state_image(&ix, &Cut::new(&ix, states[j].id).unwrap()), state_image(&ix, &cut));
            }
        }
    }
    assert!(damaged > 0, "the log has states with damaged units");
}
