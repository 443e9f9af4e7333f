//! `strata verify` / `strata status` name the command that fixes a store needing a
//! migration (`strata migrate`), never an unnamed "migrator" (DESIGN.md §5).

use crate::support::{legacy_records, strata_db, with_store};
use strata::layout::header::header_key;
use strata::layout::header::SchemaHeader;
use strata_store::{Batch, KvWrite};

fn assert_names_the_command(db: &std::path::Path) {
    for args in [
        &["verify"][..],
        &["verify", "--json"],
        &["status"],
        &["status", "--json"],
    ] {
        let out = strata_db(db, args);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {out:?}");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!text.contains("migrator"), "{args:?}: {text}");
        // (`status --json` says `"verdict": "migration_required"` and no prose.)
        if args != ["status", "--json"] {
            assert!(text.contains("strata migrate"), "{args:?}: {text}");
        }
        if args[0] == "verify" {
            // Each table's problem says it, in the words of DESIGN.md §3.
            assert!(
                text.contains("an explicit migration is required: run `strata migrate`"),
                "{args:?}: {text}"
            );
        }
    }
}

#[test]
fn legacy_data_names_strata_migrate() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("numax");
    with_store(&db, |s| {
        legacy_records(s, 30);
    });
    assert_names_the_command(&db);
}

#[test]
fn an_older_header_names_strata_migrate() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("numax");
    with_store(&db, |s| {
        legacy_records(s, 30);
        s.apply(Batch::new().set(
            header_key("op-log"),
            SchemaHeader::new(0, 14).encode().to_vec(),
        ))
        .unwrap();
    });
    assert_names_the_command(&db);
}
