//! Protocol identity: the name, wire version, minimum compatible version, carried versions and
//! features a schema document declares (our `x-agentwire` block or ChainlessChain's
//! `x-cc-protocol`), together with the document's digest.

use std::fmt;

use serde_json::{Map, Value};

use crate::canonical::Digest;
use crate::document::SchemaDocument;
use crate::pointer;
use crate::versions::WireVersion;

/// The root keyword of our identity block.
pub const AGENTWIRE_IDENTITY: &str = "x-agentwire";
/// The root keyword of ChainlessChain's identity block.
pub const CHAINLESSCHAIN_IDENTITY: &str = "x-cc-protocol";
/// Most versions one document may carry.
pub const MAX_DECLARED_VERSIONS: usize = 256;

/// Which block the identity was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentitySource {
    /// `x-agentwire` (docs/versions.md).
    Agentwire,
    /// ChainlessChain's `x-cc-protocol`.
    ChainlessChain,
}

/// What a schema document says about the protocol it describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolIdentity {
    /// The block the identity came from; `None` when the document declares none.
    pub source: Option<IdentitySource>,
    /// Protocol name (only `x-agentwire` carries one).
    pub name: Option<String>,
    /// Newest wire version the document describes.
    pub version: Option<WireVersion>,
    /// Oldest wire version a peer may speak.
    pub minimum_compatible_version: Option<WireVersion>,
    /// Every wire version the document carries, oldest first.
    pub versions: Vec<WireVersion>,
    /// Features advertised by the newest version, in document order.
    pub features: Vec<String>,
    /// The protocol digest of the document.
    pub digest: Digest,
}

/// What is wrong with an identity block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IdentityErrorKind {
    /// The block or one of its keys has the wrong JSON type.
    Shape,
    /// A version that is not dotted decimal numbers.
    Version,
    /// The versions are not strictly increasing, or `version` is not the newest of them.
    Order,
    /// `minimumCompatibleVersion` is newer than `version`.
    Minimum,
}

impl IdentityErrorKind {
    /// Stable code of the error.
    pub fn code(self) -> &'static str {
        match self {
            IdentityErrorKind::Shape => "identity.shape",
            IdentityErrorKind::Version => "identity.version",
            IdentityErrorKind::Order => "identity.order",
            IdentityErrorKind::Minimum => "identity.minimum",
        }
    }
}

/// A malformed identity block, with the JSON Pointer of the culprit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityError {
    /// What went wrong.
    pub kind: IdentityErrorKind,
    /// JSON Pointer into the document.
    pub pointer: String,
    /// A sentence a person understands.
    pub message: String,
}

impl IdentityError {
    fn new(kind: IdentityErrorKind, pointer: String, message: String) -> Self {
        IdentityError {
            kind,
            pointer,
            message,
        }
    }

    /// Stable code of the error.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }
}

impl fmt::Display for IdentityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {}: {}", self.code(), self.pointer, self.message)
    }
}

impl std::error::Error for IdentityError {}

impl SchemaDocument {
    /// The protocol identity the document declares: `x-agentwire` when present, else
    /// `x-cc-protocol`, else an identity with only the digest.
    pub fn identity(&self) -> Result<ProtocolIdentity, IdentityError> {
        read_identity(self.value(), self.digest())
    }
}

/// Reads the identity of a document value (see [`SchemaDocument::identity`]).
pub fn read_identity(root: &Value, digest: Digest) -> Result<ProtocolIdentity, IdentityError> {
    let (source, key) = if root.get(AGENTWIRE_IDENTITY).is_some() {
        (IdentitySource::Agentwire, AGENTWIRE_IDENTITY)
    } else if root.get(CHAINLESSCHAIN_IDENTITY).is_some() {
        (IdentitySource::ChainlessChain, CHAINLESSCHAIN_IDENTITY)
    } else {
        return Ok(ProtocolIdentity {
            source: None,
            name: None,
            version: None,
            minimum_compatible_version: None,
            versions: Vec::new(),
            features: Vec::new(),
            digest,
        });
    };
    let at = pointer::push("", key);
    let Some(Value::Object(block)) = root.get(key) else {
        return Err(IdentityError::new(
            IdentityErrorKind::Shape,
            at,
            format!("{key} must be an object"),
        ));
    };
    let name = match block.get("name") {
        None => None,
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(_) => {
            return Err(IdentityError::new(
                IdentityErrorKind::Shape,
                pointer::push(&at, "name"),
                "name must be a non-empty string".to_owned(),
            ));
        }
    };
    let version = read_version(block, &at, "version")?;
    let minimum = read_version(block, &at, "minimumCompatibleVersion")?;
    let versions = match block.get("versions") {
        None => version.iter().cloned().collect(),
        Some(Value::Array(items)) if items.len() <= MAX_DECLARED_VERSIONS => {
            let here = pointer::push(&at, "versions");
            let mut out: Vec<WireVersion> = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let v = WireVersion::from_json(item).map_err(|e| {
                    IdentityError::new(IdentityErrorKind::Version, format!("{here}/{i}"), e.message)
                })?;
                if out.last().is_some_and(|last| *last >= v) {
                    return Err(IdentityError::new(
                        IdentityErrorKind::Order,
                        format!("{here}/{i}"),
                        "versions must be listed oldest first, each once".to_owned(),
                    ));
                }
                out.push(v);
            }
            out
        }
        Some(_) => {
            return Err(IdentityError::new(
                IdentityErrorKind::Shape,
                pointer::push(&at, "versions"),
                format!("versions must be an array of at most {MAX_DECLARED_VERSIONS} versions"),
            ));
        }
    };
    if let Some(v) = &version
        && versions.last() != Some(v)
    {
        return Err(IdentityError::new(
            IdentityErrorKind::Order,
            pointer::push(&at, "version"),
            format!("version {v} must be the newest of the listed versions"),
        ));
    }
    if let (Some(min), Some(v)) = (&minimum, &version)
        && min > v
    {
        return Err(IdentityError::new(
            IdentityErrorKind::Minimum,
            pointer::push(&at, "minimumCompatibleVersion"),
            format!("minimumCompatibleVersion {min} is newer than version {v}"),
        ));
    }
    let features = match block.get("features") {
        None => Vec::new(),
        Some(Value::Array(items)) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let Value::String(s) = item else {
                    return Err(IdentityError::new(
                        IdentityErrorKind::Shape,
                        format!("{}/{i}", pointer::push(&at, "features")),
                        "features must be strings".to_owned(),
                    ));
                };
                out.push(s.clone());
            }
            out
        }
        Some(_) => {
            return Err(IdentityError::new(
                IdentityErrorKind::Shape,
                pointer::push(&at, "features"),
                "features must be an array of strings".to_owned(),
            ));
        }
    };
    Ok(ProtocolIdentity {
        source: Some(source),
        name,
        version,
        minimum_compatible_version: minimum,
        versions,
        features,
        digest,
    })
}

