//! One module per command family.

pub(crate) mod baseline;
pub(crate) mod compat;
pub(crate) mod conformance;
pub(crate) mod demo;
pub(crate) mod digest;
pub(crate) mod events;
pub(crate) mod fmt;
pub(crate) mod r#gen;
pub(crate) mod lint;
pub(crate) mod project;
pub(crate) mod proxy;
pub(crate) mod runlog;
pub(crate) mod schema;
pub(crate) mod serve;
pub(crate) mod validate;

/// Arguments that cannot be used together or as given: exit 2 with a stable `usage.*` code.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct Usage {
    code: &'static str,
    message: String,
}

impl Usage {
    pub(crate) fn new(code: &'static str, message: impl Into<String>) -> Usage {
        Usage {
            code,
            message: message.into(),
        }
    }

    /// Stable code of the error.
    pub(crate) fn code(&self) -> &'static str {
        self.code
    }
}
