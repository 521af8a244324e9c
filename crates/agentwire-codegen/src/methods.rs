//! The method table: every method of the protocol with its direction, params type, result type,
//! and the `scope`/`since` the schema gives, read from the lowered types and the document.
//!
//! Sources, in order (docs/codegen.md, "Method metadata"):
//! 1. the messages reachable from the root type through unions and aliases: an object whose
//!    `method` is a constant or enum is a request when it has an `id` property, else a
//!    notification; its `params` property is the params type;
//! 2. method maps in the identity block (ChainlessChain's `x-cc-protocol` …`methods`:
//!    `{request, response}` definition names) give params and result types;
//! 3. the root `methods` map (OpenClaw: `{scope, since}` per method) adds its methods as client
//!    requests and gives `scope` and `since`.
//!
//! A request's result is the type the schema names for it, else the definition named after its
//! params type (`…Params` → `…Result`) or after the method (`thread.list` → `ThreadListResult`).

use std::collections::{BTreeMap, BTreeSet};

use agentwire_schema::SchemaDocument;
use agentwire_schema::identity::{AGENTWIRE_IDENTITY, CHAINLESSCHAIN_IDENTITY};
use serde_json::Value;

use crate::ir::{Ir, Ty, TypeKind};
use crate::names::{self, NameScope};

/// Who sends a method's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MethodDirection {
    /// A request the client (host) sends and the server (runtime, gateway) answers.
    ClientRequest,
    /// A request the server sends and the client answers.
    ServerRequest,
    /// A message without an id: nobody answers.
    Notification,
}

impl MethodDirection {
    /// Every direction, in the order generated code lists them.
    pub const ALL: [MethodDirection; 3] = [
        MethodDirection::ClientRequest,
        MethodDirection::ServerRequest,
        MethodDirection::Notification,
    ];

    /// `clientRequest`, `serverRequest`, `notification`: the spelling of generated tables.
    pub fn wire(self) -> &'static str {
        match self {
            MethodDirection::ClientRequest => "clientRequest",
            MethodDirection::ServerRequest => "serverRequest",
            MethodDirection::Notification => "notification",
        }
    }
}

/// One method.
#[derive(Debug, Clone, PartialEq)]
pub struct Method {
    /// The method name on the wire.
    pub name: String,
    /// PascalCase name of the method, unique in the table (`thread/start` → `ThreadStart`).
    pub type_name: String,
    /// Who sends it.
    pub direction: MethodDirection,
    /// The type of `params`; `None` when the message has no `params` property.
    pub params: Option<Ty>,
    /// The type of a successful response's result (`Ty::Any` when the schema does not say);
    /// `None` for notifications.
    pub result: Option<Ty>,
    /// The scope a caller needs (OpenClaw's `methods` map).
    pub scope: Option<String>,
    /// The version the method appeared in (`x-agentwire-since`, OpenClaw's `since`).
    pub since: Option<String>,
    /// JSON Pointer of the schema node of the params type, when it is a named type whose node
    /// is in the document: what generated validators check params against.
    pub params_schema: Option<String>,
    /// The same for the result type.
    pub result_schema: Option<String>,
}

/// Most types the walk from the root visits (a guard; real schemas need a few hundred).
const MAX_VISITS: usize = 100_000;

