//! Python bindings (3.9+): `TypedDict` classes in functional syntax (wire keys kept verbatim,
//! required and optional keys split into two bases), `Literal` aliases for string enums, `Union`
//! aliases, the protocol constants, and a fail-closed `parse_*` function per tagged union.

use crate::emit::{Quote, TypeNames, header_text, push_doc, quote};
use crate::ir::{Extra, Ir, Ty, TypeDef, TypeKind, UnionType, Version};
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
];

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
        o.push_str("from typing import TYPE_CHECKING, Dict, List, Literal, Mapping, Optional, Tuple, TypedDict, Union, cast\n\n");
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
        o.push_str(&format!(
            "PROTOCOL_FEATURES: Tuple[str, ...] = {}\n",
            list(&id.features)
        ));
        o.push_str(&format!(
            "METHODS: Tuple[str, ...] = {}\n",
            list(&ir.methods)
        ));
        o.push_str(&format!(
            "EVENTS: Tuple[str, ...] = {}\n\n",
            list(&ir.events)
        ));
        o.push_str("Json: TypeAlias = Union[None, bool, int, float, str, List[\"Json\"], Dict[str, \"Json\"]]\n\n\n");
        o.push_str(
            "def _check_keys(value: object, what: str, required: Tuple[str, ...], allowed: Optional[Tuple[str, ...]]) -> Mapping[str, object]:\n    \
             if not isinstance(value, dict):\n        raise ValueError(what + \": expected an object\")\n    \
             for key in required:\n        if key not in value:\n            raise ValueError(what + \": missing key \" + repr(key))\n    \
             if allowed is not None:\n        for key in value:\n            if key not in allowed:\n                \
             raise ValueError(what + \": unexpected key \" + repr(key))\n    \
             return cast(Mapping[str, object], value)\n",
        );
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
                    self.parser(&mut s, &name, tag, u);
                }
            }
        }
        self.out.push_str(&s);
    }

    fn parser(&self, s: &mut String, name: &str, tag: &str, u: &UnionType) {
        let func = format!("parse_{}", names::snake(name));
        let ret = if u.open {
            format!("Union[{name}, Mapping[str, object]]")
        } else {
            name.to_owned()
        };
        s.push_str(&format!("\n\ndef {func}(value: object) -> {ret}:\n"));
        s.push_str(&format!(
            "    {}\n",
            q(&format!("Checks the tag and keys of a {name}; raises ValueError for a missing key or an extra key on a closed variant{}.", if u.open { " (an unknown tag is returned as it is)" } else { ", and for an unknown tag" }))
        ));
        s.push_str(&format!(
            "    record = _check_keys(value, {}, ({},), None)\n",
            q(name),
            q(tag)
        ));
        s.push_str(&format!("    tag = record[{}]\n", q(tag)));
        for v in &u.variants {
            let tags = v.tags.iter().map(|t| q(t)).collect::<Vec<_>>().join(", ");
            s.push_str(&format!("    if tag in ({tags},):\n"));
            match self.ir.object_of(&v.ty) {
                Some(o) => {
                    let required: Vec<String> = o
                        .fields
                        .iter()
                        .filter(|f| f.required)
                        .map(|f| q(&f.wire))
                        .collect();
                    let allowed = if o.extra == Extra::Closed {
                        format!(
                            "({},)",
                            o.fields
                                .iter()
                                .map(|f| q(&f.wire))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    } else {
                        "None".to_owned()
                    };
                    let required = if required.is_empty() {
                        "()".to_owned()
                    } else {
                        format!("({},)", required.join(", "))
                    };
                    s.push_str(&format!(
                        "        _check_keys(record, {}, {required}, {allowed})\n",
                        q(name)
                    ));
                    s.push_str(&format!("        return cast({name}, record)\n"));
                }
                None => s.push_str(&format!("        return cast({name}, record)\n")),
            }
        }
        if u.open {
            s.push_str("    return record\n");
        } else {
            s.push_str(&format!(
                "    raise ValueError({} + repr(tag))\n",
                q(&format!("{name}: unknown {tag} "))
            ));
        }
    }
}
