//! The client's tests, one binary: the recovery manager against the resume rules, and the Roll
//! client against a scripted runtime.

mod recovery;
mod roll_client;
