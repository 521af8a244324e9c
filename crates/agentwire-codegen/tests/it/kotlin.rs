//! One `kotlinc` run for every Kotlin program of these tests: the compiler's start-up and the two
//! large generated files (ChainlessChain, OpenClaw) are most of the cost, so the generated
//! bindings of the real schemas and of the project's own protocols are compiled once, together
//! with each test's main program (each in its own package), and each test runs its own main
//! class from the shared classes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The compiled classes; the first caller compiles, the others wait for it.
pub(crate) fn classes() -> &'static Path {
    static CLASSES: OnceLock<PathBuf> = OnceLock::new();
    CLASSES.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("codegen-kotlin");
        std::fs::create_dir_all(&dir).unwrap();
        let mut sources = crate::real_schemas::kotlin_sources(&dir);
        sources.extend(crate::validators::kotlin_mains(&dir));
        sources.push(crate::round_trips::kotlin_main_file(&dir));
        sources.push(crate::round_trips::kotlin_open_union_main_file(&dir));
        let out = dir.join("classes");
        let _ = std::fs::remove_dir_all(&out);
        agentwire_testkit::run_ok(
            agentwire_testkit::require_kotlinc()
                .args(["-J-Xmx2g", "-nowarn"])
                .args(&sources)
                .arg("-d")
                .arg(&out),
        );
        out
    })
}

/// Runs `main_class` from the shared classes with `args`; its standard output.
pub(crate) fn run(main_class: &str, args: &[&Path]) -> Vec<u8> {
    agentwire_testkit::run_ok(
        agentwire_testkit::require_kotlin()
            .arg("-classpath")
            .arg(classes())
            .arg(main_class)
            .args(args),
    )
    .stdout
}

/// A Kotlin main program in `package` that reads NDJSON cases `{key: ..., "m": value}` (with the
/// `parseJson` of the generated package `json`), evaluates `arms` (the arms of a `when
/// (case[key])`, each giving `listOf(encoded value, note)`) on each, and prints `[true, encoded,
/// note]` per case, or `[false, null, error]` when decoding throws IllegalArgumentException.
pub(crate) fn decode_cases_main(
    package: &str,
    json: &str,
    imports: &str,
    key: &str,
    arms: &str,
) -> String {
    format!(
        r#"package {package}

import {json}.parseJson
import {json}.writeJson
{imports}
fun main(args: Array<String>) {{
    val out = StringBuilder()
    java.io.File(args[0]).forEachLine(Charsets.UTF_8) {{ line ->
        if (line.isNotBlank()) {{
            val case = parseJson(line) as Map<*, *>
            val m = case["m"]
            val row: List<Any?> = try {{
                listOf<Any?>(true) + when (case["{key}"]) {{
{arms}                    else -> throw IllegalStateException("no case " + case["{key}"])
                }}
            }} catch (e: IllegalArgumentException) {{
                listOf(false, null, e.javaClass.simpleName + ": " + e.message)
            }}
            out.append(writeJson(row)).append('\n')
        }}
    }}
    print(out)
}}
"#
    )
}
