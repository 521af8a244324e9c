//! The generators' tests, one binary: snapshots of each construct, the project's own protocols,
//! the real schemas compiled in every language, the generated validators against reference
//! validators, and fixture round trips.

mod kotlin;
mod own_protocols;
mod real_schemas;
mod round_trips;
mod snapshots;
mod validators;