/// Builds the table of `ir`'s methods from its types and `doc`.
pub(crate) fn collect(ir: &Ir, doc: &SchemaDocument) -> Vec<Method> {
    let mut table: Vec<Method> = Vec::new();
    let mut seen: BTreeSet<(String, MethodDirection)> = BTreeSet::new();
    let since_by_target = since_of_references(doc);
    if let Some(root) = &ir.root {
        let mut stack = vec![(root.clone(), Inherited::default())];
        let mut visited = BTreeSet::new();
        while let Some((name, inherited)) = stack.pop() {
            if visited.len() >= MAX_VISITS || !visited.insert(name.clone()) {
                continue;
            }
            let Some(t) = ir.get(&name) else { continue };
            let mut here = Inherited {
                server: inherited.server,
                ..Inherited::default()
            };
            // The type's own node and the nodes around it (a one-branch `oneOf` collapses into
            // its branch), innermost first: the nearest annotation wins.
            let mut around = enclosing_pointers(&t.pointer, doc.definitions_keyword());
            // A branch that is a `$ref` with siblings lowers to a type of its own: what the
            // referenced node says counts too.
            if let Some(reference) = doc
                .resolve_pointer(&t.pointer)
                .and_then(|n| n.get("$ref"))
                .and_then(Value::as_str)
                && let Ok((target, _)) = doc.resolve_ref(&t.pointer, reference)
            {
                if let Some(def) = target
                    .strip_prefix(&format!("/{}/", doc.definitions_keyword()))
                    .filter(|d| !d.contains('/'))
                    && names::pascal(def).starts_with("Server")
                {
                    here.server = true;
                }
                around.extend(enclosing_pointers(&target, doc.definitions_keyword()));
            }
            for at in around {
                let node = doc.resolve_pointer(&at);
                let annotation = |key: &str| {
                    node.and_then(|n| n.get(key))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                };
                if let Some(direction) = annotation("x-agentwire-direction") {
                    here.direction.get_or_insert(direction);
                }
                if let Some(since) =
                    annotation("x-agentwire-since").or_else(|| since_by_target.get(&at).cloned())
                {
                    here.since.get_or_insert(since);
                }
            }
            // What the type's surroundings say overrides what was inherited from the walk.
            here.direction = here.direction.or(inherited.direction.clone());
            here.since = here.since.or(inherited.since.clone());
            if names::pascal(&name).starts_with("Server") {
                here.server = true;
            }
            match &t.kind {
                TypeKind::Union(u) => {
                    // Reverse, so that the stack visits variants in schema order.
                    for v in u.variants.iter().rev() {
                        if let Some(target) = ref_name(&v.ty) {
                            stack.push((target.to_owned(), here.clone()));
                        }
                    }
                }
                TypeKind::Alias(ty) => {
                    if let Some(target) = ref_name(ty) {
                        stack.push((target.to_owned(), here));
                    }
                }
                TypeKind::Object(o) => {
                    let Some(method) = o.fields.iter().find(|f| f.wire == "method") else {
                        continue;
                    };
                    let Some(values) = ir.enum_values(&method.ty) else {
                        continue;
                    };
                    let is_request = o.fields.iter().any(|f| f.wire == "id");
                    let direction = match (is_request, here.direction.as_deref(), here.server) {
                        (false, _, _) => MethodDirection::Notification,
                        (true, Some("runtime-to-host"), _) => MethodDirection::ServerRequest,
                        (true, Some("host-to-runtime"), _) => MethodDirection::ClientRequest,
                        (true, _, true) => MethodDirection::ServerRequest,
                        (true, _, false) => MethodDirection::ClientRequest,
                    };
                    let params = o
                        .fields
                        .iter()
                        .find(|f| f.wire == "params")
                        .map(|f| f.ty.clone());
                    for value in values {
                        if seen.insert((value.clone(), direction)) {
                            table.push(Method {
                                name: value.clone(),
                                type_name: String::new(),
                                direction,
                                params: params.clone(),
                                result: (direction != MethodDirection::Notification)
                                    .then_some(Ty::Any),
                                scope: None,
                                since: here.since.clone(),
                                params_schema: None,
                                result_schema: None,
                            });
                        }
                    }
                }
                TypeKind::Enum(_) => {}
            }
        }
    }
    apply_identity_maps(ir, doc, &mut table);
    apply_root_methods_map(ir, doc, &mut table);
    for m in &mut table {
        if m.result == Some(Ty::Any)
            && let Some(result) = conventional_result(ir, m)
        {
            m.result = Some(result);
        }
    }
    let mut scope = NameScope::new();
    for m in &mut table {
        m.type_name = scope.claim(&names::pascal(&m.name));
        m.params_schema = schema_pointer(ir, doc, m.params.as_ref());
        m.result_schema = schema_pointer(ir, doc, m.result.as_ref());
    }
    table
}

