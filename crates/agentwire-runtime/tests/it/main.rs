//! The runtime's tests, one binary: the core without I/O, the running core over a real SQLite
//! log, attachments, and agent processes.

mod support;

mod attachments;
mod core;
mod process;
mod running;
