//! Findings of the managed tables' metadata: the catalog records and the table-id
//! counter, migration checkpoints, sweep markers.

use super::*;

/// The catalog records and the table-id counter. Returns the managed tables repair can
/// trust: the Numax tables in use and every readable collection.
pub(super) fn catalog_findings(
    store: &Store,
    out: &mut Vec<Finding>,
) -> Result<Catalog, StoreError> {
    let mut catalog = strata::numax::catalog_in_use(store)?;
    let entries = records(store, CATALOG_PREFIX)?;
    // The collection each id of a readable record belongs to.
    let mut holders: BTreeMap<u16, String> = BTreeMap::new();
    let mut decoded = Vec::new();
    for (key, value) in &entries {
        decoded.push(layout::catalog::decode_catalog_entry(key, value));
    }
    // A duplicate id belongs to the collection whose schema header carries it, then to
    // one holding documents, then to the first in key order.
    let mut best: BTreeMap<u16, (bool, bool)> = BTreeMap::new();
    for (name, id) in decoded.iter().flatten() {
        let header_matches = store
            .get(&header_key(name))?
            .and_then(|h| SchemaHeader::decode(&h).ok())
            .is_some_and(|h| h.table_id == *id);
        let has_docs = store.prefix_exists(&layout::keys::doc_prefix(name))?;
        let score = (header_matches, has_docs);
        if best.get(id).is_none_or(|b| score > *b) {
            best.insert(*id, score);
            holders.insert(*id, name.clone());
        }
    }
    let mut final_ids: Vec<(String, u16)> = Vec::new();
    for ((key, value), result) in entries.iter().zip(&decoded) {
        let problem = match result {
            Ok((name, id)) if holders.get(id) == Some(name) => {
                final_ids.push((name.clone(), *id));
                let _ = catalog.add(layout::catalog::table_def(name, *id));
                continue;
            }
            Ok((_, id)) => format!(
                "table id {id} is also recorded for collection `{}`",
                holders.get(id).map(String::as_str).unwrap_or_default()
            ),
            Err(e) => e.to_string(),
        };
        let finding = Finding::new(key, "catalog_record", Some(value.clone()), problem);
        let name_bytes = &key[CATALOG_PREFIX.len()..];
        let name = std::str::from_utf8(name_bytes)
            .ok()
            .filter(|n| layout::catalog::check_name(n).is_ok());
        let docs = [DOC_PREFIX, name_bytes, b"/"].concat();
        let has_docs = store.prefix_exists(&docs)?;
        // A valid name's schema header says which id the collection was given.
        let (hkey, header) = match name {
            Some(n) => {
                let k = header_key(n);
                let h = store.get(&k)?;
                (Some(k), h)
            }
            None => (None, None),
        };
        let header_id = header
            .as_deref()
            .and_then(|h| SchemaHeader::decode(h).ok())
            .map(|h| h.table_id)
            .filter(|id| *id >= FIRST_COLLECTION_ID && !holders.contains_key(id));
        match (name, header_id, &hkey) {
            (Some(n), Some(id), Some(hk)) => {
                final_ids.push((n.to_string(), id));
                holders.insert(id, n.to_string());
                let _ = catalog.add(layout::catalog::table_def(n, id));
                out.push(
                    finding
                        .rewrite(
                            layout::catalog::encode_catalog_record(id).to_vec(),
                            format!(
                                "rewrite it with table id {id}, the id its schema header `{}` carries",
                                escape_key(hk)
                            ),
                        )
                        .depends_on(hk, header.clone()),
                );
            }
            _ if !has_docs => {
                let f = finding.delete(format!(
                    "delete it: no document is stored under `{}`, and the next open of the collection records it again",
                    escape_key(&docs)
                ));
                // The header of that empty collection goes with it (a new registration
                // gets a new id, which a leftover header would contradict).
                if let (Some(hk), Some(h)) = (&hkey, &header) {
                    out.push(
                        Finding::new(
                            hk,
                            "schema_header",
                            Some(h.clone()),
                            format!(
                                "schema header of the unregistered collection `{}`",
                                name.unwrap_or_default()
                            ),
                        )
                        .delete("delete it with the catalog record (the collection holds no document)")
                        .depends_on(key, Some(value.clone())),
                    );
                }
                out.push(f);
            }
            _ => out.push(finding.manual(format!(
                "documents are stored under `{}` and the table id cannot be recovered from a schema header: restore the record from a backup",
                escape_key(&docs)
            ))),
        }
    }
    // The counter must decode and be at least every recorded id.
    let seq = store.get(CATALOG_SEQ_KEY)?;
    let highest = final_ids.iter().max_by_key(|(_, id)| *id);
    let problem =
        layout::catalog::check_seq(seq.as_deref(), highest.map(|(n, id)| (n.as_str(), *id)))
            .err()
            .map(|e| e.to_string());
    if let Some(problem) = problem {
        let f = Finding::new(CATALOG_SEQ_KEY, "catalog_counter", seq.clone(), problem);
        let mut f = match highest {
            Some((name, id)) => f.rewrite(
                id.to_be_bytes().to_vec(),
                format!("set it to {id}, the highest recorded table id (collection `{name}`)"),
            ),
            None => f.delete("delete it: no collection is recorded, so the next one gets id 1024"),
        };
        for (k, v) in &entries {
            f = f.depends_on(k, Some(v.clone()));
        }
        out.push(f);
    }
    Ok(catalog)
}

