//! The method metadata of the generated module: the `MethodDirection`, `MethodInfo` and `Method`
//! support types, `METHOD_TABLE` with one entry per method in schema order, and one type per
//! method implementing `Method` with its params and result types.

use super::Gen;
use crate::emit::{Quote, quote};
use crate::ir::Ty;
/// The method-table types, emitted before `METHOD_TABLE` when the schema has methods.
const METHOD_SUPPORT: &str = r#"
/// Who sends a method's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MethodDirection {
    /// A request the client sends and the server answers.
    ClientRequest,
    /// A request the server sends and the client answers.
    ServerRequest,
    /// A message nobody answers.
    Notification,
}

/// One method: its wire name, who sends it, the names of its params and result types (`None`
/// when they are not a named type: no params, any JSON value), and the schema's `scope` and
/// `since`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodInfo {
    pub name: &'static str,
    pub direction: MethodDirection,
    pub params: ::std::option::Option<&'static str>,
    pub result: ::std::option::Option<&'static str>,
    pub scope: ::std::option::Option<&'static str>,
    pub since: ::std::option::Option<&'static str>,
}

impl MethodInfo {
    /// The method named `name` sent in `direction`.
    pub fn find(name: &str, direction: MethodDirection) -> ::std::option::Option<&'static MethodInfo> {
        METHOD_TABLE.iter().find(|m| m.name == name && m.direction == direction)
    }
}

/// A method as a type: its wire name, direction, and the types of its params and result (`()`
/// for a message without params and for a notification's result).
pub trait Method {
    const METHOD: &'static str;
    const DIRECTION: MethodDirection;
    type Params;
    type Result;
}
"#;

impl Gen<'_> {
    /// The method table (`METHOD_TABLE`), the `Method` trait and one type per method
    /// implementing it; nothing when the schema has no methods.
    pub(super) fn methods(&mut self) {
        let ir = self.ir;
        if ir.method_table.is_empty() {
            return;
        }
        let q = |s: &str| quote(s, Quote::Braced);
        let opt = |s: Option<&str>| match s {
            Some(s) => format!("::std::option::Option::Some({})", q(s)),
            None => "::std::option::Option::None".to_owned(),
        };
        let named = |ty: Option<&Ty>| match ty {
            Some(Ty::Ref(name)) => Some(self.name(name)),
            _ => None,
        };
        let mut s = String::from(METHOD_SUPPORT);
        s.push_str("\n/// Every method of the protocol, in schema order.\npub const METHOD_TABLE: &[MethodInfo] = &[\n");
        for m in &ir.method_table {
            s.push_str(&format!(
                "    MethodInfo {{ name: {}, direction: MethodDirection::{:?}, params: {}, result: {}, scope: {}, since: {} }},\n",
                q(&m.name),
                m.direction,
                opt(named(m.params.as_ref()).as_deref()),
                opt(named(m.result.as_ref()).as_deref()),
                opt(m.scope.as_deref()),
                opt(m.since.as_deref()),
            ));
        }
        s.push_str("];\n\n/// One type per method, implementing [`Method`].\npub mod methods {\n");
        for m in &ir.method_table {
            s.push_str(&format!(
                "    /// `{}`.\n    #[derive(Debug, Clone, Copy, PartialEq, Eq)]\n    pub enum {} {{}}\n",
                crate::emit::doc_name(&m.name),
                m.type_name
            ));
        }
        s.push_str("}\n");
        for m in &ir.method_table {
            let params = m
                .params
                .as_ref()
                .map_or_else(|| "()".to_owned(), |t| self.ty("", t));
            let result = m
                .result
                .as_ref()
                .map_or_else(|| "()".to_owned(), |t| self.ty("", t));
            s.push_str(&format!(
                "\nimpl Method for methods::{} {{\n    const METHOD: &'static str = {};\n    const DIRECTION: MethodDirection = MethodDirection::{:?};\n    type Params = {params};\n    type Result = {result};\n}}\n",
                m.type_name,
                q(&m.name),
                m.direction,
            ));
        }
        self.out.push_str(&s);
    }
}
