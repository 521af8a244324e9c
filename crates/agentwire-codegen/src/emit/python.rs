//! Python bindings (3.9+): `TypedDict` classes in functional syntax (wire keys kept verbatim,
//! required and optional keys split into two bases), `Literal` aliases for string enums, `Union`
//! aliases, the protocol constants, and a fail-closed `parse_*` function per tagged union.

use crate::emit::{Quote, TypeNames, header_text, push_doc, quote};
use crate::ir::{Ir, Ty, TypeDef, TypeKind, UnionType, Version};
use crate::methods::MethodDirection;
use crate::names;

const RESERVED: &[&str] = &[
    "None",
    "True",
    "False",
    "Any",
    "Dict",
    "List",
    "Literal",
    "Optional",
    "Union",
    "TypedDict",
    "TypeAlias",
    "TYPE_CHECKING",
    "Json",
    "Mapping",
    "Sequence",
    "Tuple",
    "Type",
    "cast",
    "NamedTuple",
    "ValidationError",
    "ValidationResult",
    "ProtocolValidationError",
    "MethodInfo",
    "overload",
];

/// The schema walker every Python file carries (standard library only): JSON Schema draft-07
/// and 2020-12 keywords over the embedded document.
const VALIDATOR: &str = include_str!("runtime/validator.py");

/// The method-table type, emitted before `METHOD_TABLE` when the schema has methods.
const METHOD_SUPPORT: &str = r#"


class MethodInfo(NamedTuple):
    """One method: its wire name, who sends it (clientRequest, serverRequest, notification), the
    names of its params and result types (None when they are not a named type: no params, any
    JSON value), and the schema's scope and since."""

    name: str
    direction: str
    params: Optional[str]
    result: Optional[str]
    scope: Optional[str]
    since: Optional[str]
"#;

/// `validate_params` and `validate_result`, after `_METHOD_SCHEMAS`.
const METHOD_VALIDATORS: &str = r#"


def _validate_method_part(direction: str, method: str, part: int, value: object) -> ValidationResult:
    schemas = _METHOD_SCHEMAS.get(direction + " " + method)
    if schemas is None:
        return ValidationResult(False, (ValidationError("", "method", "unknown " + direction + " method " + json.dumps(method)),))
    pointer = schemas[part]
    return ValidationResult(True, ()) if pointer is None else validate_at(pointer, value)


def validate_params(direction: str, method: str, params: object) -> ValidationResult:
    """Validates the params of method sent as direction against its params type (any value
    passes when the type is not a named one)."""
    return _validate_method_part(direction, method, 0, params)


def validate_result(direction: str, method: str, result: object) -> ValidationResult:
    """Validates the result of a method request against its result type (any value passes when
    the schema does not name one)."""
    return _validate_method_part(direction, method, 1, result)
"#;

fn q(s: &str) -> String {
    quote(s, Quote::Json { dollar: false })
}

struct Gen<'a> {
    ir: &'a Ir,
    type_names: TypeNames,
    out: String,
}

/// Generates the Python module text.
pub(crate) fn generate(ir: &Ir) -> String {
    let type_names = TypeNames::claim(ir, RESERVED);
    let mut g = Gen {
        ir,
        type_names,
        out: String::new(),
    };
    g.preamble();
    for t in &ir.types {
        g.type_def(t);
    }
    g.definition_validators();
    g.methods();
    g.out
}

