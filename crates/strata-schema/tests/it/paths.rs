//! Table-driven path-level cases: each row gives old and new schemas, the expected seed
//! kind, the expected backward/forward verdict and the exact set of `<path> <change>`s.

use serde_json::{json, Value};
use strata_schema::{diff_with, DeltaKind, DiffOptions, OpenContentPolicy};

use crate::change_summary;

use DeltaKind::{Additive as ADD, NonAdditive as NON, None as NONE};

struct Case {
    name: &'static str,
    old: Value,
    new: Value,
    kind: DeltaKind,
    backward: bool,
    forward: bool,
    changes: &'static [&'static str],
    strict: bool,
}

fn case(
    name: &'static str,
    old: Value,
    new: Value,
    kind: DeltaKind,
    backward: bool,
    forward: bool,
    changes: &'static [&'static str],
) -> Case {
    Case {
        name,
        old,
        new,
        kind,
        backward,
        forward,
        changes,
        strict: false,
    }
}

/// A root object with a single optional property `x`.
fn x(schema: Value) -> Value {
    json!({"type": "object", "properties": {"x": schema}})
}

/// A root object with a single optional property `x` and `$defs`.
fn xd(schema: Value, defs: Value) -> Value {
    json!({"type": "object", "properties": {"x": schema}, "$defs": defs})
}

fn obj(props: Value) -> Value {
    json!({"type": "object", "properties": props})
}

fn closed(props: Value) -> Value {
    json!({"type": "object", "properties": props, "additionalProperties": false})
}