/// The pointer of a named type's node in the document. A type first met through a `$ref` view
/// has a pointer through the reference (`/$defs/A/oneOf/1/properties/params` where branch 1 is
/// a `$ref` to `B`): each step the node lacks is taken in its reference's target instead.
fn schema_pointer(ir: &Ir, doc: &SchemaDocument, ty: Option<&Ty>) -> Option<String> {
    let Some(Ty::Ref(name)) = ty else {
        return None;
    };
    let tokens = agentwire_schema::pointer::tokens(&ir.get(name)?.pointer)?;
    let mut at = String::new();
    for token in &tokens {
        // Bounded: each hop follows one reference; a reference cycle without the key ends it.
        let mut hops = 0;
        loop {
            let node = doc.resolve_pointer(&at)?;
            let has = match node {
                Value::Object(map) => map.contains_key(token.as_str()),
                Value::Array(items) => token.parse::<usize>().is_ok_and(|i| i < items.len()),
                _ => false,
            };
            if has {
                at = agentwire_schema::pointer::push(&at, token);
                break;
            }
            let reference = node.get("$ref").and_then(Value::as_str)?;
            at = doc.resolve_ref(&at, reference).ok()?.0;
            hops += 1;
            if hops > 64 {
                return None;
            }
        }
    }
    Some(at)
}

/// What a type reached from the root inherits from the types above it.
#[derive(Debug, Clone, Default)]
struct Inherited {
    /// The nearest `x-agentwire-direction`.
    direction: Option<String>,
    /// The nearest `x-agentwire-since`.
    since: Option<String>,
    /// Whether a type above is named `Server…` (ChainlessChain's `ServerRequest`).
    server: bool,
}

/// `pointer` and the pointers of the schema nodes around it, innermost first, up to its
/// definition (`/$defs/Name`) or the document root.
fn enclosing_pointers(pointer: &str, definitions_keyword: &str) -> Vec<String> {
    let Some(tokens) = agentwire_schema::pointer::tokens(pointer) else {
        return vec![pointer.to_owned()];
    };
    let outermost = if tokens.first().map(String::as_str) == Some(definitions_keyword) {
        2.min(tokens.len())
    } else {
        0
    };
    (outermost..=tokens.len())
        .rev()
        .map(|n| agentwire_schema::pointer::from_tokens(tokens[..n].iter().map(String::as_str)))
        .collect()
}

fn ref_name(ty: &Ty) -> Option<&str> {
    match ty {
        Ty::Ref(name) => Some(name),
        Ty::Nullable(inner) => ref_name(inner),
        _ => None,
    }
}

/// `x-agentwire-since` written beside a `$ref` (a union branch `{"$ref": …, "x-agentwire-since"}`),
/// by the pointer the reference resolves to; the first such reference wins.
fn since_of_references(doc: &SchemaDocument) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for site in doc.refs() {
        if let Some(since) = doc
            .resolve_pointer(&site.at)
            .and_then(|n| n.get("x-agentwire-since"))
            .and_then(Value::as_str)
        {
            out.entry(site.target.clone())
                .or_insert_with(|| since.to_owned());
        }
    }
    out
}

/// The type of the definition `name` (a definition key as written in the document).
fn definition_ty(ir: &Ir, key: &str) -> Option<Ty> {
    ir.definitions
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, type_name)| Ty::Ref(type_name.clone()))
}

/// The type named `type_name` in the IR (PascalCase), when it is a definition.
fn definition_named(ir: &Ir, type_name: &str) -> Option<Ty> {
    ir.definitions
        .iter()
        .find(|(_, t)| t == type_name)
        .map(|(_, t)| Ty::Ref(t.clone()))
}

