//! Shared helpers of the integration tests.
#![allow(dead_code, unreachable_pub)]

pub mod view;
