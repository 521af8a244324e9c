//! What lint reports: the `AWnnn` codes with their fixed severities and names, one finding
//! (code, pointer, sentence), and the counts of a run.

use std::fmt;

use serde::Serialize;

/// How bad a finding is. Only errors make `agentwire lint` exit 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The document is broken: validators will reject it, disagree about it, or it can never
    /// accept an instance it plainly means to accept.
    Error,
    /// Probably a mistake, or a policy the protocol should state explicitly.
    Warning,
    /// Worth knowing; nothing to fix.
    Info,
}

impl Severity {
    /// `error`, `warning` or `info`.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a finding is about. Each code is stable (`AW001` …) and has one severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum LintCode {
    /// `AW001`: a `$ref` (or a `discriminator.mapping` entry) whose target does not exist.
    UnresolvedRef,
    /// `AW002`: a `$ref` into another document.
    ExternalRef,
    /// `AW003`: a reference cycle that never descends into the instance.
    RefCycle,
    /// `AW004`: `$schema` names a dialect other than draft-07 and 2020-12.
    UnknownDraft,
    /// `AW005`: a keyword whose value has the wrong shape, or a non-schema where a schema belongs.
    MalformedKeyword,
    /// `AW010`: a keyword that is not part of the document's draft (nor an annotation, a vendor
    /// `x-*` key or `discriminator`).
    UnknownKeyword,
    /// `AW011`: a keyword of the other supported draft, which this draft ignores.
    OtherDraftKeyword,
    /// `AW020`: a `type` value that is not a JSON Schema type.
    InvalidType,
    /// `AW021`: bounds that no value can meet (`minimum > maximum`, `minLength > maxLength` …).
    ContradictoryBounds,
    /// `AW022`: a `pattern` or `patternProperties` key that is not an ECMA-262 regular expression.
    InvalidPattern,
    /// `AW030`: an `enum` that lists the same JSON value twice.
    DuplicateEnumValue,
    /// `AW031`: a `required` name that the object's `properties` do not declare.
    RequiredUndeclared,
    /// `AW032`: a `required` name that `additionalProperties: false` forbids.
    RequiredForbidden,
    /// `AW040`: an object with `properties` and no explicit `additionalProperties` policy.
    OpenObject,
    /// `AW050`: a definition that nothing references (rooted documents).
    UnreachableDefinition,
    /// `AW051`: most definitions are referenced by nothing: the document is a registry.
    RegistryDocument,
}

impl LintCode {
    /// Every code, in code order.
    pub const ALL: &'static [LintCode] = &[
        LintCode::UnresolvedRef,
        LintCode::ExternalRef,
        LintCode::RefCycle,
        LintCode::UnknownDraft,
        LintCode::MalformedKeyword,
        LintCode::UnknownKeyword,
        LintCode::OtherDraftKeyword,
        LintCode::InvalidType,
        LintCode::ContradictoryBounds,
        LintCode::InvalidPattern,
        LintCode::DuplicateEnumValue,
        LintCode::RequiredUndeclared,
        LintCode::RequiredForbidden,
        LintCode::OpenObject,
        LintCode::UnreachableDefinition,
        LintCode::RegistryDocument,
    ];

    /// The stable code, `AW` and three digits.
    pub fn code(self) -> &'static str {
        match self {
            LintCode::UnresolvedRef => "AW001",
            LintCode::ExternalRef => "AW002",
            LintCode::RefCycle => "AW003",
            LintCode::UnknownDraft => "AW004",
            LintCode::MalformedKeyword => "AW005",
            LintCode::UnknownKeyword => "AW010",
            LintCode::OtherDraftKeyword => "AW011",
            LintCode::InvalidType => "AW020",
            LintCode::ContradictoryBounds => "AW021",
            LintCode::InvalidPattern => "AW022",
            LintCode::DuplicateEnumValue => "AW030",
            LintCode::RequiredUndeclared => "AW031",
            LintCode::RequiredForbidden => "AW032",
            LintCode::OpenObject => "AW040",
            LintCode::UnreachableDefinition => "AW050",
            LintCode::RegistryDocument => "AW051",
        }
    }

    /// A short kebab-case name of the rule, for tables and documentation.
    pub fn name(self) -> &'static str {
        match self {
            LintCode::UnresolvedRef => "unresolved-ref",
            LintCode::ExternalRef => "external-ref",
            LintCode::RefCycle => "ref-cycle",
            LintCode::UnknownDraft => "unknown-draft",
            LintCode::MalformedKeyword => "malformed-keyword",
            LintCode::UnknownKeyword => "unknown-keyword",
            LintCode::OtherDraftKeyword => "other-draft-keyword",
            LintCode::InvalidType => "invalid-type",
            LintCode::ContradictoryBounds => "contradictory-bounds",
            LintCode::InvalidPattern => "invalid-pattern",
            LintCode::DuplicateEnumValue => "duplicate-enum-value",
            LintCode::RequiredUndeclared => "required-undeclared",
            LintCode::RequiredForbidden => "required-forbidden",
            LintCode::OpenObject => "open-object",
            LintCode::UnreachableDefinition => "unreachable-definition",
            LintCode::RegistryDocument => "registry-document",
        }
    }

    /// The severity every finding with this code has.
    pub fn severity(self) -> Severity {
        match self {
            LintCode::UnresolvedRef
            | LintCode::ExternalRef
            | LintCode::RefCycle
            | LintCode::UnknownDraft
            | LintCode::MalformedKeyword
            | LintCode::InvalidType
            | LintCode::ContradictoryBounds
            | LintCode::InvalidPattern
            | LintCode::RequiredForbidden => Severity::Error,
            LintCode::UnknownKeyword
            | LintCode::OtherDraftKeyword
            | LintCode::DuplicateEnumValue
            | LintCode::RequiredUndeclared
            | LintCode::OpenObject
            | LintCode::UnreachableDefinition => Severity::Warning,
            LintCode::RegistryDocument => Severity::Info,
        }
    }
}

impl fmt::Display for LintCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl Serialize for LintCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.code())
    }
}

/// One lint finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable code (`AW001` …).
    pub code: LintCode,
    /// Severity (always `code.severity()`).
    pub severity: Severity,
    /// JSON Pointer of the culprit inside the document (empty for the whole document).
    pub pointer: String,
    /// A sentence a person understands.
    pub message: String,
}

impl Finding {
    pub(super) fn new(code: LintCode, pointer: impl Into<String>, message: String) -> Self {
        Finding {
            code,
            severity: code.severity(),
            pointer: pointer.into(),
            message,
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() {
            "(root)"
        } else {
            self.pointer.as_str()
        };
        write!(
            f,
            "{} {} {}: {}",
            self.severity, self.code, at, self.message
        )
    }
}

/// How many findings of each severity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LintSummary {
    /// Findings with severity `error`.
    pub errors: usize,
    /// Findings with severity `warning`.
    pub warnings: usize,
    /// Findings with severity `info`.
    pub infos: usize,
}

impl LintSummary {
    /// Counts findings by severity.
    pub fn of(findings: &[Finding]) -> Self {
        let mut summary = LintSummary::default();
        for finding in findings {
            match finding.severity {
                Severity::Error => summary.errors += 1,
                Severity::Warning => summary.warnings += 1,
                Severity::Info => summary.infos += 1,
            }
        }
        summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_ordered() {
        let codes: Vec<&str> = LintCode::ALL.iter().map(|c| c.code()).collect();
        let mut sorted = codes.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(codes, sorted);
    }
}