/// Method maps inside the identity block: any object under it with a `methods` map whose entries
/// name `request` and `response` definitions (ChainlessChain's `contextMemory.methods`).
fn apply_identity_maps(ir: &Ir, doc: &SchemaDocument, table: &mut Vec<Method>) {
    let root = doc.value();
    let Some(block) = root
        .get(AGENTWIRE_IDENTITY)
        .or_else(|| root.get(CHAINLESSCHAIN_IDENTITY))
    else {
        return;
    };
    let mut maps = Vec::new();
    find_method_maps(block, 0, &mut maps);
    for map in maps {
        for (name, entry) in map {
            let request = entry
                .get("request")
                .and_then(Value::as_str)
                .and_then(|k| definition_ty(ir, k));
            let response = entry
                .get("response")
                .and_then(Value::as_str)
                .and_then(|k| definition_ty(ir, k));
            let existing = table
                .iter_mut()
                .find(|m| m.name == *name && m.direction != MethodDirection::Notification);
            match existing {
                Some(m) => {
                    if let Some(request) = request {
                        m.params = Some(request);
                    }
                    if let Some(response) = response {
                        m.result = Some(response);
                    }
                }
                None => table.push(Method {
                    name: name.clone(),
                    type_name: String::new(),
                    direction: MethodDirection::ClientRequest,
                    params: Some(request.unwrap_or(Ty::Any)),
                    result: Some(response.unwrap_or(Ty::Any)),
                    scope: None,
                    since: None,
                    params_schema: None,
                    result_schema: None,
                }),
            }
        }
    }
}

fn find_method_maps<'v>(
    node: &'v Value,
    depth: usize,
    out: &mut Vec<&'v serde_json::Map<String, Value>>,
) {
    let Some(object) = node.as_object() else {
        return;
    };
    if depth > 8 {
        return;
    }
    if let Some(Value::Object(methods)) = object.get("methods")
        && methods
            .values()
            .all(|e| e.get("request").is_some_and(Value::is_string))
    {
        out.push(methods);
    }
    for (key, value) in object {
        if key != "methods" {
            find_method_maps(value, depth + 1, out);
        }
    }
}

/// The root `methods` map (OpenClaw): method name → `{scope, since}`. A method no message
/// declares is a client request whose params and result types are the definitions named after
/// it (`board.get` → `BoardGetParams`, `BoardGetResult`) when they exist.
fn apply_root_methods_map(ir: &Ir, doc: &SchemaDocument, table: &mut Vec<Method>) {
    let Some(Value::Object(map)) = doc.value().get("methods") else {
        return;
    };
    for (name, entry) in map {
        let text = |key: &str| entry.get(key).and_then(Value::as_str).map(str::to_owned);
        let index = match table.iter().position(|m| m.name == *name) {
            Some(i) => i,
            None => {
                let params = definition_named(ir, &format!("{}Params", names::pascal(name)));
                table.push(Method {
                    name: name.clone(),
                    type_name: String::new(),
                    direction: MethodDirection::ClientRequest,
                    params: Some(params.unwrap_or(Ty::Any)),
                    result: Some(Ty::Any),
                    scope: None,
                    since: None,
                    params_schema: None,
                    result_schema: None,
                });
                table.len() - 1
            }
        };
        let m = &mut table[index];
        if let Some(scope) = text("scope") {
            m.scope = Some(scope);
        }
        if let Some(since) = text("since") {
            m.since = Some(since);
        }
    }
}

