//! Path-level rows: unions, content models and maps, the top level (seed semantics
//! kept), and the strict open-content policy (registry rule).

use super::*;

/// The rows of this part of the table, in table order.
pub(super) fn cases() -> Vec<Case> {
    vec![
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
