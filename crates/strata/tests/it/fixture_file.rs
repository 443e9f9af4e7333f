//! Fixture files as a user handles them: captured from a sled store, written, read back;
//! a file cut short, a line that is not a row and a file that is not a fixture are refused
//! naming the file and the line.

use serde_json::{json, Value};
use strata::ops::fixture::{capture, CaptureOptions, Fixture, FixtureError};
use strata::{CollectionOptions, Database};

/// A fixture of 5 rows of `c`, as its file's lines.
fn lines(dir: &std::path::Path) -> Vec<String> {
    let store = strata_sled::SledStore::open_store(dir.join("sled")).unwrap();
    let db = Database::builder(store.clone()).open().unwrap();
    let c = db
        .collection::<Value>("c", CollectionOptions::new())
        .unwrap();
    for i in 0..5 {
        c.put(&format!("k{i}"), &json!({"i": i})).unwrap();
    }
    let fixture = capture(&store, "c", &CaptureOptions::new()).unwrap();
    let mut buf = Vec::new();
    fixture.write_to(&mut buf).unwrap();
    let text = String::from_utf8(buf).unwrap();
    assert_eq!(
        Fixture::read_from(text.as_bytes()).unwrap(),
        fixture,
        "a whole file reads back"
    );
    text.lines().map(str::to_string).collect()
}

fn read(path: &std::path::Path, lines: &[String]) -> Result<Fixture, FixtureError> {
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
    Fixture::read(path)
}

/// A file cut at a line boundary (a partial copy, a truncated download) used to read as
/// a smaller fixture, and the replay then passed on the rows left.
#[test]
fn a_fixture_cut_short_is_refused_naming_the_file_and_the_counts() {
    let dir = tempfile::tempdir().unwrap();
    let all = lines(dir.path());
    assert_eq!(all.len(), 6);
    let path = dir.path().join("accounts.jsonl");
    let whole = read(&path, &all).unwrap();
    assert_eq!(whole.rows.len(), 5);
    assert_eq!(whole.path(), Some(path.as_path()), "it remembers its file");
    assert_eq!(
        Fixture::read_from((all.join("\n") + "\n").as_bytes())
            .unwrap()
            .path(),
        None
    );
    let err = read(&path, &all[..4]).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, FixtureError::File { line: 5, .. })
            && text.contains("accounts.jsonl")
            && text.contains("counts 5 row(s) of `c` but the file holds 3")
            && text.contains("capture it again"),
        "{text}"
    );
    // A row added by hand shows the same way.
    let mut more = all.clone();
    more.push(all[5].replace("\"k4\"", "\"k5\""));
    assert!(read(&path, &more).is_err());
}

#[test]
fn a_bad_fixture_file_is_refused_naming_the_file_and_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let all = lines(dir.path());
    let path = dir.path().join("bad.jsonl");
    let mut broken = all.clone();
    broken[3] = "not json".into();
    let text = read(&path, &broken).unwrap_err().to_string();
    assert!(
        text.contains("bad.jsonl") && text.contains("line 4") && text.contains("not a fixture row"),
        "{text}"
    );
    let text = read(&path, &["{\"a\": 1}".to_string()])
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("bad.jsonl")
            && text.contains("line 1")
            && text.contains("not a fixture header"),
        "{text}"
    );
    std::fs::write(&path, "").unwrap();
    let text = Fixture::read(&path).unwrap_err().to_string();
    assert!(
        text.contains("bad.jsonl") && text.contains("empty"),
        "{text}"
    );
    let missing = dir.path().join("missing.jsonl");
    let text = Fixture::read(&missing).unwrap_err().to_string();
    assert!(text.contains("missing.jsonl"), "{text}");
}