fn read_version(
    block: &Map<String, Value>,
    at: &str,
    key: &str,
) -> Result<Option<WireVersion>, IdentityError> {
    match block.get(key) {
        None => Ok(None),
        Some(v) => WireVersion::from_json(v).map(Some).map_err(|e| {
            IdentityError::new(
                IdentityErrorKind::Version,
                pointer::push(at, key),
                e.message,
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn identity(v: Value) -> Result<ProtocolIdentity, IdentityError> {
        SchemaDocument::from_value(v).unwrap().identity()
    }

    #[test]
    fn reads_agentwire_block() {
        let id = identity(json!({"x-agentwire": {
            "name": "roll-runtime", "version": "1.5", "minimumCompatibleVersion": "1.0",
            "versions": ["1.0", "1.2", "1.5"], "features": ["a", "b"]
        }}))
        .unwrap();
        assert_eq!(id.source, Some(IdentitySource::Agentwire));
        assert_eq!(id.name.as_deref(), Some("roll-runtime"));
        assert_eq!(id.version.unwrap().as_str(), "1.5");
        assert_eq!(id.minimum_compatible_version.unwrap().as_str(), "1.0");
        let versions: Vec<&str> = id.versions.iter().map(WireVersion::as_str).collect();
        assert_eq!(versions, ["1.0", "1.2", "1.5"]);
        assert_eq!(id.features, ["a", "b"]);
    }

    #[test]
    fn reads_chainlesschain_block_with_integer_versions() {
        let id = identity(json!({"x-cc-protocol": {
            "version": 1, "minimumCompatibleVersion": 1, "features": ["thread_turn_item"]
        }}))
        .unwrap();
        assert_eq!(id.source, Some(IdentitySource::ChainlessChain));
        assert_eq!(id.name, None);
        assert_eq!(id.version.unwrap().as_str(), "1");
        assert_eq!(id.versions.len(), 1);
    }

    #[test]
    fn no_block_gives_digest_only() {
        let id = identity(json!({"type": "object"})).unwrap();
        assert_eq!(id.source, None);
        assert!(id.versions.is_empty());
        assert!(id.digest.as_str().starts_with("sha256:"));
    }

    #[test]
    fn rejects_bad_blocks() {
        let err = identity(json!({"x-agentwire": {"version": "1.2", "versions": ["1.2", "1.0"]}}))
            .unwrap_err();
        assert_eq!(
            (err.kind, err.pointer.as_str()),
            (IdentityErrorKind::Order, "/x-agentwire/versions/1")
        );
        let err = identity(json!({"x-agentwire": {"version": "1.1", "versions": ["1.0", "1.2"]}}))
            .unwrap_err();
        assert_eq!(err.kind, IdentityErrorKind::Order);
        let err =
            identity(json!({"x-agentwire": {"version": "1.0", "minimumCompatibleVersion": "1.1"}}))
                .unwrap_err();
        assert_eq!(err.kind, IdentityErrorKind::Minimum);
        let err = identity(json!({"x-agentwire": {"version": "v1"}})).unwrap_err();
        assert_eq!(
            (err.kind, err.pointer.as_str()),
            (IdentityErrorKind::Version, "/x-agentwire/version")
        );
        let err = identity(json!({"x-cc-protocol": []})).unwrap_err();
        assert_eq!(err.kind, IdentityErrorKind::Shape);
    }
}
