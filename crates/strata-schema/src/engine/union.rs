//! Unions (`anyOf`/`oneOf`) and `allOf`: matching branches between the two schemas.

use serde_json::Value;

use crate::delta::ChangeKind;
use crate::view::{build_view, fingerprint, View};

use super::{similarity, suffix_path, union_branches, Engine};

impl Engine<'_> {
    pub(super) fn compare_union(&mut self, path: &str, vo: &View<'_>, vn: &View<'_>) {
        let kind_o = vo.union.as_ref().map(|(k, _)| *k);
        let kind_n = vn.union.as_ref().map(|(k, _)| *k);
        let Some(kind_any) = kind_n.or(kind_o) else {
            return;
        };
        let kw_o = kind_o.unwrap_or(kind_any).keyword();
        let kw_n = kind_n.unwrap_or(kind_any).keyword();
        // A non-union side takes part as a single branch.
        let wrapped_o = vo.union.is_none().then(|| vo.as_schema());
        let wrapped_n = vn.union.is_none().then(|| vn.as_schema());
        let bo = union_branches(vo, &wrapped_o);
        let bn = union_branches(vn, &wrapped_n);
        self.compare_branch_lists(
            path,
            (&bo, kw_o),
            (&bn, kw_n),
            |index| (ChangeKind::UnionBranchRemoved { index }, false, true),
            |index| (ChangeKind::UnionBranchAdded { index }, true, false),
        );
        if let (Some(o), Some(n)) = (kind_o, kind_n) {
            if o != n {
                // oneOf → anyOf accepts more (exclusivity dropped); anyOf → oneOf fewer.
                let widening = n.keyword() == "anyOf";
                self.emit(
                    path,
                    ChangeKind::UnionKindChanged {
                        from: o.keyword().into(),
                        to: n.keyword().into(),
                    },
                    widening,
                    !widening,
                );
            }
        }
    }

    pub(super) fn compare_all_of<'b>(&mut self, path: &str, vo: &'b View<'_>, vn: &'b View<'_>) {
        let list = |v: &'b View<'_>| -> Vec<(usize, &'b Value)> {
            match v.map.get("allOf") {
                Some(Value::Array(items)) => items.iter().enumerate().collect(),
                _ => Vec::new(),
            }
        };
        let bo = list(vo);
        let bn = list(vn);
        if bo.is_empty() && bn.is_empty() {
            return;
        }
        self.compare_branch_lists(
            path,
            (&bo, "allOf"),
            (&bn, "allOf"),
            |index| (ChangeKind::AllOfBranchRemoved { index }, true, false),
            |index| (ChangeKind::AllOfBranchAdded { index }, false, true),
        );
    }

    /// Pairs the old branches of a union or `allOf` with the new ones, recurses into
    /// paired branches that are not identical, and reports the unpaired ones with the
    /// change kinds (and backward/forward verdicts) `removed` and `added` give.
    pub(super) fn compare_branch_lists(
        &mut self,
        path: &str,
        (bo, kw_o): (&[(usize, &Value)], &str),
        (bn, kw_n): (&[(usize, &Value)], &str),
        removed: impl Fn(usize) -> (ChangeKind, bool, bool),
        added: impl Fn(usize) -> (ChangeKind, bool, bool),
    ) {
        let pairs = self.match_branches(bo, bn);
        let mut used_new = vec![false; bn.len()];
        for (i, (oi, ob)) in bo.iter().enumerate() {
            match pairs.get(i).copied().flatten() {
                Some((j, exact)) => {
                    if let Some(flag) = used_new.get_mut(j) {
                        *flag = true;
                    }
                    if !exact {
                        if let Some((nj, nb)) = bn.get(j) {
                            let p = suffix_path(path, &format!("|{kw_n}[{nj}]"));
                            self.compare(&p, ob, nb);
                        }
                    }
                }
                None => {
                    let p = suffix_path(path, &format!("|{kw_o}[{oi}]"));
                    let (change, backward, forward) = removed(*oi);
                    self.emit(&p, change, backward, forward);
                }
            }
        }
        for (j, (nj, _)) in bn.iter().enumerate() {
            if !used_new.get(j).copied().unwrap_or(true) {
                let p = suffix_path(path, &format!("|{kw_n}[{nj}]"));
                let (change, backward, forward) = added(*nj);
                self.emit(&p, change, backward, forward);
            }
        }
    }

    /// Pairs old branches with new ones: identical shapes first, then the most similar
    /// (same `$ref` name, same types, shared property names). `(new position, exact)`.
    pub(super) fn match_branches(
        &mut self,
        old: &[(usize, &Value)],
        new: &[(usize, &Value)],
    ) -> Vec<Option<(usize, bool)>> {
        let fo: Vec<Vec<u8>> = old
            .iter()
            .map(|(_, b)| fingerprint(self.old_root, b, &mut self.old_prints))
            .collect();
        let fnew: Vec<Vec<u8>> = new
            .iter()
            .map(|(_, b)| fingerprint(self.new_root, b, &mut self.new_prints))
            .collect();
        let mut pairs: Vec<Option<(usize, bool)>> = vec![None; old.len()];
        let mut used = vec![false; new.len()];
        for (i, f) in fo.iter().enumerate() {
            if let Some(j) = (0..new.len()).find(|&j| !used[j] && fnew.get(j) == Some(f)) {
                used[j] = true;
                pairs[i] = Some((j, true));
            }
        }
        let vo: Vec<View> = old
            .iter()
            .map(|(_, b)| build_view(self.old_root, b))
            .collect();
        let vn: Vec<View> = new
            .iter()
            .map(|(_, b)| build_view(self.new_root, b))
            .collect();
        for i in 0..old.len() {
            if pairs[i].is_some() {
                continue;
            }
            let mut best: Option<(usize, u32)> = None;
            for j in 0..new.len() {
                if used[j] {
                    continue;
                }
                let s = similarity(&vo[i], &vn[j]);
                if s >= 4 && best.is_none_or(|(_, bs)| s > bs) {
                    best = Some((j, s));
                }
            }
            if let Some((j, _)) = best {
                used[j] = true;
                pairs[i] = Some((j, false));
            }
        }
        pairs
    }
}
