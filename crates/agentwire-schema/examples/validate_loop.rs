//! Parses and validates one workload of the validation benchmark through the fast path, a
//! fixed number of times, for instruction counts that do not depend on the machine's load:
//!
//! ```sh
//! scripts/bench.sh --quick --only tasklens-small    # writes target/bench-validate/*.json
//! cargo build --release -p agentwire-schema --example validate_loop
//! valgrind --tool=callgrind target/release/examples/validate_loop tasklens-small 20
//! callgrind_annotate --inclusive=yes callgrind.out.* | grep -E 'fast::(parse|Parsed::is_valid_at)$'
//! ```
//!
//! The inclusive counts of `fast::parse` and `fast::Parsed::is_valid_at`, divided by
//! `passes × messages`, are the per-message instruction counts of parsing and of validating.

use std::error::Error;
use std::path::Path;

use agentwire_schema::SchemaDocument;
use agentwire_schema::fast::{FastSchema, Tape, parse};
use serde_json::Value;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let name = args
        .next()
        .ok_or("usage: validate_loop WORKLOAD [PASSES]")?;
    let passes: usize = args.next().map_or(Ok(20), |p| p.parse())?;
    let path = Path::new("target/bench-validate").join(format!("{name}.json"));
    let workload: Value = serde_json::from_slice(&std::fs::read(&path)?)?;
    let schema = workload["schema"]
        .as_str()
        .ok_or("the workload names no schema")?;
    let doc = SchemaDocument::open(Path::new(schema))?;
    let fast = FastSchema::compile(&doc)?;
    let messages: Vec<&str> = workload["messages"]
        .as_array()
        .ok_or("the workload has no messages")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let mut tape = Tape::new();
    let mut valid = 0usize;
    for _ in 0..passes {
        for m in &messages {
            if let Ok(parsed) = parse(m.as_bytes(), &mut tape)
                && parsed.is_valid_at(&fast, fast.root(), "") == Some(true)
            {
                valid += 1;
            }
        }
    }
    println!(
        "{name}: {} messages x {passes} passes, {valid} valid",
        messages.len()
    );
    Ok(())
}
