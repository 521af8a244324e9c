//! The method metadata of the generated file: `<P>MethodDirection`, `<P>MethodInfo`, the
//! `<P>Method` protocol with its `Params` and `Result` types, and `<P>Methods` with one type per
//! method and `all` in schema order.

use super::{Gen, q};
use crate::ir::Ty;
use crate::names::NameScope;
impl Gen<'_> {
    /// The method metadata: `<P>MethodDirection`, `<P>MethodInfo`, the protocol `<P>Method`
    /// (associated `Params` and `Result` types) and `enum <P>Methods` with one `…Method` type per
    /// method and `all`; nothing when the schema has no methods.
    pub(super) fn methods(&mut self) {
        let ir = self.ir;
        if ir.method_table.is_empty() {
            return;
        }
        let p = &self.prefix;
        let lit = |s: Option<&str>| s.map_or_else(|| "nil".to_owned(), q);
        let named = |ty: Option<&Ty>| match ty {
            Some(Ty::Ref(name)) => Some(self.name(name)),
            _ => None,
        };
        let mut s = format!(
            "\n/// Who sends a method's message.\npublic enum {p}MethodDirection: String, Sendable {{\n    \
             /// A request the client sends and the server answers.\n    case clientRequest\n    \
             /// A request the server sends and the client answers.\n    case serverRequest\n    \
             /// A message nobody answers.\n    case notification\n}}\n\n\
             /// One method: its wire name, who sends it, the names of its params and result types (nil\n\
             /// when they are not a named type: no params, any JSON value), and the schema's scope and since.\n\
             public struct {p}MethodInfo: Sendable, Equatable {{\n    \
             public let name: String\n    public let direction: {p}MethodDirection\n    \
             public let params: String?\n    public let result: String?\n    \
             public let scope: String?\n    public let since: String?\n}}\n\n\
             /// A method as a type: its metadata and the types of its params and result (`Void`: none).\n\
             public protocol {p}Method {{\n    associatedtype Params\n    associatedtype Result\n    \
             static var info: {p}MethodInfo {{ get }}\n}}\n\n\
             /// One type per method, and `all` in schema order.\npublic enum {p}Methods {{\n"
        );
        let mut scope = NameScope::with_reserved(&["all"]);
        let mut cases = Vec::new();
        for m in &ir.method_table {
            let case = scope.claim(&format!("{}Method", m.type_name));
            let params = m
                .params
                .as_ref()
                .map_or_else(|| "Void".to_owned(), |t| self.ty("", t));
            let result = m
                .result
                .as_ref()
                .map_or_else(|| "Void".to_owned(), |t| self.ty("", t));
            s.push_str(&format!(
                "    /// `{}`.\n    public enum {case}: {p}Method {{\n        public typealias Params = {params}\n        public typealias Result = {result}\n        \
                 public static let info = {p}MethodInfo(name: {}, direction: .{}, params: {}, result: {}, scope: {}, since: {})\n    }}\n",
                crate::emit::doc_name(&m.name),
                q(&m.name),
                m.direction.wire(),
                lit(named(m.params.as_ref()).as_deref()),
                lit(named(m.result.as_ref()).as_deref()),
                lit(m.scope.as_deref()),
                lit(m.since.as_deref()),
            ));
            cases.push(case);
        }
        s.push_str(&format!(
            "\n    /// Every method, in schema order.\n    public static let all: [{p}MethodInfo] = [\n{}    ]\n}}\n",
            cases.iter().map(|c| format!("        {c}.info,\n")).collect::<String>()
        ));
        self.out.push_str(&s);
    }
}
