//! The JSON-RPC transport's tests, one binary: the framer and decoder alone, the peer over real
//! transports, and interop with other languages' NDJSON readers.

mod framing;
mod interop;
mod peer;
