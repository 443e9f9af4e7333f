//! Schemas derived with schemars from two versions of real Rust types.

#![allow(dead_code)]

use schemars::{schema_for, JsonSchema};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use strata_schema::{diff, ChangeKind, DeltaKind, FieldChange, PersistedSchema};

use crate::change_summary;

mod v1 {
    use super::*;

    #[derive(Serialize, Deserialize, JsonSchema)]
    pub struct Address {
        pub street: String,
        pub zip: Option<u32>,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    pub struct Line {
        pub sku: String,
        pub qty: u8,
    }

    /// Invoice status.
    #[derive(Serialize, Deserialize, JsonSchema)]
    pub enum Status {
        /// Still open.
        Open,
        /// Paid.
        Closed,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    pub struct Invoice {
        pub id: String,
        pub amount: u32,
        pub address: Address,
        pub billing: Address,
        pub lines: Vec<Line>,
        pub status: Status,
        pub note: Option<String>,
    }
}

mod v2 {
    use super::*;

    #[derive(Serialize, Deserialize, JsonSchema)]
    pub struct Address {
        pub street: String,
        pub zip: Option<u32>,
        /// New, optional.
        pub city: Option<String>,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    pub struct Line {
        pub sku: String,
        pub qty: u16,
    }

    /// Invoice status.
    #[derive(Serialize, Deserialize, JsonSchema)]
    pub enum Status {
        /// Still open.
        Open,
        /// Paid.
        Closed,
        /// Cancelled.
        Void,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    pub struct Invoice {
        pub id: String,
        pub amount: u64,
        pub address: Address,
        pub billing: Option<Address>,
        pub lines: Vec<Line>,
        pub status: Status,
        pub note: Option<String>,
        pub tags: Option<Vec<String>>,
    }
}

fn schema<T: JsonSchema>() -> Value {
    serde_json::to_value(schema_for!(T)).unwrap()
}

#[test]
fn derived_schema_is_stable_and_persistable() {
    let a = schema::<v1::Invoice>();
    let b = schema::<v1::Invoice>();
    let d = diff("invoices", &a, &b).unwrap();
    assert_eq!(d.kind, DeltaKind::None);
    let p = PersistedSchema::new(&a);
    let back = PersistedSchema::from_bytes("invoices", &p.to_bytes()).unwrap();
    assert_eq!(
        diff("invoices", &back.schema, &b).unwrap().kind,
        DeltaKind::None
    );
}

#[test]
fn derived_v1_to_v2_reports_every_nested_change() {
    let d = diff(
        "invoices",
        &schema::<v1::Invoice>(),
        &schema::<v2::Invoice>(),
    )
    .unwrap();
    assert_eq!(d.kind, DeltaKind::NonAdditive);
    assert_eq!(d.added, vec!["tags"]);
    assert!(d.removed.is_empty());
    let field = |f: &str, req: bool, shape: bool| FieldChange {
        field: f.into(),
        required_changed: req,
        shape_changed: shape,
    };
    assert_eq!(
        d.changed,
        vec![
            field("address", false, true),
            field("amount", false, true),
            field("billing", true, true),
            field("lines", false, true),
            field("status", false, true),
        ]
    );
    assert_eq!(
        change_summary(&d),
        vec![
            "/address/city property_added",
            "/amount constraint_loosened", // format uint32 -> uint64
            "/billing null_allowed",       // Address -> Option<Address> (anyOf form)
            "/billing required_removed",
            "/billing/city property_added",
            "/lines[]/qty constraint_loosened", // format uint8 -> uint16
            "/lines[]/qty constraint_loosened", // maximum 255 -> 65535
            "/status enum_values_added",        // documented enum: oneOf of consts
            "/tags property_added",
        ]
    );
    let status = d.paths.iter().find(|p| p.path == "/status").unwrap();
    assert_eq!(
        status.change,
        ChangeKind::EnumValuesAdded {
            values: vec![Value::from("Void")]
        }
    );
    // Every change widens: new code reads old records, old code may not read new ones.
    assert!(d.compatibility.backward);
    assert!(!d.compatibility.forward);
    assert!(d.renames.is_empty() && d.ambiguous_renames.is_empty());
}

#[test]
fn derived_v2_to_v1_is_the_mirror_image() {
    let d = diff(
        "invoices",
        &schema::<v2::Invoice>(),
        &schema::<v1::Invoice>(),
    )
    .unwrap();
    assert_eq!(d.kind, DeltaKind::NonAdditive);
    assert_eq!(d.removed, vec!["tags"]);
    assert!(!d.compatibility.backward);
    assert!(d.compatibility.forward);
}

mod add {
    use super::*;

