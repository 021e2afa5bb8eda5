//! Sub-unit writes (512-byte sectors, as FAT's table and directory updates
//! are): after a cut, every sector holds its last flushed version or one
//! written after that flush; flushed sectors survive.

mod common;
use common::*;
use proptest::prelude::*;

const SECTOR: u64 = 512;

#[derive(Debug, Clone)]
enum Op {
    Write { sector: u64, count: u64 },
    Flush,
    Cut { delay: u64 },
}

fn op(sectors: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0..sectors, 1..9u64).prop_map(|(sector, count)| Op::Write { sector, count }),
        3 => Just(Op::Flush),
        1 => (0..3_000_000u64).prop_map(|delay| Op::Cut { delay }),
    ]
}

fn run(text: &str, ops: &[Op], seed: u64, sectors: u64) -> Result<(), TestCaseError> {
    let mut d = mem_device(text, seed);
    let n = sectors.min(d.capacity() / SECTOR);
    let mut r = Versions::new(n, SECTOR);
    let mut t = 0u64;
    let mut buf = vec![0u8; (8 * SECTOR) as usize];
    for o in ops {
        match *o {
            Op::Write { sector, count } => {
                let sector = sector % n;
                let count = count.min(n - sector);
                let data = r.new_versions(&mut buf, sector, count);
                t = d.write(t, sector * SECTOR, data)
                    .map_err(|e| TestCaseError::fail(format!("write: {e:?}")))?;
            }
            Op::Flush => {
                t = d.flush(t).map_err(|e| TestCaseError::fail(format!("flush: {e:?}")))?;
                r.flushed_all();
            }
            Op::Cut { delay } => {
                d.power_cut(t + delay);
                d.restart();
                t = d.clock;
                t = r.check_after_cut(&mut d, t).map_err(TestCaseError::fail)?;
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn sectors_page_ftl_with_cache(ops in prop::collection::vec(op(2048), 1..300), seed in 0..1000u64) {
        run(PAGE_SLC, &ops, seed, 2048)?;
    }

    #[test]
    fn sectors_page_ftl_mlc_subpage_units(ops in prop::collection::vec(op(2048), 1..300), seed in 0..1000u64) {
        run(PAGE_MLC, &ops, seed, 2048)?;
    }
}
