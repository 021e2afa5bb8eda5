mod common;
use common::*;
#[test]
fn tmp() {
    let text = std::fs::read_to_string("../../../presets/emmc-8g.toml").unwrap();
    let c = cfg(&text, Some(64 << 20));
    let ps = c.geo.page_size;
    let mut d = flash_model::Device::new(c, Box::new(flash_model::store::MemStore::new(ps)), 1);
    let mut t = 0;
    let b = vec![1u8; 4096];
    for i in 0..(64 << 20) / 4096u64 { t = d.write(t, i * 4096, &b).unwrap(); }
    t += 1_000_000_000;
    let mut rd = |d: &mut flash_model::Device, off: u64, t: &mut u64| { let mut r = vec![0u8; 4096]; let e = d.read(*t, off, &mut r).unwrap(); let l = (e - *t) / 1000; *t = e + 100_000; l };
    for align in [16u64 << 20, 4 << 20] {
        for k in 0..3 {
            let pre = rd(&mut d, align - 4096, &mut t);
            let on = rd(&mut d, align - 2048, &mut t);
            let post = rd(&mut d, align, &mut t);
            let far = rd(&mut d, 40 << 20, &mut t);
            println!("{align} {k} pre {pre} on {on} post {post} far {far} loc {:?} {:?} {:?}", d.locate(align - 4096), d.locate(align), d.locate(40 << 20));
        }
    }
}