    #[derive(Serialize, Deserialize, JsonSchema)]
    pub struct Before {
        pub id: String,
        pub amount: f64,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    pub struct After {
        pub id: String,
        pub amount: f64,
        pub memo: Option<String>,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct StrictBefore {
        pub id: String,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct StrictAfter {
        pub id: String,
        pub memo: Option<String>,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    pub struct Renamed {
        pub id: String,
        pub total: f64,
    }
}

#[test]
fn derived_new_option_field_is_additive_and_fully_compatible() {
    let d = diff(
        "invoices",
        &schema::<add::Before>(),
        &schema::<add::After>(),
    )
    .unwrap();
    assert_eq!(d.kind, DeltaKind::Additive);
    assert_eq!(d.added, vec!["memo"]);
    assert!(d.compatibility.backward && d.compatibility.forward);
}

#[test]
fn derived_deny_unknown_fields_makes_additions_break_forward() {
    let d = diff(
        "invoices",
        &schema::<add::StrictBefore>(),
        &schema::<add::StrictAfter>(),
    )
    .unwrap();
    assert_eq!(d.kind, DeltaKind::Additive);
    assert!(d.compatibility.backward);
    assert!(!d.compatibility.forward);
    assert!(d.compatibility.reasons[0].contains("not forward compatible: /memo"));
}

#[test]
fn derived_field_rename_is_a_candidate() {
    let d = diff(
        "invoices",
        &schema::<add::Before>(),
        &schema::<add::Renamed>(),
    )
    .unwrap();
    assert_eq!(d.kind, DeltaKind::NonAdditive);
    assert_eq!(d.renames.len(), 1);
    assert_eq!(
        (d.renames[0].from.as_str(), d.renames[0].to.as_str()),
        ("amount", "total")
    );
    assert!(!d.compatibility.backward && !d.compatibility.forward);
}

mod data_enum {
    use super::*;

    pub mod a {
        use super::*;
        #[derive(Serialize, Deserialize, JsonSchema)]
        pub enum Payment {
            Cash,
            Card { last4: String },
        }
        #[derive(Serialize, Deserialize, JsonSchema)]
        pub struct Order {
            pub payment: Payment,
        }
    }

    pub mod b {
        use super::*;
        #[derive(Serialize, Deserialize, JsonSchema)]
        pub enum Payment {
            Cash,
            Card { last4: String, network: String },
            Voucher(u32),
        }
        #[derive(Serialize, Deserialize, JsonSchema)]
        pub struct Order {
            pub payment: Payment,
        }
    }
}

#[test]
fn derived_data_enum_changes_are_located_in_their_branch() {
    let d = diff(
        "orders",
        &schema::<data_enum::a::Order>(),
        &schema::<data_enum::b::Order>(),
    )
    .unwrap();
    assert_eq!(d.kind, DeltaKind::NonAdditive);
    let got = change_summary(&d);
    assert!(
        got.contains(&"/payment|oneOf[1]/Card/network property_added".to_string()),
        "{got:?}"
    );
    assert!(
        got.contains(&"/payment|oneOf[2] union_branch_added".to_string()),
        "{got:?}"
    );
    assert_eq!(got.len(), 2, "{got:?}");
    // A new required field inside a variant breaks backward; a new variant breaks forward.
    assert!(!d.compatibility.backward && !d.compatibility.forward);
}

mod recursive {
    use super::*;

    pub mod a {
        use super::*;
        #[derive(Serialize, Deserialize, JsonSchema)]
        pub struct Tree {
            pub label: String,
            pub children: Vec<Tree>,
        }
    }

    pub mod b {
        use super::*;
        #[derive(Serialize, Deserialize, JsonSchema)]
        pub struct Tree {
            pub label: String,
            pub weight: Option<f32>,
            pub children: Vec<Tree>,
        }
    }
}

#[test]
fn derived_recursive_types_terminate() {
    let a = schema::<recursive::a::Tree>();
    let b = schema::<recursive::b::Tree>();
    assert_eq!(diff("trees", &a, &a).unwrap().kind, DeltaKind::None);
    let d = diff("trees", &a, &b).unwrap();
    assert_eq!(d.kind, DeltaKind::Additive);
    assert_eq!(d.added, vec!["weight"]);
    // Re-entering the same pair of nodes through `children` repeats the same change, so
    // recursion is cut there: the delta is exactly the top-level addition.
    assert_eq!(change_summary(&d), vec!["/weight property_added"]);
    assert!(d.compatibility.backward && d.compatibility.forward);
}
