//! The baseline policy: whether a new document may replace the frozen one, decided from their
//! wire versions and the compatibility report between them.

use crate::compat::{Change, CompatReport, compat};
use crate::document::SchemaDocument;
use crate::versions::WireVersion;

/// What freezing a schema over an existing baseline amounts to (see [`freeze_decision`]).
#[derive(Debug, Clone, PartialEq)]
pub enum FreezeDecision {
    /// No baseline yet: write it.
    Create,
    /// The baseline already holds exactly this document.
    Unchanged,
    /// The wire version was bumped and nothing breaks a version still supported: replace it.
    Bumped(CompatReport),
    /// Same wire version, only additive changes, and the caller allowed that: replace it.
    Additive(CompatReport),
    /// Refused: same wire version (pass the additive permission to replace it when nothing breaks).
    SameVersion(CompatReport),
    /// Refused: changes break a version the new document still claims to support.
    Breaking(CompatReport),
    /// Refused: the new wire version is older than the baseline's.
    Downgrade {
        /// The baseline's version.
        baseline: String,
        /// The new document's version.
        new: String,
    },
    /// Refused: a document does not declare its wire version.
    NoVersion,
}

impl FreezeDecision {
    /// Whether the baseline may be (or already is) written.
    pub fn allows_write(&self) -> bool {
        matches!(
            self,
            FreezeDecision::Create
                | FreezeDecision::Unchanged
                | FreezeDecision::Bumped(_)
                | FreezeDecision::Additive(_)
        )
    }

    /// Stable code of the decision.
    pub fn code(&self) -> &'static str {
        match self {
            FreezeDecision::Create => "baseline.created",
            FreezeDecision::Unchanged => "baseline.unchanged",
            FreezeDecision::Bumped(_) => "baseline.bumped",
            FreezeDecision::Additive(_) => "baseline.additive",
            FreezeDecision::SameVersion(_) => "baseline.same-version",
            FreezeDecision::Breaking(_) => "baseline.breaking",
            FreezeDecision::Downgrade { .. } => "baseline.downgrade",
            FreezeDecision::NoVersion => "baseline.no-version",
        }
    }

    /// The comparison with the old baseline, when one was made.
    pub fn report(&self) -> Option<&CompatReport> {
        match self {
            FreezeDecision::Bumped(r)
            | FreezeDecision::Additive(r)
            | FreezeDecision::SameVersion(r)
            | FreezeDecision::Breaking(r) => Some(r),
            _ => None,
        }
    }

    /// A sentence a person understands.
    pub fn describe(&self) -> String {
        match self {
            FreezeDecision::Create => "baseline written".to_owned(),
            FreezeDecision::Unchanged => "baseline already up to date".to_owned(),
            FreezeDecision::Bumped(_) => "wire version bumped; baseline replaced".to_owned(),
            FreezeDecision::Additive(r) => {
                format!(
                    "same wire version, {} additive change(s); baseline replaced",
                    r.changes.len()
                )
            }
            FreezeDecision::SameVersion(r) => format!(
                "refused: the wire version was not bumped ({} change(s), {} breaking); bump it, or allow additive re-freezing",
                r.changes.len(),
                r.breaking().count()
            ),
            FreezeDecision::Breaking(r) => format!(
                "refused: {} breaking change(s) against a version the new schema still supports",
                r.breaking().count()
            ),
            FreezeDecision::Downgrade { baseline, new } => {
                format!("refused: wire version {new} is older than the baseline's {baseline}")
            }
            FreezeDecision::NoVersion => {
                "refused: both documents must declare a wire version (x-agentwire or x-cc-protocol)"
                    .to_owned()
            }
        }
    }
}

/// Decides whether `new` may replace the frozen `baseline`.
///
/// A missing baseline is created. Otherwise the wire versions (identity) decide: a newer version
/// may replace the baseline as long as no breaking change touches a version the new document
/// still supports (a change in version `V`, or in the baseline's version for single-version
/// documents, is tolerated only when `V` is below the new `minimumCompatibleVersion`); the same
/// version is refused, unless `allow_additive` and nothing breaks; an older version is refused.
pub fn freeze_decision(
    baseline: Option<&SchemaDocument>,
    new: &SchemaDocument,
    allow_additive: bool,
) -> Result<FreezeDecision, crate::identity::IdentityError> {
    let Some(baseline) = baseline else {
        return Ok(FreezeDecision::Create);
    };
    if baseline.value() == new.value() {
        return Ok(FreezeDecision::Unchanged);
    }
    let old_id = baseline.identity()?;
    let new_id = new.identity()?;
    let (Some(old_version), Some(new_version)) = (old_id.version.clone(), new_id.version.clone())
    else {
        return Ok(FreezeDecision::NoVersion);
    };
    if new_version < old_version {
        return Ok(FreezeDecision::Downgrade {
            baseline: old_version.as_str().to_owned(),
            new: new_version.as_str().to_owned(),
        });
    }
    let report = compat(baseline, new);
    if new_version == old_version {
        return Ok(if report.is_compatible() && allow_additive {
            FreezeDecision::Additive(report)
        } else if report.is_compatible() {
            FreezeDecision::SameVersion(report)
        } else {
            FreezeDecision::Breaking(report)
        });
    }
    let still_supported = |change: &Change| {
        let affected = change
            .version
            .as_deref()
            .and_then(|v| WireVersion::parse(v).ok())
            .unwrap_or_else(|| old_version.clone());
        new_id
            .minimum_compatible_version
            .as_ref()
            .is_none_or(|min| affected >= *min)
    };
    if report.breaking().any(still_supported) {
        Ok(FreezeDecision::Breaking(report))
    } else {
        Ok(FreezeDecision::Bumped(report))
    }
}
