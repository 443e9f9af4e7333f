//! Path-level rows: nested objects and `$ref`, and arrays.

use super::*;

/// The rows of this part of the table, in table order.
pub(super) fn cases() -> Vec<Case> {
    let addr_v1 = addr_v1();
    let addr_v2 = addr_v2();
    vec![
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
    ]
}
