//! Property tests: random write/flush/discard/cut/restart sequences against
//! a reference of what each unit may contain.
//!  - without a cut, a read returns exactly the latest write (or zeroes);
//!  - after a cut, a unit holds its last flushed version or one written (or
//!    discarded) after that flush -- never anything else: flushed data
//!    survives, and nothing is invented;
//!  - the FTL's mapping stays consistent; statistics add up.

mod common;
use common::*;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Write { unit: u64, len: u64 },
    Flush,
    Discard { unit: u64, len: u64 },
    Read { unit: u64, len: u64 },
    /// Cut `delay` ns after the latest completion, then restart.
    Cut { delay: u64 },
}

fn op(units: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0..units, 1..8u64).prop_map(|(unit, len)| Op::Write { unit, len }),
        2 => Just(Op::Flush),
        2 => (0..units, 1..16u64).prop_map(|(unit, len)| Op::Discard { unit, len }),
        3 => (0..units, 1..8u64).prop_map(|(unit, len)| Op::Read { unit, len }),
        1 => (0..20_000_000u64).prop_map(|delay| Op::Cut { delay }),
    ]
}

fn run(text: &str, ops: &[Op], seed: u64) -> Result<(), TestCaseError> {
    let mut d = mem_device(text, seed);
    let u = d.cfg.unit_bytes() as u64;
    let units = d.capacity() / u;
    let mut r = Versions::new(units, u);
    let mut t = 0u64;
    let (mut writes, mut write_bytes, mut flushes, mut discards) = (0u64, 0u64, 0u64, 0u64);
    let mut buf = vec![0u8; (16 * u) as usize];
    for o in ops {
        match *o {
            Op::Write { unit, len } => {
                let len = len.min(units - unit);
                let data = r.new_versions(&mut buf, unit, len);
                t = d.write(t, unit * u, data).map_err(|e| TestCaseError::fail(format!("write: {e:?}")))?;
                writes += 1;
                write_bytes += len * u;
            }
            Op::Flush => {
                t = d.flush(t).map_err(|e| TestCaseError::fail(format!("flush: {e:?}")))?;
                r.flushed_all();
                flushes += 1;
            }
            Op::Discard { unit, len } => {
                let len = len.min(units - unit);
                t = d.discard(t, unit * u, len * u).map_err(|e| TestCaseError::fail(format!("discard: {e:?}")))?;
                for a in unit..unit + len {
                    r.wrote(a, 0);
                }
                discards += 1;
            }
            Op::Read { unit, len } => {
                let len = len.min(units - unit);
                let b = &mut buf[..(len * u) as usize];
                t = d.read(t, unit * u, b).map_err(|e| TestCaseError::fail(format!("read: {e:?}")))?;
                for i in 0..len {
                    let a = unit + i;
                    let got = decode(&b[(i * u) as usize..((i + 1) * u) as usize], a);
                    prop_assert_eq!(got, Some(r.current[a as usize]), "unit {} after op {:?}", a, o);
                }
            }
            Op::Cut { delay } => {
                d.power_cut(t + delay);
                d.ftl.check(&d.media).map_err(TestCaseError::fail)?;
                d.restart();
                t = d.clock;
                t = r.check_after_cut(&mut d, t).map_err(TestCaseError::fail)?;
            }
        }
    }
    d.ftl.check(&d.media).map_err(TestCaseError::fail)?;
    let s = d.stats_json();
    // Host counters are per power-on; count only what followed the last cut.
    let last_cut = ops.iter().rposition(|o| matches!(o, Op::Cut { .. }));
    if last_cut.is_none() {
        prop_assert_eq!(s["host"]["writes"].as_u64().unwrap(), writes);
        prop_assert_eq!(s["host"]["write_bytes"].as_u64().unwrap(), write_bytes);
        prop_assert_eq!(s["host"]["flushes"].as_u64().unwrap(), flushes);
        prop_assert_eq!(s["host"]["discards"].as_u64().unwrap(), discards);
    }
    let n = &s["nand"];
    prop_assert_eq!(
        n["page_programs"].as_u64().unwrap(),
        n["host_page_programs"].as_u64().unwrap() + n["gc_page_programs"].as_u64().unwrap()
            + n["fold_page_programs"].as_u64().unwrap()
    );
    let ec: u64 = s["erase_counts"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).sum();
    prop_assert_eq!(ec, n["erases"].as_u64().unwrap());
    Ok(())
}

fn cfg_cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(128)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cfg_cases(), .. ProptestConfig::default() })]

    #[test]
    fn page_ftl_slc(ops in prop::collection::vec(op(512), 1..400), seed in 0..1000u64) {
        run(PAGE_SLC, &ops, seed)?;
    }

    #[test]
    fn page_ftl_mlc_subpage_units(ops in prop::collection::vec(op(512), 1..400), seed in 0..1000u64) {
        run(PAGE_MLC, &ops, seed)?;
    }

    #[test]
    fn page_ftl_mlc_slc_buffer(ops in prop::collection::vec(op(512), 1..400), seed in 0..1000u64) {
        run(&page_mlc_slc(0.0), &ops, seed)?;
    }

    #[test]
    fn hybrid_ftl(ops in prop::collection::vec(op(64), 1..300), seed in 0..1000u64) {
        run(HYBRID, &ops, seed)?;
    }

    #[test]
    fn hybrid_ftl_sequential_log_one_open_au(ops in prop::collection::vec(op(64), 1..300), seed in 0..1000u64) {
        run(&HYBRID.replace("open_aus = 2", "open_aus = 1\nsequential_log = true"), &ops, seed)?;
    }

    #[test]
    fn page_ftl_without_cache(ops in prop::collection::vec(op(512), 1..300), seed in 0..1000u64) {
        run(&PAGE_SLC.replace("cache = \"32K\"", "cache = 0").replace("journal_interval = 64", "journal_interval = 5"), &ops, seed)?;
    }
}