impl Gen<'_> {
    fn name(&self, ir_name: &str) -> String {
        self.type_names.get(ir_name)
    }

    fn preamble(&mut self) {
        let ir = self.ir;
        let mut o = format!("# {}\n", header_text(ir));
        o.push_str(&format!(
            "{}\n\n",
            q(&format!("Protocol types of {}.", ir.schema_name))
        ));
        o.push_str("from __future__ import annotations\n\n");
        o.push_str("import json\nimport re\n");
        o.push_str("from typing import TYPE_CHECKING, Dict, List, Literal, Mapping, NamedTuple, Optional, Tuple, TypedDict, Union, cast");
        o.push_str(if ir.method_table.is_empty() {
            "\n"
        } else {
            ", overload\n"
        });
        o.push_str("from urllib.parse import unquote\n\n");
        o.push_str("if TYPE_CHECKING:\n    from typing_extensions import TypeAlias\n\n");
        o.push_str(&format!("SCHEMA_DIGEST = {}\n", q(&ir.digest)));
        if let Some(id) = &ir.schema_id {
            o.push_str(&format!("SCHEMA_ID = {}\n", q(id)));
        }
        let id = &ir.identity;
        if let Some(name) = &id.name {
            o.push_str(&format!("PROTOCOL_NAME = {}\n", q(name)));
        }
        let lit = |v: &Version| match v {
            Version::Integer(i) => i.to_string(),
            Version::Text(t) => q(t),
        };
        if let Some(v) = &id.version {
            o.push_str(&format!("PROTOCOL_VERSION = {}\n", lit(v)));
        }
        if let Some(v) = &id.min_version {
            o.push_str(&format!("PROTOCOL_MIN_VERSION = {}\n", lit(v)));
        }
        let list = |items: &[String]| {
            if items.is_empty() {
                "()".to_owned()
            } else {
                format!(
                    "(\n{})",
                    items
                        .iter()
                        .map(|s| format!("    {},\n", q(s)))
                        .collect::<String>()
                )
            }
        };
        // An empty list says nothing: it is left out.
        if !id.features.is_empty() {
            o.push_str(&format!(
                "PROTOCOL_FEATURES: Tuple[str, ...] = {}\n",
                list(&id.features)
            ));
        }
        // An empty list says nothing: it is left out.
        if !ir.methods.is_empty() {
            o.push_str(&format!(
                "METHODS: Tuple[str, ...] = {}\n",
                list(&ir.methods)
            ));
        }
        // An empty list says nothing: it is left out.
        if !ir.events.is_empty() {
            o.push_str(&format!(
                "EVENTS: Tuple[str, ...] = {}\n\n",
                list(&ir.events)
            ));
        }
        o.push_str("Json: TypeAlias = Union[None, bool, int, float, str, List[\"Json\"], Dict[str, \"Json\"]]\n\n\n");
        o.push_str(
            "# The schema document these types come from, walked by the validators below.\n",
        );
        o.push_str(&format!(
            "_SCHEMA: object = json.loads({})\n",
            q(&ir.schema_text)
        ));
        o.push_str(&format!(
            "_DRAFT_07 = {}\n_DEFINITIONS_KEY = {}\n_MISSING = object()\n\n\n",
            if ir.draft_07 { "True" } else { "False" },
            q(&ir.definitions_keyword)
        ));
        o.push_str(VALIDATOR);
        self.out.push_str(&o);
    }

    fn ty(&self, ty: &Ty) -> String {
        match ty {
            Ty::Any => "Json".to_owned(),
            Ty::Bool => "bool".to_owned(),
            Ty::Int => "int".to_owned(),
            Ty::Number => "float".to_owned(),
            Ty::String => "str".to_owned(),
            Ty::Array(inner) => format!("List[{}]", self.ty(inner)),
            Ty::Map(inner) => format!("Dict[str, {}]", self.ty(inner)),
            Ty::Ref(name) => match self.ir.enum_values(ty) {
                Some([one]) => format!("Literal[{}]", q(one)),
                _ => q(&self.name(name)),
            },
            Ty::Nullable(inner) => format!("Optional[{}]", self.ty(inner)),
        }
    }

    fn type_def(&mut self, t: &TypeDef) {
        let name = self.name(&t.name);
        let mut s = String::from("\n");
        push_doc(&mut s, "", "#", &t.doc);
        match &t.kind {
            TypeKind::Object(o) => {
                let entries = |required: bool| -> Vec<String> {
                    o.fields
                        .iter()
                        .filter(|f| f.required == required)
                        .map(|f| format!("    {}: {},\n", q(&f.wire), self.ty(&f.ty)))
                        .collect()
                };
                let required = entries(true);
                let optional = entries(false);
                let dict = |n: &str, items: &[String], total: bool| {
                    let total = if total { "" } else { ", total=False" };
                    if items.is_empty() {
                        format!("{n} = TypedDict({}, {{}}{total})\n", q(n))
                    } else {
                        format!(
                            "{n} = TypedDict(\n    {},\n    {{\n{}    }},\n    {total_kw}\n)\n",
                            q(n),
                            items.iter().map(|i| format!("    {i}")).collect::<String>(),
                            total_kw = if total.is_empty() {
                                "total=True,"
                            } else {
                                "total=False,"
                            }
                        )
                    }
                };
                if optional.is_empty() {
                    s.push_str(&dict(&name, &required, true));
                } else if required.is_empty() {
                    s.push_str(&dict(&name, &optional, false));
                } else {
                    let req = format!("_{name}Required");
                    let opt = format!("_{name}Optional");
                    s.push_str(&dict(&req, &required, true));
                    s.push_str(&dict(&opt, &optional, false));
                    s.push_str(&format!("\n\nclass {name}({req}, {opt}):\n    pass\n"));
                }
            }
            TypeKind::Enum(values) => {
                let lits = values.iter().map(|v| q(v)).collect::<Vec<_>>().join(", ");
                s.push_str(&format!("{name}: TypeAlias = Literal[{lits}]\n"));
            }
            TypeKind::Alias(ty) => {
                let rendered = self.ty(ty);
                s.push_str(&format!("{name}: TypeAlias = {rendered}\n"));
            }
            TypeKind::Union(u) => {
                let parts: Vec<String> = u.variants.iter().map(|v| self.ty(&v.ty)).collect();
                s.push_str(&format!(
                    "{name}: TypeAlias = Union[\n{}]\n",
                    parts
                        .iter()
                        .map(|p| format!("    {p},\n"))
                        .collect::<String>()
                ));
                if let Some(tag) = &u.tag {
                    self.parser(&mut s, t, &name, tag, u);
                }
            }
        }
        self.out.push_str(&s);
    }

    fn parser(&self, s: &mut String, t: &TypeDef, name: &str, tag: &str, u: &UnionType) {
        let func = format!("parse_{}", names::snake(name));
        let ptr = q(&t.pointer);
        if u.open {
            let envelope = crate::emit::rust::common_required(self.ir, u, tag);
            let known: Vec<String> = u
                .variants
                .iter()
                .flat_map(|v| {
                    v.tags
                        .iter()
                        .map(|t| t.as_text().map(q).unwrap_or_else(|| python_literal(t)))
                })
                .collect();
            s.push_str(&format!(
                "\n\nclass Unknown{name}(NamedTuple):\n    {}\n\n    tag: str\n    raw: Dict[str, Json]\n",
                q(&format!("A {name} variant this version does not know: its tag and the whole object, kept as they are."))
            ));
            s.push_str(&format!(
                "\n\ndef {func}(value: object) -> Union[{name}, Unknown{name}]:\n    {}\n",
                q(&format!("Decodes a {name}: a valid known variant is returned as it is; an object whose {tag} is not a known one (and that has every key all variants require) is an Unknown{name}; anything else raises ProtocolValidationError (a ValueError)."))
            ));
            s.push_str(&format!(
                "    result = validate_at({ptr}, value)\n    if result.ok:\n        return cast({name}, value)\n"
            ));
            s.push_str(&format!(
                "    if isinstance(value, dict):\n        tag = value.get({})\n        envelope: Tuple[str, ...] = ({})\n        if isinstance(tag, str) and tag not in ({},) and all(key in value for key in envelope):\n            return Unknown{name}(tag, cast(Dict[str, Json], value))\n    raise ProtocolValidationError(result.errors)\n",
                q(tag),
                envelope
                    .iter()
                    .map(|k| format!("{}, ", q(k)))
                    .collect::<String>(),
                known.join(", ")
            ));
        } else {
            s.push_str(&format!("\n\ndef {func}(value: object) -> {name}:\n"));
            s.push_str(&format!(
                "    {}\n",
                q(&format!("Decodes a {name}, failing closed: an unknown {tag}, a missing or extra key, or any invalid level raises ProtocolValidationError (a ValueError)."))
            ));
            s.push_str(&format!(
                "    _assert_valid(validate_at({ptr}, value))\n    return cast({name}, value)\n"
            ));
        }
    }

    /// The method metadata: `METHOD_TABLE`, `validate_params`/`validate_result`, and one
    /// overloaded `parse_<direction>_params`/`_result` per direction whose overloads map each
    /// method name to its params or result type; nothing when the schema has no methods.
    fn methods(&mut self) {
        let ir = self.ir;
        if ir.method_table.is_empty() {
            return;
        }
        let lit = |s: Option<&str>| s.map_or_else(|| "None".to_owned(), q);
        let mut s = String::from(METHOD_SUPPORT);
        s.push_str("\n\n# Every method of the protocol, in schema order.\nMETHOD_TABLE: Tuple[MethodInfo, ...] = (\n");
        for m in &ir.method_table {
            let row = super::method_row(m, q, "None", |n| self.name(n));
            s.push_str(&format!(
                "    MethodInfo({}, {}, {}, {}, {}, {}),\n",
                row[0], row[1], row[2], row[3], row[4], row[5],
            ));
        }
        s.push_str(")\n\n_METHOD_SCHEMAS: Dict[str, Tuple[Optional[str], Optional[str]]] = {\n");
        for m in &ir.method_table {
            s.push_str(&format!(
                "    {}: ({}, {}),\n",
                q(&format!("{} {}", m.direction.wire(), m.name)),
                lit(m.params_schema.as_deref()),
                lit(m.result_schema.as_deref()),
            ));
        }
        s.push_str("}\n");
        s.push_str(METHOD_VALIDATORS);
        for direction in MethodDirection::ALL {
            let entries: Vec<_> = ir
                .method_table
                .iter()
                .filter(|m| m.direction == direction)
                .collect();
            // A direction without methods gets no parser.
            if entries.is_empty() {
                continue;
            }
            let snake = names::snake(direction.wire());
            let mut parts = vec![(0, "params")];
            if direction != MethodDirection::Notification {
                parts.push((1, "result"));
            }
            for (part, word) in parts {
                let function = format!("parse_{snake}_{word}");
                let ty_of = |m: &crate::methods::Method| {
                    let ty = if part == 0 { &m.params } else { &m.result };
                    ty.as_ref()
                        .map_or_else(|| "None".to_owned(), |t| self.ty(t))
                };
                let doc = q(&format!(
                    "Returns the {word} of a {} method typed, or raises ProtocolValidationError.",
                    direction.wire()
                ));
                let body = format!(
                    "    {doc}\n    _assert_valid(_validate_method_part({}, method, {part}, value))\n",
                    q(direction.wire())
                );
                if let [only] = entries.as_slice() {
                    // `overload` needs two signatures at least: one method is a plain function.
                    s.push_str(&format!(
                        "\n\ndef {function}(method: Literal[{}], value: object) -> {ty}:\n{body}    return cast({ty}, value)\n",
                        q(&only.name),
                        ty = ty_of(only)
                    ));
                    continue;
                }
                for m in &entries {
                    s.push_str(&format!(
                        "\n\n@overload\ndef {function}(method: Literal[{}], value: object) -> {}: ...\n",
                        q(&m.name),
                        ty_of(m)
                    ));
                }
                s.push_str(&format!(
                    "\n\ndef {function}(method: str, value: object) -> object:\n{body}    return value\n"
                ));
            }
        }
        self.out.push_str(&s);
    }

    /// `validate_<definition>` and `assert_<definition>` for every definition.
    fn definition_validators(&mut self) {
        let mut scope = names::NameScope::with_reserved(&[
            "validate_at",
            "validate_protocol_message",
            "validate_definition",
        ]);
        let mut s = String::new();
        for (key, ir_name) in &self.ir.definitions {
            let name = self.name(ir_name);
            let snake = names::snake(&name);
            let validate = scope.claim(&format!("validate_{snake}"));
            let assert = scope.claim(&format!("assert_{snake}"));
            s.push_str(&format!(
                "\n\ndef {validate}(value: object) -> ValidationResult:\n    {}\n    return validate_definition({}, value)\n",
                q(&format!("Validates value against the definition {key}.")),
                q(key)
            ));
            s.push_str(&format!(
                "\n\ndef {assert}(value: object) -> {}:\n    {}\n    _assert_valid(validate_definition({}, value))\n    return cast({}, value)\n",
                q(&name),
                q(&format!("Returns value typed as {name}, or raises ProtocolValidationError.")),
                q(key),
                q(&name)
            ));
        }
        self.out.push_str(&s);
    }
}

/// A Python literal of a non-string tag value (`True`, `False`, a number).
fn python_literal(t: &crate::ir::TagValue) -> String {
    match t {
        crate::ir::TagValue::Bool(true) => "True".to_owned(),
        crate::ir::TagValue::Bool(false) => "False".to_owned(),
        other => other.literal(),
    }
}
