//! Property tests over the node reader: arbitrary bytes (and mutated real dumps) never
//! panic; they give nodes or one Input error line naming the source.

use gpuwl_core::analysis::check::check;
use gpuwl_core::decode::dump::read_from;
use gpuwl_core::error::Error;
use proptest::prelude::*;

const SEED_OK: &str = include_str!("../shared-cases/check/seed-ok/nodes.json");

fn read(bytes: &[u8]) -> Result<usize, Error> {
    let mut nodes = Vec::new();
    let r = read_from(bytes, "fuzz", |n| nodes.push(n));
    if r.is_ok() {
        // Whatever was read must also be checkable without panicking.
        let _ = gpuwl_core::render::check::text_lines(&check(&nodes));
    }
    r
}

fn assert_clean(r: Result<usize, Error>) -> Result<(), TestCaseError> {
    if let Err(e) = r {
        prop_assert!(e.is_input());
        let m = e.to_string();
        prop_assert!(m.starts_with("fuzz: "), "{}", m);
        prop_assert!(!m.contains('\n'), "{}", m);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        assert_clean(read(&bytes))?;
    }

    #[test]
    fn json_prefixed_bytes_never_panic(tail in prop::collection::vec(any::<u8>(), 0..256)) {
        let mut b = b"{\"kind\":\"List\",\"items\":[".to_vec();
        b.extend(tail);
        assert_clean(read(&b))?;
    }

    #[test]
    fn mutated_real_dump_never_panics(
        cut in 0..SEED_OK.len(),
        pos in 0..SEED_OK.len(),
        byte in any::<u8>(),
    ) {
        let mut b = SEED_OK.as_bytes().to_vec();
        b[pos] = byte;
        b.truncate(cut.max(pos + 1));
        assert_clean(read(&b))?;
    }

    #[test]
    fn yaml_like_text_never_panics(s in "[a-z:{}\\[\\]\\-\n \"'&*!|>#0-9.]{0,200}") {
        assert_clean(read(s.as_bytes()))?;
    }
}

#[test]
fn the_real_dump_reads() {
    assert_eq!(read(SEED_OK.as_bytes()).unwrap(), 4);
}
