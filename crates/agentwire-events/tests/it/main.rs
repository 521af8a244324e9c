//! The event log's tests, one binary (the kill -9 test is its own harness-less binary): the
//! shared contract on both engines, and what each engine does beyond it.

mod support;

mod conformance;
mod engines;
