//! One module per command family.

pub(crate) mod baseline;
pub(crate) mod compat;
pub(crate) mod digest;
pub(crate) mod events;
pub(crate) mod fmt;
pub(crate) mod r#gen;
pub(crate) mod lint;
pub(crate) mod project;
pub(crate) mod runlog;
pub(crate) mod schema;
pub(crate) mod validate;
