//! Typed bindings from one protocol schema: the IR lowering ([`ir`]) and one generator per
//! language (Rust, TypeScript, Python, Kotlin, Swift), byte-for-byte deterministic, plus the
//! staleness check behind `agentwire gen --check`.
//!
//! Knows nothing of any particular protocol: everything comes from the schema document.

pub(crate) mod emit;
pub mod error;
pub mod ir;
pub mod methods;
pub mod names;
pub mod versions;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agentwire_schema::SchemaDocument;

pub use error::CodegenError;
pub use ir::Ir;

/// A target language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Language {
    /// Rust with serde.
    Rust,
    /// TypeScript.
    TypeScript,
    /// Python 3.9+ typing.
    Python,
    /// Kotlin.
    Kotlin,
    /// Swift Codable.
    Swift,
}

impl Language {
    /// Every language, in the order output is produced.
    pub const ALL: [Language; 5] = [
        Language::Rust,
        Language::TypeScript,
        Language::Python,
        Language::Kotlin,
        Language::Swift,
    ];

    /// The short name used on the command line and as the output folder.
    pub fn code(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::TypeScript => "ts",
            Language::Python => "py",
            Language::Kotlin => "kt",
            Language::Swift => "swift",
        }
    }

    /// Parses `rust`/`rs`, `ts`/`typescript`, `py`/`python`, `kt`/`kotlin`, `swift`.
    pub fn parse(name: &str) -> Result<Language, CodegenError> {
        match name.trim().to_ascii_lowercase().as_str() {
            "rust" | "rs" => Ok(Language::Rust),
            "ts" | "typescript" => Ok(Language::TypeScript),
            "py" | "python" => Ok(Language::Python),
            "kt" | "kotlin" => Ok(Language::Kotlin),
            "swift" => Ok(Language::Swift),
            _ => Err(CodegenError::UnknownLanguage(name.to_owned())),
        }
    }

    /// Parses a comma-separated list; order and duplicates do not matter.
    pub fn parse_list(list: &str) -> Result<Vec<Language>, CodegenError> {
        let mut out = Vec::new();
        for part in list.split(',').filter(|p| !p.trim().is_empty()) {
            out.push(Language::parse(part)?);
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

/// Generation settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// File stem of the outputs (`protocol` → `rust/protocol.rs`, `kt/Protocol.kt`, …).
    pub base_name: String,
    /// Kotlin package of the generated file.
    pub kotlin_package: String,
    /// Name of the root type (the document's own `oneOf` of messages or frames); `None` gives
    /// `<ProtocolName>Message` or `ProtocolMessage`.
    pub root_name: Option<String>,
    /// `PROTOCOL_VERSION` for a schema whose identity block has none.
    pub protocol_version: Option<String>,
    /// `PROTOCOL_MIN_VERSION` for a schema whose identity block has none.
    pub min_version: Option<String>,
    /// Generate from the all-versions view of a document annotated with wire versions
    /// ([`versions::all_versions`]): types that decode the messages of every version. Rust only.
    pub all_versions: bool,
    /// Rust types used in place of generated ones, keyed by `Type` (the generated type becomes
    /// an alias of the given path), `Type.property` (that property's string type, through
    /// `Option` and `Vec`) or `*.property` (the property of every object). The path must
    /// (de)serialize as the schema's type does.
    pub rust_types: BTreeMap<String, String>,
}

impl Options {
    /// Defaults derived from the schema's file name: `run-events.schema.json` → base name
    /// `run_events`, Kotlin package `agentwire.generated.run_events`.
    pub fn for_schema(schema_name: &str) -> Options {
        let file = Path::new(schema_name)
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or(schema_name);
        let stem = file.strip_suffix(".json").unwrap_or(file);
        let stem = stem.strip_suffix(".schema").unwrap_or(stem);
        let base_name = names::snake(stem);
        Options {
            kotlin_package: format!("agentwire.generated.{base_name}"),
            root_name: None,
            protocol_version: None,
            min_version: None,
            all_versions: false,
            rust_types: BTreeMap::new(),
            base_name,
        }
    }
}

/// One generated file, its path relative to the output folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedFile {
    /// Relative path (`<lang>/<file>`).
    pub path: PathBuf,
    /// Full contents.
    pub contents: String,
}

/// Generates the bindings for `languages`.
pub fn generate(ir: &Ir, languages: &[Language], options: &Options) -> Vec<GeneratedFile> {
    languages
        .iter()
        .map(|&lang| emit::generate(ir, lang, options))
        .collect()
}

