//! The integration tests of agentwire-schema, one module per area, in one test binary; their
//! data is under `tests/data/`, their snapshots under `tests/it/snapshots/`.

// Tests fail loudly on broken setup.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod canonical_real;
mod compat_direction;
mod compat_real;
mod compat_rules;
mod compat_versions;
mod cross_validators;
mod export_real_schemas;
mod export_rules;
mod fast_differential;
mod hostile_inputs;
mod lint_real_schemas;
mod lint_rules;
mod project_roll_runtime;
mod project_roundtrip;
mod project_rules;
mod validate_basics;
mod validate_bytes_in;
mod validate_chainlesschain;
mod validate_openclaw;
mod versions_export;
