//! Point reads: `prefix_exists` and `get`.

use super::{fixture, put};
use crate::{Batch, KvRead, KvWrite, Store};
use std::path::Path;

/// `prefix_exists` is true exactly when some key starts with the prefix.
pub fn prefix_exists<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    let s = &fx.store;
    assert!(!s.prefix_exists(b"").unwrap(), "empty store has no keys");
    assert!(!s.prefix_exists(b"a").unwrap());
    put(s, b"ab", b"");
    put(s, b"\xff", b"v");
    for (prefix, want) in [
        (&b""[..], true),
        (b"a", true),
        (b"ab", true),
        (b"ab\x00", false),
        (b"abc", false),
        (b"aa", false),
        (b"a\xff", false),
        (b"b", false),
        (b"\xff", true),
        (b"\xff\x00", false),
        (b"\xff\xff", false),
    ] {
        assert_eq!(
            s.prefix_exists(prefix).unwrap(),
            want,
            "prefix_exists({})",
            crate::escape_key(prefix)
        );
    }
    s.apply(Batch::new().delete(b"ab".to_vec())).unwrap();
    assert!(!s.prefix_exists(b"a").unwrap(), "deleted key still counted");
    assert!(s.prefix_exists(b"").unwrap());
}

/// `get` returns the current value; an empty value is present, not absent.
pub fn get<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    let s = &fx.store;
    assert_eq!(s.get(b"g/a").unwrap(), None);
    put(s, b"g/a", b"1");
    assert_eq!(s.get(b"g/a").unwrap(), Some(b"1".to_vec()));
    put(s, b"g/a", b"2");
    assert_eq!(s.get(b"g/a").unwrap(), Some(b"2".to_vec()), "overwrite");
    put(s, b"g/empty", b"");
    assert_eq!(s.get(b"g/empty").unwrap(), Some(Vec::new()));
    let binary_key = b"g/\x00\xff\x00".to_vec();
    let binary_value: Vec<u8> = (0..=255u8).collect();
    put(s, &binary_key, &binary_value);
    assert_eq!(s.get(&binary_key).unwrap(), Some(binary_value));
    assert_eq!(
        s.get(b"g/\x00\xff").unwrap(),
        None,
        "a prefix of a key is not the key"
    );
    assert_eq!(s.get(b"g/\x00\xff\x00\x00").unwrap(), None);
    let big = vec![0xabu8; 256 * 1024];
    put(s, b"g/big", &big);
    assert_eq!(s.get(b"g/big").unwrap(), Some(big));
    s.apply(Batch::new().delete(b"g/a".to_vec())).unwrap();
    assert_eq!(s.get(b"g/a").unwrap(), None);
}
