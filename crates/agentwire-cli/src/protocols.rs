//! Built-in protocols: addressable by name wherever a command takes a schema
//! (`--protocol NAME [--version V]`), served from the schemas compiled into the binary.

use agentwire_roll::ProtocolVersion;
use agentwire_schema::SchemaDocument;
use anyhow::Context;

/// Names of the built-in protocols.
pub(crate) const NAMES: &[&str] = &[agentwire_roll::schema::PROTOCOL_NAME];

/// One built-in protocol at one wire version.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Builtin {
    pub(crate) name: &'static str,
    pub(crate) version: ProtocolVersion,
}

impl Builtin {
    /// Looks `name` up; without `version`, the protocol's newest version.
    pub(crate) fn find(name: &str, version: Option<&str>) -> anyhow::Result<Builtin> {
        if name != agentwire_roll::schema::PROTOCOL_NAME {
            return Err(crate::cmd::Usage::new(
                "usage.unknown-protocol",
                format!(
                    "unknown protocol {name:?}; built-in protocols: {}",
                    NAMES.join(", ")
                ),
            )
            .into());
        }
        let version = match version {
            Some(text) => text.parse::<ProtocolVersion>().map_err(|error| {
                crate::cmd::Usage::new("usage.unknown-version", format!("protocol {name}: {error}"))
            })?,
            None => agentwire_roll::LATEST_VERSION,
        };
        Ok(Builtin {
            name: agentwire_roll::schema::PROTOCOL_NAME,
            version,
        })
    }

    /// The strict schema of this version, in canonical text.
    pub(crate) fn export_text(self) -> &'static str {
        agentwire_roll::schema::export_text(self.version)
    }

    /// The strict schema of this version, loaded.
    pub(crate) fn document(self) -> anyhow::Result<SchemaDocument> {
        SchemaDocument::from_slice(self.export_text().as_bytes())
            .with_context(|| format!("built-in schema {} {}", self.name, self.version))
    }

    /// How reports name the schema, e.g. `roll-runtime 1.3`.
    pub(crate) fn label(self) -> String {
        format!("{} {}", self.name, self.version)
    }
}
