//! Per-keyword comparisons: types, enums, numeric and string constraints, formats and
//! keywords the engine does not interpret.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::canonical::canonical_bytes;
use crate::delta::ChangeKind;
use crate::view::{is_annotation, is_interpreted, View};

use super::{format_range, is_integral, type_accepts, Dir, Engine, Verdict};

impl Engine<'_> {
    pub(super) fn compare_types(&mut self, path: &str, vo: &View, vn: &View, union_level: bool) {
        let mut covered_null = false;
        if !union_level {
            let list = |s: &BTreeSet<String>| Some(s.iter().cloned().collect::<Vec<_>>());
            match (&vo.types, &vn.types) {
                (None, None) => {}
                (None, Some(n)) => {
                    covered_null = true;
                    self.emit(
                        path,
                        ChangeKind::TypeNarrowed {
                            from: None,
                            to: list(n),
                        },
                        false,
                        true,
                    );
                }
                (Some(o), None) => {
                    covered_null = true;
                    self.emit(
                        path,
                        ChangeKind::TypeWidened {
                            from: list(o),
                            to: None,
                        },
                        true,
                        false,
                    );
                }
                (Some(o), Some(n)) => {
                    let new_reads_old = o.iter().all(|t| type_accepts(n, t));
                    let old_reads_new = n.iter().all(|t| type_accepts(o, t));
                    let (from, to) = (list(o), list(n));
                    match (new_reads_old, old_reads_new) {
                        (true, true) => {}
                        (true, false) => {
                            self.emit(path, ChangeKind::TypeWidened { from, to }, true, false)
                        }
                        (false, true) => {
                            self.emit(path, ChangeKind::TypeNarrowed { from, to }, false, true)
                        }
                        (false, false) => {
                            self.emit(path, ChangeKind::TypeChanged { from, to }, false, false)
                        }
                    }
                }
            }
        }
        if vo.null != vn.null && !covered_null {
            if vn.null {
                self.emit(path, ChangeKind::NullAllowed, true, false);
            } else {
                self.emit(path, ChangeKind::NullDisallowed, false, true);
            }
        }
    }

    pub(super) fn compare_enum(&mut self, path: &str, vo: &View, vn: &View) {
        match (&vo.enum_values, &vn.enum_values) {
            (None, None) => {}
            (None, Some(n)) => self.emit(
                path,
                ChangeKind::EnumConstraintAdded { values: n.clone() },
                false,
                true,
            ),
            (Some(o), None) => self.emit(
                path,
                ChangeKind::EnumConstraintRemoved { values: o.clone() },
                true,
                false,
            ),
            (Some(o), Some(n)) => {
                let ok: BTreeSet<Vec<u8>> = o.iter().map(canonical_bytes).collect();
                let nk: BTreeSet<Vec<u8>> = n.iter().map(canonical_bytes).collect();
                let added: Vec<Value> = n
                    .iter()
                    .filter(|v| !ok.contains(&canonical_bytes(v)))
                    .cloned()
                    .collect();
                let removed: Vec<Value> = o
                    .iter()
                    .filter(|v| !nk.contains(&canonical_bytes(v)))
                    .cloned()
                    .collect();
                if !added.is_empty() {
                    self.emit(
                        path,
                        ChangeKind::EnumValuesAdded { values: added },
                        true,
                        false,
                    );
                }
                if !removed.is_empty() {
                    self.emit(
                        path,
                        ChangeKind::EnumValuesRemoved { values: removed },
                        false,
                        true,
                    );
                }
            }
        }
    }

    pub(super) fn constraint(
        &mut self,
        path: &str,
        keyword: &str,
        vo: &View,
        vn: &View,
        verdict: Verdict,
    ) {
        if matches!(verdict, Verdict::Same) {
            return;
        }
        let old = vo.map.get(keyword).cloned();
        let new = vn.map.get(keyword).cloned();
        let keyword = keyword.to_string();
        match verdict {
            Verdict::Same => {}
            Verdict::Tightened => self.emit(
                path,
                ChangeKind::ConstraintTightened { keyword, old, new },
                false,
                true,
            ),
            Verdict::Loosened => self.emit(
                path,
                ChangeKind::ConstraintLoosened { keyword, old, new },
                true,
                false,
            ),
            Verdict::Changed => self.emit(
                path,
                ChangeKind::ConstraintChanged { keyword, old, new },
                false,
                false,
            ),
        }
    }

    pub(super) fn bound(&mut self, path: &str, keyword: &str, vo: &View, vn: &View, dir: Dir) {
        let verdict = match (vo.map.get(keyword), vn.map.get(keyword)) {
            (None, None) => Verdict::Same,
            (None, Some(_)) => Verdict::Tightened,
            (Some(_), None) => Verdict::Loosened,
            (Some(a), Some(b)) => match (a.as_f64(), b.as_f64()) {
                (Some(x), Some(y)) if x == y => Verdict::Same,
                (Some(x), Some(y)) => {
                    let tighter = match dir {
                        Dir::Upper => y < x,
                        Dir::Lower => y > x,
                    };
                    if tighter {
                        Verdict::Tightened
                    } else {
                        Verdict::Loosened
                    }
                }
                // Draft-04 boolean exclusive bounds and other oddities.
                _ if a == b => Verdict::Same,
                _ => Verdict::Changed,
            },
        };
        self.constraint(path, keyword, vo, vn, verdict);
    }

    pub(super) fn multiple_of(&mut self, path: &str, vo: &View, vn: &View) {
        let verdict = match (vo.map.get("multipleOf"), vn.map.get("multipleOf")) {
            (None, None) => Verdict::Same,
            (None, Some(_)) => Verdict::Tightened,
            (Some(_), None) => Verdict::Loosened,
            (Some(a), Some(b)) => match (a.as_f64(), b.as_f64()) {
                (Some(x), Some(y)) if x == y => Verdict::Same,
                // Every multiple of x is a multiple of y when y divides x.
                (Some(x), Some(y)) if y != 0.0 && is_integral(x / y) => Verdict::Loosened,
                (Some(x), Some(y)) if x != 0.0 && is_integral(y / x) => Verdict::Tightened,
                _ => Verdict::Changed,
            },
        };
        self.constraint(path, "multipleOf", vo, vn, verdict);
    }

    pub(super) fn pattern(&mut self, path: &str, vo: &View, vn: &View) {
        let verdict = match (vo.map.get("pattern"), vn.map.get("pattern")) {
            (None, None) => Verdict::Same,
            (None, Some(_)) => Verdict::Tightened,
            (Some(_), None) => Verdict::Loosened,
            (Some(a), Some(b)) if a == b => Verdict::Same,
            _ => Verdict::Changed,
        };
        self.constraint(path, "pattern", vo, vn, verdict);
    }

    pub(super) fn format(&mut self, path: &str, vo: &View, vn: &View) {
        let fo = vo.map.get("format");
        let fnew = vn.map.get("format");
        let verdict = match (fo, fnew) {
            (None, None) => Verdict::Same,
            (Some(a), Some(b)) if a == b => Verdict::Same,
            (None, Some(_)) => Verdict::Tightened,
            (Some(_), None) => Verdict::Loosened,
            (Some(a), Some(b)) => {
                match (
                    a.as_str().and_then(format_range),
                    b.as_str().and_then(format_range),
                ) {
                    (Some((lo_a, hi_a)), Some((lo_b, hi_b))) => {
                        if lo_b <= lo_a && hi_b >= hi_a {
                            Verdict::Loosened
                        } else if lo_b >= lo_a && hi_b <= hi_a {
                            Verdict::Tightened
                        } else {
                            Verdict::Changed
                        }
                    }
                    _ => match (a.as_str(), b.as_str()) {
                        (Some("float"), Some("double")) => Verdict::Loosened,
                        (Some("double"), Some("float")) => Verdict::Tightened,
                        _ => Verdict::Changed,
                    },
                }
            }
        };
        self.constraint(path, "format", vo, vn, verdict);
    }

    pub(super) fn opaque_keywords(&mut self, path: &str, vo: &View, vn: &View) {
        let only_new = vn.map.keys().filter(|k| !vo.map.contains_key(k.as_str()));
        for k in vo.map.keys().chain(only_new) {
            if is_annotation(k) || is_interpreted(k) {
                continue;
            }
            let a = vo.map.get(k.as_str()).map(canonical_bytes);
            let b = vn.map.get(k.as_str()).map(canonical_bytes);
            if a != b {
                self.emit(
                    path,
                    ChangeKind::KeywordChanged { keyword: k.clone() },
                    false,
                    false,
                );
            }
        }
    }
}
