//! Roles and operator scopes: what a connection holds, what each method and event needs, and the
//! hierarchy between them. Default-deny: a scope is held only when granted (or implied by one
//! granted), a method the gateway does not classify needs `operator.admin`, and an event it does
//! not classify goes to nobody.

/// Satisfies every `operator.*` scope.
pub const ADMIN: &str = "operator.admin";
/// Reads: health, status, presence, sessions and their history, chat and agent events.
pub const READ: &str = "operator.read";
/// Acts: starts turns, creates sessions.
pub const WRITE: &str = "operator.write";
/// Sees and decides approvals.
pub const APPROVALS: &str = "operator.approvals";

/// Whether `held` (a connection's granted scopes, under `role`) satisfies `needed`.
pub fn satisfies(role: &str, held: &[String], needed: &str) -> bool {
    if role != "operator" {
        // A non-operator role holds only scopes of its own prefix, matched exactly.
        return needed.starts_with(&format!("{role}.")) && held.iter().any(|scope| scope == needed);
    }
    held.iter().any(|scope| implies(scope, needed))
}

/// Whether holding `scope` satisfies `needed`, for an operator.
fn implies(scope: &str, needed: &str) -> bool {
    if scope == needed {
        // `operator.sessions.archive` grants nothing on its own; every other exact match does.
        return needed != "operator.sessions.archive";
    }
    match scope {
        ADMIN => needed.starts_with("operator."),
        WRITE => matches!(
            needed,
            READ | "operator.talk"
                | "operator.sessions.read"
                | "operator.sessions.write"
                | "operator.sessions.archive"
        ),
        READ => needed == "operator.sessions.read",
        "operator.sessions.write" => needed == "operator.sessions.read",
        _ => false,
    }
}

/// Who may call a method or receive an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Every authenticated connection.
    Open,
    /// Connections holding the scope (or one implying it).
    Scope(&'static str),
}

/// What calling `method` needs; `None` for a method the gateway does not serve.
pub fn method_scope(method: &str) -> Option<Access> {
    Some(Access::Scope(match method {
        "health" => return Some(Access::Open),
        "status" | "system-presence" | "sessions.list" | "sessions.subscribe" | "chat.history" => {
            READ
        }
        "sessions.create" | "chat.send" | "agent" => WRITE,
        "exec.approval.resolve" => APPROVALS,
        _ => return None,
    }))
}

/// The methods served, in the order `hello-ok` lists them.
pub const METHODS: &[&str] = &[
    "health",
    "status",
    "system-presence",
    "sessions.list",
    "sessions.create",
    "sessions.subscribe",
    "chat.history",
    "chat.send",
    "agent",
    "exec.approval.resolve",
];

/// The events sent, in the order `hello-ok` lists them.
pub const EVENTS: &[&str] = &[
    "connect.challenge",
    "tick",
    "presence",
    "shutdown",
    "chat",
    "agent",
    "sessions.changed",
    "exec.approval.requested",
    "exec.approval.resolved",
];

/// Who may receive `event`; `None` (nobody) for an event not listed.
pub fn event_scope(event: &str) -> Option<Access> {
    match event {
        "tick" | "presence" | "health" | "shutdown" => Some(Access::Open),
        "chat" | "agent" | "sessions.changed" => Some(Access::Scope(READ)),
        "exec.approval.requested" | "exec.approval.resolved" => Some(Access::Scope(APPROVALS)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(scopes: &[&str]) -> Vec<String> {
        scopes.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_hierarchy_implies_what_it_says_and_nothing_else() {
        let admin = held(&[ADMIN]);
        for needed in [
            READ,
            WRITE,
            APPROVALS,
            "operator.pairing",
            "operator.future",
        ] {
            assert!(satisfies("operator", &admin, needed), "{needed}");
        }
        let write = held(&[WRITE]);
        assert!(satisfies("operator", &write, READ));
        assert!(satisfies("operator", &write, "operator.sessions.write"));
        assert!(!satisfies("operator", &write, APPROVALS));
        assert!(!satisfies("operator", &write, ADMIN));
        let read = held(&[READ]);
        assert!(satisfies("operator", &read, "operator.sessions.read"));
        assert!(!satisfies("operator", &read, WRITE));
        assert!(!satisfies("operator", &held(&[]), READ));
        assert!(!satisfies(
            "operator",
            &held(&["operator.sessions.archive"]),
            "operator.sessions.archive"
        ));
        assert!(satisfies("operator", &held(&[APPROVALS]), APPROVALS));
        assert!(!satisfies("operator", &held(&[APPROVALS]), READ));
        // A node holds only node scopes, exactly.
        assert!(!satisfies("node", &held(&[ADMIN]), READ));
        assert!(satisfies("node", &held(&["node.invoke"]), "node.invoke"));
    }

    #[test]
    fn every_listed_method_and_event_is_classified() {
        for method in METHODS {
            assert!(method_scope(method).is_some(), "{method}");
        }
        assert_eq!(method_scope("config.set"), None);
        assert_eq!(method_scope("health"), Some(Access::Open));
        assert_eq!(method_scope("chat.send"), Some(Access::Scope(WRITE)));
        for event in EVENTS.iter().filter(|e| **e != "connect.challenge") {
            assert!(event_scope(event).is_some(), "{event}");
        }
        assert_eq!(event_scope("plugin.secret"), None);
    }
}