/// Loads, lowers and generates in one call.
pub fn generate_from_document(
    doc: &SchemaDocument,
    schema_name: &str,
    languages: &[Language],
    options: &Options,
) -> Result<Vec<GeneratedFile>, CodegenError> {
    let mut ir = if options.all_versions {
        if let Some(other) = languages.iter().find(|&&l| l != Language::Rust) {
            return Err(CodegenError::AllVersionsLanguage(other.code()));
        }
        let view = versions::all_versions(doc)?;
        let mut ir = Ir::lower_with_root_name(&view, schema_name, options.root_name.as_deref())?;
        // The header names the document given, not the view built from it.
        ir.digest = doc.digest().as_str().to_owned();
        ir
    } else {
        Ir::lower_with_root_name(doc, schema_name, options.root_name.as_deref())?
    };
    for (given, slot, field) in [
        (
            &options.protocol_version,
            &mut ir.identity.version,
            "version",
        ),
        (
            &options.min_version,
            &mut ir.identity.min_version,
            "minimum version",
        ),
    ] {
        let Some(given) = given else { continue };
        match slot {
            None => *slot = Some(ir::Version::Text(given.clone())),
            Some(ir::Version::Text(t)) if t == given => {}
            Some(ir::Version::Integer(i)) if i.to_string() == *given => {}
            Some(existing) => {
                let schema = match existing {
                    ir::Version::Text(t) => t.clone(),
                    ir::Version::Integer(i) => i.to_string(),
                };
                return Err(CodegenError::IdentityConflict {
                    field,
                    schema,
                    given: given.clone(),
                });
            }
        }
    }
    check_rust_types(&ir, &options.rust_types)?;
    Ok(generate(&ir, languages, options))
}

/// Checks that every entry of [`Options::rust_types`] applies to the schema.
fn check_rust_types(ir: &Ir, rust_types: &BTreeMap<String, String>) -> Result<(), CodegenError> {
    let fail = |key: &str, message: String| CodegenError::RustType {
        key: key.to_owned(),
        message,
    };
    let string_field = |field: &ir::Field| {
        let mut ty = &field.ty;
        while let ir::Ty::Nullable(inner) | ir::Ty::Array(inner) = ty {
            ty = inner;
        }
        ir.string_leaf(ty)
    };
    for (key, path) in rust_types {
        if path.trim().is_empty() {
            return Err(fail(key, "the Rust type is empty".to_owned()));
        }
        let Some((owner, wire)) = key.split_once('.') else {
            if ir.get(key).is_none() {
                return Err(fail(key, "the schema has no type of that name".to_owned()));
            }
            continue;
        };
        let objects: Vec<&ir::ObjectType> = ir
            .types
            .iter()
            .filter(|t| owner == "*" || t.name == owner)
            .filter_map(|t| match &t.kind {
                ir::TypeKind::Object(o) => Some(o),
                _ => None,
            })
            .collect();
        let fields: Vec<&ir::Field> = objects
            .iter()
            .flat_map(|o| o.fields.iter().filter(|f| f.wire == wire))
            .collect();
        if fields.is_empty() {
            return Err(fail(
                key,
                "no object of the schema has that property".to_owned(),
            ));
        }
        if !fields.iter().all(|f| string_field(f)) {
            return Err(fail(
                key,
                "the property is not a string (or an array or nullable of strings)".to_owned(),
            ));
        }
    }
    Ok(())
}

/// Why a file on disk does not match what would be generated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Staleness {
    /// The file does not exist.
    Missing,
    /// The file exists with other contents.
    Differs,
}

/// Compares generated files with those under `out_dir`; returns every stale or missing one, in
/// the order of `files`.
pub fn check(out_dir: &Path, files: &[GeneratedFile]) -> Vec<(PathBuf, Staleness)> {
    let mut out = Vec::new();
    for file in files {
        match std::fs::read(out_dir.join(&file.path)) {
            Ok(bytes) if bytes == file.contents.as_bytes() => {}
            Ok(_) => out.push((file.path.clone(), Staleness::Differs)),
            Err(_) => out.push((file.path.clone(), Staleness::Missing)),
        }
    }
    out
}