/// Migration checkpoints: corrupt, stale or orphaned ones, and interrupted migrations.
pub(super) fn migration_findings(
    store: &Store,
    catalog: &Catalog,
    out: &mut Vec<Finding>,
) -> Result<(), StoreError> {
    let registry = Registry::certification(catalog);
    for (key, value) in records(store, MIGRATION_PREFIX)? {
        let name = String::from_utf8_lossy(&key[MIGRATION_PREFIX.len()..]).into_owned();
        let f = Finding::new(&key, "migration_checkpoint", Some(value.clone()), "");
        let Some(tm) = registry
            .tables()
            .iter()
            .find(|tm| tm.table().name() == name)
        else {
            let mut f = f.delete(
                "delete it: no managed table of that name is recorded, so no migration can resume it",
            );
            f.problem = format!("checkpoint of `{name}`, which is not a managed table");
            out.push(f);
            continue;
        };
        let hkey = header_key(&name);
        let header = store.get(&hkey)?;
        match check_checkpoint(store, tm) {
            Ok(CheckpointCheck::Resumable { from, to, cursor }) => {
                let at = match &cursor {
                    Some(c) => format!("resumable from `{}`", escape_key(c)),
                    None => "resumable from the beginning".to_string(),
                };
                let mut f =
                    f.info("run `strata migrate` to finish it (it resumes; nothing is stuck)");
                f.problem = format!("interrupted migration of {name} v{from} -> v{to}: {at}");
                out.push(f);
            }
            Ok(_) => {}
            Err(e) if e.is_checkpoint() => {
                let mut f = f
                    .delete("delete it: the next `strata migrate` restarts the table's step from the beginning (certification only reads records, so running it again is safe)")
                    .depends_on(&hkey, header);
                f.problem = e.to_string();
                out.push(f);
            }
            Err(strata::migrate::MigrateError::Store { source, .. }) => return Err(source),
            // Header problems (corrupt, future) are the header's, listed below.
            Err(_) => {}
        }
    }
    for t in catalog.tables() {
        let s = inspect_table(store, t)?;
        if let TableState::Corrupt { reason } = s.state {
            let hkey = header_key(t.name());
            let bytes = store.get(&hkey)?;
            out.push(
                Finding::new(&hkey, "schema_header", bytes, reason)
                    .manual("a schema version is never guessed: restore the header from a backup"),
            );
        }
    }
    Ok(())
}

/// Sweep markers: unreadable, of a collection that is not recorded, or stopped.
pub(super) fn sweep_findings(store: &Store, out: &mut Vec<Finding>) -> Result<(), StoreError> {
    for (key, value) in records(store, SWEEP_PREFIX)? {
        let name = String::from_utf8_lossy(&key[SWEEP_PREFIX.len()..]).into_owned();
        let ckey = [CATALOG_PREFIX, &key[SWEEP_PREFIX.len()..]].concat();
        let recorded = store.get(&ckey)?;
        let f = Finding::new(&key, "sweep_marker", Some(value.clone()), "");
        match SweepMarker::decode(&name, &value) {
            Err(e) => {
                let mut f = f.delete("delete it: the marker is a hint (each document's payload version is the truth), the next sweep rescans the collection");
                f.problem = e.to_string();
                out.push(f);
            }
            Ok(_) if recorded.is_none() => {
                let mut f = f
                    .delete("delete it: no collection of that name is recorded")
                    .depends_on(&ckey, None);
                f.problem = format!("sweep marker of `{name}`, which is not a recorded collection");
                out.push(f);
            }
            Ok(m) => {
                if let Some(target) = m.in_progress {
                    let at = m.cursor().map_or_else(
                        || "the beginning".to_string(),
                        |c| format!("`{}`", escape_key(&c)),
                    );
                    let mut f = f.info(
                        "the next sweep resumes it once the lease expired (run the application's sweep)",
                    );
                    f.problem = format!(
                        "sweep of `{name}` toward v{target} in progress by `{}`, resumable from {at}",
                        m.runner.unwrap_or_default()
                    );
                    out.push(f);
                }
            }
        }
    }
    Ok(())
}
