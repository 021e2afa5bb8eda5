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
    let mut current = vec![0u64; n as usize];
    let mut flushed = vec![0u64; n as usize];
    let mut since: Vec<Vec<u64>> = vec![vec![]; n as usize];
    let mut ver = 0u64;
    let mut t = 0u64;
    let mut buf = vec![0u8; (8 * SECTOR) as usize];
    for o in ops {
        match *o {
            Op::Write { sector, count } => {
                let sector = sector % n;
                let count = count.min(n - sector);
                for i in 0..count {
                    ver += 1;
                    let s = sector + i;
                    pattern(&mut buf[(i * SECTOR) as usize..((i + 1) * SECTOR) as usize], s, ver);
                    current[s as usize] = ver;
                    since[s as usize].push(ver);
                }
                t = d.write(t, sector * SECTOR, &buf[..(count * SECTOR) as usize])
                    .map_err(|e| TestCaseError::fail(format!("write: {e:?}")))?;
            }
            Op::Flush => {
                t = d.flush(t).map_err(|e| TestCaseError::fail(format!("flush: {e:?}")))?;
                for s in 0..n as usize {
                    flushed[s] = current[s];
                    since[s].clear();
                }
            }
            Op::Cut { delay } => {
                d.power_cut(t + delay);
                d.restart();
                t = d.clock;
                for s in 0..n {
                    let b = &mut buf[..SECTOR as usize];
                    t = d.read(t, s * SECTOR, b).map_err(|e| TestCaseError::fail(format!("read after cut: {e:?}")))?;
                    let got = decode(b, s).ok_or_else(|| TestCaseError::fail(format!("sector {s}: never written there")))?;
                    let ok = got == flushed[s as usize] || since[s as usize].contains(&got);
                    prop_assert!(ok, "sector {}: version {} after cut; flushed {}, later {:?}", s, got, flushed[s as usize], since[s as usize]);
                    current[s as usize] = got;
                    flushed[s as usize] = got;
                    since[s as usize].clear();
                }
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