/// Writes generated files under `out_dir`, creating folders; a file whose contents are already
/// right is not rewritten.
pub fn write(out_dir: &Path, files: &[GeneratedFile]) -> Result<Vec<PathBuf>, CodegenError> {
    let mut written = Vec::new();
    for file in files {
        let path = out_dir.join(&file.path);
        if std::fs::read(&path).is_ok_and(|b| b == file.contents.as_bytes()) {
            continue;
        }
        let io = |source| CodegenError::Io {
            path: path.display().to_string(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::write(&path, &file.contents).map_err(io)?;
        written.push(file.path.clone());
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn generate_ts(schema: serde_json::Value, options: &Options) -> Result<String, CodegenError> {
        let doc = SchemaDocument::from_value(schema)?;
        let files =
            generate_from_document(&doc, "t.schema.json", &[Language::TypeScript], options)?;
        Ok(files[0].contents.clone())
    }

    #[test]
    fn versions_from_the_options_fill_a_schema_without_identity() {
        let mut options = Options::for_schema("t.schema.json");
        options.protocol_version = Some("2.1".into());
        options.min_version = Some("2.0".into());
        let ts = generate_ts(json!({"$defs": {"A": {"type": "string"}}}), &options).unwrap();
        assert!(ts.contains("export const PROTOCOL_VERSION = \"2.1\" as const;"));
        assert!(ts.contains("export const PROTOCOL_MIN_VERSION = \"2.0\" as const;"));
        // Nothing to list: no empty constant arrays.
        assert!(!ts.contains("PROTOCOL_FEATURES"));
        assert!(!ts.contains("export const METHODS"));
    }

    #[test]
    fn a_version_other_than_the_schemas_is_an_error() {
        let schema = json!({"x-agentwire": {"name": "p", "version": "1.2", "minimumCompatibleVersion": "1.0"},
            "$defs": {"A": {"type": "string"}}});
        let mut options = Options::for_schema("t.schema.json");
        options.protocol_version = Some("1.2".into());
        assert!(generate_ts(schema.clone(), &options).is_ok());
        options.min_version = Some("0.9".into());
        let err = generate_ts(schema, &options).unwrap_err();
        assert_eq!(err.code(), "codegen.identity-conflict");
    }

    fn generate_rust(schema: serde_json::Value, options: &Options) -> Result<String, CodegenError> {
        let doc = SchemaDocument::from_value(schema)?;
        let files = generate_from_document(&doc, "t.schema.json", &[Language::Rust], options)?;
        Ok(files[0].contents.clone())
    }

    fn versioned() -> serde_json::Value {
        json!({"x-agentwire": {"name": "p", "version": "1.1", "minimumCompatibleVersion": "1.0",
            "versions": ["1.0", "1.1"]},
            "$defs": {
                "Id": {"type": "string"},
                "Count": {"type": "integer", "minimum": 0},
                "Item": {"type": "object", "additionalProperties": false,
                    "required": ["threadId", "ids", "count", "later"],
                    "properties": {"threadId": {"$ref": "#/$defs/Id"},
                        "ids": {"type": "array", "items": {"$ref": "#/$defs/Id"}},
                        "count": {"$ref": "#/$defs/Count"},
                        "later": {"type": "string", "x-agentwire-since": "1.1"}}}}})
    }

    #[test]
    fn rust_types_replace_types_and_string_properties() {
        let mut options = Options::for_schema("t.schema.json");
        options.rust_types = [
            ("Count", "u64"),
            ("*.threadId", "crate::ThreadId"),
            ("Item.ids", "crate::ItemId"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let rust = generate_rust(versioned(), &options).unwrap();
        assert!(rust.contains("pub type Count = u64;\n"), "{rust}");
        assert!(rust.contains("pub thread_id: crate::ThreadId,\n"), "{rust}");
        assert!(
            rust.contains("pub ids: ::std::vec::Vec<crate::ItemId>,\n"),
            "{rust}"
        );
        // Without --all-versions the property of 1.1 only stays required.
        assert!(
            rust.contains("pub later: ::std::string::String,\n"),
            "{rust}"
        );
    }

    #[test]
    fn a_rust_type_that_applies_to_nothing_is_an_error() {
        for (key, why) in [
            ("Missing", "no type"),
            ("*.nothing", "no object"),
            ("Item.count", "not a string"),
        ] {
            let mut options = Options::for_schema("t.schema.json");
            options.rust_types.insert(key.to_owned(), "u64".to_owned());
            let err = generate_rust(versioned(), &options).unwrap_err();
            assert_eq!(err.code(), "codegen.rust-type", "{key}");
            assert!(err.to_string().contains(why), "{key}: {err}");
        }
    }

    #[test]
    fn all_versions_makes_later_properties_optional_and_names_the_document() {
        let mut options = Options::for_schema("t.schema.json");
        options.all_versions = true;
        let rust = generate_rust(versioned(), &options).unwrap();
        assert!(
            rust.contains("pub later: ::std::option::Option<::std::string::String>,\n"),
            "{rust}"
        );
        let digest = SchemaDocument::from_value(versioned()).unwrap().digest();
        assert!(rust.starts_with(&format!(
            "// generated by agentwire gen from t.schema.json {}; do not edit\n",
            digest.as_str()
        )));
    }

    #[test]
    fn all_versions_is_rust_only() {
        let mut options = Options::for_schema("t.schema.json");
        options.all_versions = true;
        let doc = SchemaDocument::from_value(versioned()).unwrap();
        let err = generate_from_document(
            &doc,
            "t.schema.json",
            &[Language::Rust, Language::TypeScript],
            &options,
        )
        .unwrap_err();
        assert_eq!(err.code(), "codegen.all-versions-language");
    }
}
