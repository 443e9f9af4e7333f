//! Findings of the shape policy's records: the fence and the client presence records,
//! cutover checkpoints, schema baselines.

use super::*;

/// The fence and the client presence records. Returns the fence's pending collections
/// when the fence is readable.
pub(super) fn policy_findings(
    store: &Store,
    now_ms: u64,
    out: &mut Vec<Finding>,
) -> Result<Option<BTreeSet<String>>, StoreError> {
    let mut generation = 0u64;
    let clients = records(store, CLIENTS_PREFIX)?;
    for (key, value) in &clients {
        let f = Finding::new(key, "client_presence", Some(value.clone()), "");
        match ClientRecord::decode(key, value) {
            Err(e) => {
                let mut f = f.delete(
                    "delete it: a live client rewrites its presence record at its next heartbeat",
                );
                f.problem = e.to_string();
                out.push(f);
            }
            Ok(c) => {
                generation = generation
                    .max(c.opened_generation)
                    .max(c.acked_generation.unwrap_or(0));
                if !c.is_live(now_ms, DEFAULT_STALE_AFTER_MS) {
                    let mut f = f.delete(format!(
                        "delete it: no heartbeat for {} s (the stale window is {} s), so the client is gone; a live one rewrites its record at its next heartbeat",
                        now_ms.saturating_sub(c.heartbeat_ms) / 1000,
                        DEFAULT_STALE_AFTER_MS / 1000
                    ));
                    f.problem =
                        format!("client `{}` (pid {}) stopped heartbeating", c.client, c.pid);
                    out.push(f);
                }
            }
        }
    }
    let Some(bytes) = store.get(FENCE_KEY)? else {
        return Ok(Some(BTreeSet::new()));
    };
    match FenceDoc::decode(&bytes) {
        Err(e) => {
            // A cutover interrupted under the damaged fence left its checkpoint: the
            // rewritten fence keeps it pending (toward the schema its checkpoint names),
            // so its writes stay fenced and the next `cutover` resumes after the
            // checkpoint instead of transforming the rows it already transformed again;
            // and no later repair takes the checkpoint for a leftover.
            let mut pending = Vec::new();
            let mut checkpoints = Vec::new();
            for (key, value) in records(store, CUTOVER_PREFIX)? {
                let name = String::from_utf8_lossy(&key[CUTOVER_PREFIX.len()..]).into_owned();
                if let Some(target_hash) = strata::ops::cutover::checkpoint_target(&value) {
                    pending.push(strata::policy::PendingCutover {
                        collection: name,
                        target_hash,
                    });
                    checkpoints.push((key, value));
                }
            }
            let doc = FenceDoc {
                generation,
                pending: pending.clone(),
                ..FenceDoc::default()
            };
            let kept = if pending.is_empty() {
                "cutovers it listed are forgotten: reopening their collections declares them again"
                    .to_string()
            } else {
                let names: Vec<&str> = pending.iter().map(|p| p.collection.as_str()).collect();
                format!(
                    "the cutovers of {} stay pending, as their checkpoints show: their writes stay fenced and the next `cutover` resumes each after its checkpoint, so no row is transformed twice; other cutovers it listed are forgotten",
                    names.join(", ")
                )
            };
            let mut f = Finding::new(FENCE_KEY, "fence", Some(bytes), crate::exit::render(&e)).rewrite(
                doc.encode(),
                format!(
                    "rewrite it as a normal fence at generation {generation}, the highest any client recorded ({kept}; `strata fence abort --reset-corrupt N` picks another generation)"
                ),
            );
            for (k, v) in &clients {
                f = f.depends_on(k, Some(v.clone()));
            }
            for (k, v) in checkpoints {
                f = f.depends_on(&k, Some(v));
            }
            out.push(f);
            Ok(Some(pending.into_iter().map(|p| p.collection).collect()))
        }
        Ok(doc) => {
            if doc.state != FenceState::Normal && doc.lease_until_ms < now_ms {
                out.push(
                    Finding::new(
                        FENCE_KEY,
                        "fence",
                        Some(bytes),
                        format!(
                            "cutover {} by `{}`, whose lease expired {} ms ago",
                            doc.state,
                            doc.coordinator.clone().unwrap_or_default(),
                            now_ms - doc.lease_until_ms
                        ),
                    )
                    .info("another client takes the cutover over when it runs it; `strata fence abort` resets the fence"),
                );
            }
            Ok(Some(
                doc.pending.into_iter().map(|p| p.collection).collect(),
            ))
        }
    }
}

/// Cutover checkpoints of collections with no pending cutover.
pub(super) fn cutover_findings(
    store: &Store,
    pending: Option<&BTreeSet<String>>,
    out: &mut Vec<Finding>,
) -> Result<(), StoreError> {
    for (key, value) in records(store, CUTOVER_PREFIX)? {
        let name = String::from_utf8_lossy(&key[CUTOVER_PREFIX.len()..]).into_owned();
        let f = Finding::new(&key, "cutover_checkpoint", Some(value.clone()), "");
        match pending {
            Some(p) if !p.contains(&name) => {
                let mut f = f
                    .delete("delete it: the fence lists no pending cutover of the collection, so no cutover resumes it (and a later one toward another schema would refuse it)")
                    .depends_on(FENCE_KEY, store.get(FENCE_KEY)?);
                f.problem = format!("leftover checkpoint of a cutover of `{name}`");
                out.push(f);
            }
            Some(_) => {
                if let Err(reason) = CutoverCheckpoint::new(&name, "").parse(&value) {
                    if !reason.contains("belongs to a cutover toward") {
                        let mut f = f.manual("the cutover is pending: restarting it could transform a document twice; restore the checkpoint from a backup");
                        f.problem = reason;
                        out.push(f);
                    }
                }
            }
            None => {}
        }
    }
    Ok(())
}

/// Unreadable schema baselines, rewritten from the newest history version.
pub(super) fn baseline_findings(store: &Store, out: &mut Vec<Finding>) -> Result<(), StoreError> {
    for (key, value) in records(store, JSONSCHEMA_PREFIX)? {
        let name = String::from_utf8_lossy(&key[JSONSCHEMA_PREFIX.len()..]).into_owned();
        let Err(e) = Baseline::decode(&name, &value) else {
            continue;
        };
        let f = Finding::new(&key, "schema_baseline", Some(value.clone()), e.to_string());
        let newest = records(store, &history_prefix(&name))?.pop();
        match newest {
            Some((hk, hv))
                if Baseline::decode(&name, &hv).is_ok() && key == baseline_key(&name) =>
            {
                out.push(
                    f.rewrite(
                        hv.clone(),
                        format!(
                            "rewrite it from `{}`, the newest version of its schema history",
                            escape_key(&hk)
                        ),
                    )
                    .depends_on(&hk, Some(hv)),
                );
            }
            _ => out.push(f.manual(
                "no readable schema-history version to restore it from: restore it from a backup",
            )),
        }
    }
    Ok(())
}