fn cases() -> Vec<Case> {
    let addr_v1 = json!({"Address": {"type": "object", "properties": {
        "street": {"type": "string"}, "zip": {"type": "integer"}}, "required": ["street"]}});
    let addr_v2 = json!({"Address": {"type": "object", "properties": {
        "street": {"type": "string"}, "zip": {"type": "string"}}, "required": ["street"]}});
    let tree = |label: Value| {
        json!({"type": "object", "properties": {"root": {"$ref": "#/$defs/Node"}},
            "$defs": {"Node": {"type": "object", "properties": {
                "label": label,
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}}})
    };
    vec![
        // --- no change ---
        case(
            "identical",
            x(json!({"type": "string"})),
            x(json!({"type": "string"})),
            NONE,
            true,
            true,
            &[],
        ),
        case(
            "annotation only",
            x(json!({"type": "string"})),
            x(json!({"type": "string", "description": "d", "title": "t", "examples": ["e"]})),
            NONE,
            true,
            true,
            &[],
        ),
        case(
            "key order only",
            x(json!({"type": "integer", "minimum": 0, "maximum": 9})),
            x(json!({"maximum": 9, "type": "integer", "minimum": 0})),
            NONE,
            true,
            true,
            &[],
        ),
        case(
            "both nullable spellings are equal",
            x(json!({"anyOf": [{"type": "string"}, {"type": "null"}]})),
            x(json!({"type": ["string", "null"]})),
            NONE,
            true,
            true,
            &[],
        ),
        case(
            "integer|number equals number",
            x(json!({"type": ["integer", "number"]})),
            x(json!({"type": "number"})),
            NONE,
            true,
            true,
            &[],
        ),
        case(
            "recursive type unchanged",
            tree(json!({"type": "string"})),
            tree(json!({"type": "string"})),
            NONE,
            true,
            true,
            &[],
        ),
        // --- types ---
        case(
            "integer to number widens",
            x(json!({"type": "integer"})),
            x(json!({"type": "number"})),
            NON,
            true,
            false,
            &["/x type_widened"],
        ),
        case(
            "number to integer narrows",
            x(json!({"type": "number"})),
            x(json!({"type": "integer"})),
            NON,
            false,
            true,
            &["/x type_narrowed"],
        ),
        case(
            "string to integer changes",
            x(json!({"type": "string"})),
            x(json!({"type": "integer"})),
            NON,
            false,
            false,
            &["/x type_changed"],
        ),
        case(
            "type added to list widens",
            x(json!({"type": "string"})),
            x(json!({"type": ["string", "integer"]})),
            NON,
            true,
            false,
            &["/x type_widened"],
        ),
        case(
            "any to string narrows",
            x(json!(true)),
            x(json!({"type": "string"})),
            NON,
            false,
            true,
            &["/x type_narrowed"],
        ),
        case(
            "string to object is one change, no cascade",
            x(json!({"type": "string", "maxLength": 3})),
            x(
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}),
            ),
            NON,
            false,
            false,
            &["/x type_changed"],
        ),
        // --- nullability ---
        case(
            "null allowed via type list",
            x(json!({"type": "string"})),
            x(json!({"type": ["string", "null"]})),
            NON,
            true,
            false,
            &["/x null_allowed"],
        ),
        case(
            "null disallowed",
            x(json!({"type": ["integer", "null"]})),
            x(json!({"type": "integer"})),
            NON,
            false,
            true,
            &["/x null_disallowed"],
        ),
        case(
            "null allowed via anyOf ref",
            xd(json!({"$ref": "#/$defs/Address"}), addr_v1.clone()),
            xd(
                json!({"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}]}),
                addr_v1.clone(),
            ),
            NON,
            true,
            false,
            &["/x null_allowed"],
        ),
        case(
            "nullable ref with nested change",
            xd(
                json!({"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}]}),
                addr_v1.clone(),
            ),
            xd(
                json!({"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}]}),
                addr_v2.clone(),
            ),
            NON,
            false,
            false,
            &["/x/zip type_changed"],
        ),
        // --- enums ---
        case(
            "enum value added",
            x(json!({"type": "string", "enum": ["a", "b"]})),
            x(json!({"type": "string", "enum": ["a", "b", "c"]})),
            NON,
            true,
            false,
            &["/x enum_values_added"],
        ),
        case(
            "enum value removed",
            x(json!({"type": "string", "enum": ["a", "b"]})),
            x(json!({"type": "string", "enum": ["a"]})),
            NON,
            false,
            true,
            &["/x enum_values_removed"],
        ),
        case(
            "enum value swapped",
            x(json!({"enum": ["a", "b"]})),
            x(json!({"enum": ["a", "c"]})),
            NON,
            false,
            false,
            &["/x enum_values_added", "/x enum_values_removed"],
        ),
        case(
            "enum order only",
            x(json!({"enum": ["b", "a"]})),
            x(json!({"enum": ["a", "b"]})),
            NONE,
            true,
            true,
            &[],
        ),
        case(
            "documented unit enum gains a variant",
            x(json!({"oneOf": [
                {"type": "string", "const": "Open", "description": "o"}, {"type": "string", "const": "Closed"}]})),
            x(
                json!({"oneOf": [{"type": "string", "const": "Open"}, {"type": "string", "const": "Closed"},
                {"type": "string", "const": "Void"}]}),
            ),
            NON,
            true,
            false,
            &["/x enum_values_added"],
        ),
        case(
            "enum restriction added",
            x(json!({"type": "string"})),
            x(json!({"type": "string", "enum": ["a"]})),
            NON,
            false,
            true,
            &["/x enum_constraint_added"],
        ),
        case(
            "const relaxed to type",
            x(json!({"const": "v1"})),
            x(json!({"type": "string"})),
            NON,
            true,
            false,
            &["/x enum_constraint_removed"],
        ),
        // --- string / number bounds ---
        case(
            "maxLength lowered",
            x(json!({"type": "string", "maxLength": 10})),
            x(json!({"type": "string", "maxLength": 5})),
            NON,
            false,
            true,
            &["/x constraint_tightened"],
        ),
        case(
            "maxLength raised",
            x(json!({"type": "string", "maxLength": 5})),
            x(json!({"type": "string", "maxLength": 10})),
            NON,
            true,
            false,
            &["/x constraint_loosened"],
        ),
        case(
            "maxLength added",
            x(json!({"type": "string"})),
            x(json!({"type": "string", "maxLength": 5})),
            NON,
            false,
            true,
            &["/x constraint_tightened"],
        ),
        case(
            "minLength removed",
            x(json!({"type": "string", "minLength": 1})),
            x(json!({"type": "string"})),
            NON,
            true,
            false,
            &["/x constraint_loosened"],
        ),
        case(
            "minimum raised",
            x(json!({"type": "integer", "minimum": 0})),
            x(json!({"type": "integer", "minimum": 1})),
            NON,
            false,
            true,
            &["/x constraint_tightened"],
        ),
        case(
            "minimum lowered",
            x(json!({"type": "integer", "minimum": 1})),
            x(json!({"type": "integer", "minimum": 0})),
            NON,
            true,
            false,
            &["/x constraint_loosened"],
        ),
        case(
            "maximum lowered",
            x(json!({"type": "number", "maximum": 100})),
            x(json!({"type": "number", "maximum": 99.5})),
            NON,
            false,
            true,
            &["/x constraint_tightened"],
        ),
        case(
            "exclusiveMaximum added",
            x(json!({"type": "number"})),
            x(json!({"type": "number", "exclusiveMaximum": 1})),
            NON,
            false,
            true,
            &["/x constraint_tightened"],
        ),
        case(
            "pattern added",
            x(json!({"type": "string"})),
            x(json!({"type": "string", "pattern": "^a"})),
            NON,
            false,
            true,
            &["/x constraint_tightened"],
        ),
        case(
            "pattern rewritten",
            x(json!({"type": "string", "pattern": "^a"})),
            x(json!({"type": "string", "pattern": "^b"})),
            NON,
            false,
            false,
            &["/x constraint_changed"],
        ),
        case(
            "multipleOf 2 to 4 tightens",
            x(json!({"type": "integer", "multipleOf": 2})),
            x(json!({"type": "integer", "multipleOf": 4})),
            NON,
            false,
            true,
            &["/x constraint_tightened"],
        ),
        case(
            "multipleOf 4 to 2 loosens",
            x(json!({"type": "integer", "multipleOf": 4})),
            x(json!({"type": "integer", "multipleOf": 2})),
            NON,
            true,
            false,
            &["/x constraint_loosened"],
        ),
        case(
            "multipleOf 2 to 3 changes",
            x(json!({"type": "integer", "multipleOf": 2})),
            x(json!({"type": "integer", "multipleOf": 3})),
            NON,
            false,
            false,
            &["/x constraint_changed"],
        ),
        case(
            "u8 to u16 loosens format and maximum",
            x(json!({"type": "integer", "format": "uint8", "minimum": 0, "maximum": 255})),
            x(json!({"type": "integer", "format": "uint16", "minimum": 0, "maximum": 65535})),
            NON,
            true,
            false,
            &["/x constraint_loosened", "/x constraint_loosened"],
        ),
        case(
            "i64 to i32 tightens format",
            x(json!({"type": "integer", "format": "int64"})),
            x(json!({"type": "integer", "format": "int32"})),
            NON,
            false,
            true,
            &["/x constraint_tightened"],
        ),
        case(
            "u32 to i32 formats are incomparable",
            x(json!({"type": "integer", "format": "uint32"})),
            x(json!({"type": "integer", "format": "int32"})),
            NON,
            false,
            false,
            &["/x constraint_changed"],
        ),
        case(
            "f32 to f64 loosens",
            x(json!({"type": "number", "format": "float"})),
            x(json!({"type": "number", "format": "double"})),
            NON,
            true,
            false,
            &["/x constraint_loosened"],
        ),
        // --- nested objects and $ref ---
        case(
            "nested type narrowed",
            x(json!({"type": "object", "properties": {"zip": {"type": ["string", "integer"]}}})),
            x(json!({"type": "object", "properties": {"zip": {"type": "string"}}})),
            NON,
            false,
            true,
            &["/x/zip type_narrowed"],
        ),
        case(
            "nested optional added to open model",
            x(obj(json!({"a": {"type": "string"}}))),
            x(obj(
                json!({"a": {"type": "string"}, "b": {"type": "integer"}}),
            )),
            NON,
            true,
            true,
            &["/x/b property_added"],
        ),
        case(
            "nested optional added to closed model",
            x(closed(json!({"a": {"type": "string"}}))),
            x(closed(
                json!({"a": {"type": "string"}, "b": {"type": "integer"}}),
            )),
            NON,
            true,
            false,
            &["/x/b property_added"],
        ),
        case(
            "nested required added",
            x(obj(json!({"a": {"type": "string"}}))),
            x(
                json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["b"]}),
            ),
            NON,
            false,
            true,
            &["/x/b property_added"],
        ),
        case(
            "nested optional removed from open model",
            x(obj(
                json!({"a": {"type": "string"}, "b": {"type": "integer"}}),
            )),
            x(obj(json!({"a": {"type": "string"}}))),
            NON,
            true,
            true,
            &["/x/b property_removed"],
        ),
        case(
            "nested optional removed from closed model",
            x(closed(
                json!({"a": {"type": "string"}, "b": {"type": "integer"}}),
            )),
            x(closed(json!({"a": {"type": "string"}}))),
            NON,
            false,
            true,
            &["/x/b property_removed"],
        ),
        case(
            "nested required removed from open model",
            x(
                json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["b"]}),
            ),
            x(obj(json!({"a": {"type": "string"}}))),
            NON,
            true,
            false,
            &["/x/b property_removed"],
        ),
        case(
            "nested made optional",
            x(
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}),
            ),
            x(obj(json!({"a": {"type": "string"}}))),
            NON,
            true,
            false,
            &["/x/a required_removed"],
        ),
        case(
            "change inside $defs reached through $ref",
            xd(json!({"$ref": "#/$defs/Address"}), addr_v1.clone()),
            xd(json!({"$ref": "#/$defs/Address"}), addr_v2.clone()),
            NON,
            false,
            false,
            &["/x/zip type_changed"],
        ),
        case(
            "inlined vs $ref of the same shape",
            xd(json!({"$ref": "#/$defs/Address"}), addr_v1.clone()),
            x(addr_v1["Address"].clone()),
            NONE,
            true,
            true,
            &[],
        ),
        case(
            "legacy definitions keyword",
            json!({"type": "object", "properties": {"x": {"$ref": "#/definitions/N"}},
                "definitions": {"N": {"type": "integer"}}}),
            json!({"type": "object", "properties": {"x": {"$ref": "#/definitions/N"}},
                "definitions": {"N": {"type": "number"}}}),
            NON,
            true,
            false,
            &["/x type_widened"],
        ),
        case(
            "mutually recursive definitions terminate",
            json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {
                "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}, "n": {"type": "integer"}}},
                "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}}}),
            json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {
                "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}, "n": {"type": "number"}}},
                "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}}}),
            NON,
            true,
            false,
            &["/a/n type_widened"],
        ),
        case(
            "recursive type changed deep inside",
            tree(json!({"type": "string"})),
            tree(json!({"type": "integer"})),
            NON,
            false,
            false,
            &["/root/label type_changed"],
        ),
        // --- arrays ---
        case(
            "items widened",
            x(json!({"type": "array", "items": {"type": "integer"}})),
            x(json!({"type": "array", "items": {"type": "number"}})),
            NON,
            true,
            false,
            &["/x[] type_widened"],
        ),
        case(
            "item object gains a required field",
            x(json!({"type": "array", "items": obj(json!({"sku": {"type": "string"}}))})),
            x(
                json!({"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}, "required": ["qty"]}}),
            ),
            NON,
            false,
            true,
            &["/x[]/qty property_added"],
        ),
        case(
            "maxItems lowered",
            x(json!({"type": "array", "maxItems": 10})),
            x(json!({"type": "array", "maxItems": 3})),
            NON,
            false,
            true,
            &["/x constraint_tightened"],
        ),
        case(
            "minItems raised",
            x(json!({"type": "array", "minItems": 0})),
            x(json!({"type": "array", "minItems": 1})),
            NON,
            false,
            true,
            &["/x constraint_tightened"],
        ),
        case(
            "uniqueItems turned on",
            x(json!({"type": "array"})),
            x(json!({"type": "array", "uniqueItems": true})),
            NON,
            false,
            true,
            &["/x constraint_tightened"],
        ),
        case(
            "tuple position changed",
            x(
                json!({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "minItems": 2, "maxItems": 2}),
            ),
            x(
                json!({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "boolean"}], "minItems": 2, "maxItems": 2}),
            ),
            NON,
            false,
            false,
            &["/x[1] type_changed"],
        ),
        case(
            "items false lifted",
            x(json!({"type": "array", "items": false})),
            x(json!({"type": "array", "items": {"type": "string"}})),
            NON,
            true,
            false,
            &["/x[] became_satisfiable"],
        ),
        // --- unions ---
        case(
            "anyOf branch added",
            x(json!({"anyOf": [{"type": "string"}, {"type": "integer"}]})),
            x(json!({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "boolean"}]})),
            NON,
            true,
            false,
            &["/x|anyOf[2] union_branch_added"],
        ),
        case(
            "anyOf branch removed",
            x(json!({"anyOf": [{"type": "string"}, {"type": "integer"}]})),
            x(
                json!({"anyOf": [{"type": "string"}, {"type": "boolean", "const": true}, {"type": "object"}]}),
            ),
            NON,
            false,
            false,
            &[
                "/x|anyOf[1] union_branch_added",
                "/x|anyOf[1] union_branch_removed",
                "/x|anyOf[2] union_branch_added",
            ],
        ),
        case(
            "single type becomes a union",
            x(json!({"type": "string"})),
            x(json!({"anyOf": [{"type": "string"}, {"type": "integer"}]})),
            NON,
            true,
            false,
            &["/x|anyOf[1] union_branch_added"],
        ),
        case(
            "anyOf to oneOf",
            x(json!({"anyOf": [{"type": "string"}, {"type": "integer"}]})),
            x(json!({"oneOf": [{"type": "string"}, {"type": "integer"}]})),
            NON,
            false,
            true,
            &["/x union_kind_changed"],
        ),
        case(
            "data enum variant payload widened",
            x(json!({"oneOf": [
                {"type": "string", "enum": ["A"]},
                {"type": "object", "properties": {"B": {"type": "integer", "format": "uint8", "minimum": 0, "maximum": 255}}, "required": ["B"], "additionalProperties": false}]})),
            x(json!({"oneOf": [
                {"type": "string", "enum": ["A"]},
                {"type": "object", "properties": {"B": {"type": "integer", "format": "uint16", "minimum": 0, "maximum": 65535}}, "required": ["B"], "additionalProperties": false}]})),
            NON,
            true,
            false,
            &[
                "/x|oneOf[1]/B constraint_loosened",
                "/x|oneOf[1]/B constraint_loosened",
            ],
        ),
        case(
            "null branch added to a union",
            x(json!({"anyOf": [{"type": "string"}, {"type": "integer"}]})),
            x(json!({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]})),
            NON,
            true,
            false,
            &["/x null_allowed"],
        ),
        case(
            "allOf branch added",
            x(json!({"allOf": [{"type": "string"}]})),
            x(json!({"allOf": [{"type": "string"}, {"minLength": 1}]})),
            NON,
            false,
            true,
            &["/x|allOf[1] all_of_branch_added"],
        ),
        // --- content models and maps ---
        case(
            "root closed",
            obj(json!({"a": {"type": "string"}})),
            closed(json!({"a": {"type": "string"}})),
            NON,
            false,
            true,
            &["/ additional_properties_closed"],
        ),
        case(
            "root opened",
            closed(json!({"a": {"type": "string"}})),
            obj(json!({"a": {"type": "string"}})),
            NON,
            true,
            false,
            &["/ additional_properties_opened"],
        ),
        case(
            "map values widened",
            x(json!({"type": "object", "additionalProperties": {"type": "integer"}})),
            x(json!({"type": "object", "additionalProperties": {"type": "number"}})),
            NON,
            true,
            false,
            &["/x{} type_widened"],
        ),
        case(
            "open model restricted by a schema",
            x(json!({"type": "object"})),
            x(json!({"type": "object", "additionalProperties": {"type": "string"}})),
            NON,
            false,
            true,
            &["/x additional_properties_restricted"],
        ),
        case(
            "property declared inside a compatible map",
            x(json!({"type": "object", "additionalProperties": {"type": "string"}})),
            x(
                json!({"type": "object", "properties": {"k": {"type": "string"}}, "additionalProperties": {"type": "string"}}),
            ),
            NON,
            true,
            true,
            &["/x/k property_added"],
        ),
        case(
            "property declared inside an incompatible map",
            x(json!({"type": "object", "additionalProperties": {"type": "string"}})),
            x(
                json!({"type": "object", "properties": {"k": {"type": "integer"}}, "additionalProperties": {"type": "string"}}),
            ),
            NON,
            false,
            false,
            &["/x/k property_added"],
        ),
        case(
            "uninterpreted keyword changed",
            x(json!({"type": "string", "not": {"const": "a"}})),
            x(json!({"type": "string", "not": {"const": "b"}})),
            NON,
            false,
            false,
            &["/x keyword_changed"],
        ),
        // --- top level (seed semantics kept) ---
        case(
            "top optional added to open root",
            obj(json!({"a": {"type": "string"}})),
            obj(json!({"a": {"type": "string"}, "b": {"type": "integer"}})),
            ADD,
            true,
            true,
            &["/b property_added"],
        ),
        case(
            "top optional added to closed root is additive but not forward",
            closed(json!({"a": {"type": "string"}})),
            closed(json!({"a": {"type": "string"}, "b": {"type": "integer"}})),
            ADD,
            true,
            false,
            &["/b property_added"],
        ),
        case(
            "top required added",
            obj(json!({"a": {"type": "string"}})),
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["b"]}),
            NON,
            false,
            true,
            &["/b property_added"],
        ),
        case(
            "top optional removed from closed root",
            closed(json!({"a": {"type": "string"}, "b": {"type": "integer"}})),
            closed(json!({"a": {"type": "string"}})),
            NON,
            false,
            true,
            &["/b property_removed"],
        ),
        case(
            "top made required",
            obj(json!({"a": {"type": "string"}})),
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}),
            NON,
            false,
            true,
            &["/a required_added"],
        ),
        case(
            "escaped property names",
            obj(json!({"a/b": {"type": "string"}})),
            obj(json!({"a/b": {"type": "integer"}})),
            NON,
            false,
            false,
            &["/a~1b type_changed"],
        ),
        // --- strict open-content policy (registry rule) ---
        Case {
            strict: true,
            ..case(
                "strict: optional added to open model breaks backward",
                obj(json!({"a": {"type": "string"}})),
                obj(json!({"a": {"type": "string"}, "b": {"type": "integer"}})),
                ADD,
                false,
                true,
                &["/b property_added"],
            )
        },
        Case {
            strict: true,
            ..case(
                "strict: empty-schema property added stays compatible",
                obj(json!({"a": {"type": "string"}})),
                obj(json!({"a": {"type": "string"}, "b": {}})),
                ADD,
                true,
                true,
                &["/b property_added"],
            )
        },
        Case {
            strict: true,
            ..case(
                "strict: optional removed from open model breaks forward",
                obj(json!({"a": {"type": "string"}, "b": {"type": "integer"}})),
                obj(json!({"a": {"type": "string"}})),
                NON,
                true,
                false,
                &["/b property_removed"],
            )
        },
        Case {
            strict: true,
            ..case(
                "strict: optional added to closed model",
                closed(json!({"a": {"type": "string"}})),
                closed(json!({"a": {"type": "string"}, "b": {"type": "integer"}})),
                ADD,
                true,
                false,
                &["/b property_added"],
            )
        },
    ]
}