/// The definition named after a request's params type (`ThreadListParams` → `ThreadListResult`)
/// or after the method (`thread.list` → `ThreadListResult`).
fn conventional_result(ir: &Ir, m: &Method) -> Option<Ty> {
    if let Some(Ty::Ref(params)) = &m.params
        && let Some(stem) = params.strip_suffix("Params")
        && let Some(result) = definition_named(ir, &format!("{stem}Result"))
    {
        return Some(result);
    }
    definition_named(ir, &format!("{}Result", names::pascal(&m.name)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn table(schema: Value) -> Vec<(String, MethodDirection, Option<Ty>, Option<Ty>)> {
        let doc = SchemaDocument::from_value(schema).unwrap();
        let ir = Ir::lower(&doc, "t.schema.json").unwrap();
        ir.method_table
            .into_iter()
            .map(|m| (m.name, m.direction, m.params, m.result))
            .collect()
    }

    fn r(name: &str) -> Option<Ty> {
        Some(Ty::Ref(name.to_owned()))
    }

    #[test]
    fn requests_with_an_id_notifications_without_and_the_sender_from_direction_or_name() {
        let request = |method: &str, params: &str| {
            json!({"type": "object", "required": ["id", "method"], "properties": {
                "id": {"type": "integer"}, "method": {"const": method},
                "params": {"$ref": format!("#/$defs/{params}")}}})
        };
        let got = table(json!({
            "oneOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/ServerRequest"}, {"$ref": "#/$defs/Up"}, {"$ref": "#/$defs/N"}],
            "$defs": {
                "A": request("a.get", "AGetParams"),
                "ServerRequest": request("ask", "AskParams"),
                "Up": {"x-agentwire-direction": "runtime-to-host", "oneOf": [request("up", "AskParams")]},
                "N": {"type": "object", "properties": {"method": {"enum": ["n1", "n2"]}}},
                "AGetParams": {"type": "object"}, "AGetResult": {"type": "string"},
                "AskParams": {"type": "object"}, "AskResult": {"type": "boolean"}}}));
        assert_eq!(
            got,
            vec![
                (
                    "a.get".into(),
                    MethodDirection::ClientRequest,
                    r("AGetParams"),
                    r("AGetResult")
                ),
                (
                    "ask".into(),
                    MethodDirection::ServerRequest,
                    r("AskParams"),
                    r("AskResult")
                ),
                (
                    "up".into(),
                    MethodDirection::ServerRequest,
                    r("AskParams"),
                    r("AskResult")
                ),
                ("n1".into(), MethodDirection::Notification, None, None),
                ("n2".into(), MethodDirection::Notification, None, None),
            ]
        );
    }

    #[test]
    fn a_schema_without_messages_has_no_methods() {
        assert!(table(json!({"$defs": {"A": {"type": "object", "properties": {"method": {"const": "GET"}}}}})).is_empty());
    }

    #[test]
    fn the_root_methods_map_adds_methods_scope_and_since() {
        let doc = SchemaDocument::from_value(json!({
            "oneOf": [{"type": "object", "required": ["id", "method"], "properties": {"id": {"type": "string"}, "method": {"type": "string"}}}],
            "methods": {"board.get": {"scope": "operator.read", "since": "2026.7"}, "ping": {"scope": "node", "since": "<=2026.7"}},
            "definitions": {"BoardGetParams": {"type": "object"}, "BoardGetResult": {"type": "object"}}}))
        .unwrap();
        let ir = Ir::lower(&doc, "t.schema.json").unwrap();
        let m = &ir.method_table;
        assert_eq!(m.len(), 2);
        assert_eq!(
            (m[0].name.as_str(), m[0].type_name.as_str()),
            ("board.get", "BoardGet")
        );
        assert_eq!(
            (&m[0].params, &m[0].result),
            (&r("BoardGetParams"), &r("BoardGetResult"))
        );
        assert_eq!(
            (m[0].scope.as_deref(), m[0].since.as_deref()),
            (Some("operator.read"), Some("2026.7"))
        );
        assert_eq!(
            (&m[1].params, &m[1].result),
            (&Some(Ty::Any), &Some(Ty::Any))
        );
        assert_eq!(
            (m[1].scope.as_deref(), m[1].since.as_deref()),
            (Some("node"), Some("<=2026.7"))
        );
    }

    #[test]
    fn identity_method_maps_name_params_and_results() {
        let got = table(json!({
            "x-cc-protocol": {"version": 1, "minimumCompatibleVersion": 1,
                "kernel": {"methods": {"plan/make": {"request": "PlanRequest", "response": "Plan"}}}},
            "oneOf": [{"type": "object", "required": ["id", "method"], "properties": {
                "id": {"type": "integer"}, "method": {"const": "plan/make"}, "params": {"type": "object"}}}],
            "$defs": {"PlanRequest": {"type": "object"}, "Plan": {"type": "string"}}}));
        assert_eq!(
            got,
            vec![(
                "plan/make".into(),
                MethodDirection::ClientRequest,
                r("PlanRequest"),
                r("Plan")
            )]
        );
    }
}