#[test]
fn path_level_table() {
    let cases = cases();
    assert!(cases.len() >= 40, "table has {} rows", cases.len());
    let mut failures = Vec::new();
    for c in &cases {
        let opts = DiffOptions {
            open_content: if c.strict {
                OpenContentPolicy::Strict
            } else {
                OpenContentPolicy::TypedWriters
            },
        };
        let d = match diff_with("table", &c.old, &c.new, &opts) {
            Ok(d) => d,
            Err(e) => {
                failures.push(format!("{}: error {e}", c.name));
                continue;
            }
        };
        let got = change_summary(&d);
        let mut want: Vec<String> = c.changes.iter().map(|s| s.to_string()).collect();
        want.sort();
        if d.kind != c.kind
            || d.compatibility.backward != c.backward
            || d.compatibility.forward != c.forward
            || got != want
        {
            failures.push(format!(
                "{}: got kind {} backward {} forward {} changes {:?}; want kind {} backward {} forward {} changes {:?}",
                c.name, d.kind, d.compatibility.backward, d.compatibility.forward, got,
                c.kind, c.backward, c.forward, want
            ));
        }
        // Forward is the backward verdict of the reversed diff (no renames in this table).
        let rev = diff_with("table", &c.new, &c.old, &opts).unwrap();
        if rev.compatibility.backward != d.compatibility.forward
            || rev.compatibility.forward != d.compatibility.backward
        {
            failures.push(format!(
                "{}: reversed diff verdict backward {} forward {} is not the mirror image",
                c.name, rev.compatibility.backward, rev.compatibility.forward
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
