//! Approvals: the three wire shapes (1.0 `approval.required` + `approval.respond`, 1.1 legacy
//! `approval.request`, 1.2+ interaction-shaped `approval.request`, named here from the generated
//! types), the decision a host returns, and the display aids that ride inside the free-form
//! `preview` and `display` JSON.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::constants::{
    MAX_APPROVAL_EXPLANATION_CHARS, MAX_DIFF_PATH_CHARS, MAX_DIFF_UNIFIED_CHARS, js_length,
};
use crate::generated as g;

/// An approval waiting for a decision (the `approval` object in every shape).
pub type PendingApproval = g::SharedPendingApproval;

/// `approval.request` params in 1.1: the request is named by its JSON-RPC id.
pub type LegacyApprovalRequestParams = g::ApprovalRequestParamsSince11;

/// Interaction sensitivity; the protocol has exactly one value.
pub type Sensitivity = g::SharedInteractionSensitivity;

/// `approval.request` params in 1.2+: an interaction with an absolute deadline.
pub type ApprovalRequestParams = g::ApprovalRequestParamsSince12;

/// `approval.respond` params (1.0 only; later versions answer `CAPABILITY_UNAVAILABLE`).
pub use g::ApprovalRespondParams;

/// Approve or reject, in `approval.respond`.
pub type ApprovalVerdict = g::ApprovalRespondParamsDecision;

/// The host's answer to `approval.request` (every version). Anything else — `defer`, an
/// unknown key — fails validation, and the runtime then fails closed.
///
/// Written by hand: a tagged union matched by field (`ApprovalDecision::Reject { reason }`),
/// where the generator makes one struct per variant carrying its tag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "camelCase", deny_unknown_fields)]
pub enum ApprovalDecision {
    /// A struct variant so that `deny_unknown_fields` also refuses `{"decision":"approve","reason":…}`.
    Approve {},
    Reject {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

impl ApprovalRequestParams {
    /// The 1.2+ rule the schema cannot express: the interaction's turn is the approval's turn.
    pub fn turn_matches(&self) -> bool {
        self.turn_id == self.approval.turn_id
    }
}

/// The model-written note for a shell approval (`preview.explanation`), trimmed, when `preview`
/// is a plain object and the note has 1..100 characters; otherwise `None`. A display aid only.
pub fn get_approval_explanation(approval: &PendingApproval) -> Option<String> {
    explanation_of_preview(&approval.preview)
}

/// [`get_approval_explanation`] for a bare `preview` value.
pub fn explanation_of_preview(preview: &Value) -> Option<String> {
    let text = preview.as_object()?.get("explanation")?.as_str()?.trim();
    let length = js_length(text);
    (1..=MAX_APPROVAL_EXPLANATION_CHARS)
        .contains(&length)
        .then(|| text.to_owned())
}

/// Whether an edit creates a file or modifies one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FileChangeKind {
    Create,
    Modify,
}

/// The file-change preview of an edit (`preview.diff`, and `diff` of a write's display).
/// Unknown keys are ignored: the shape is open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileChangeDiff {
    pub path: String,
    pub change: FileChangeKind,
    pub added: u64,
    pub removed: u64,
    pub hunks: u64,
    /// Absent: statistics only (a huge file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unified: Option<String>,
    /// The unified text was cut at its limit.
    pub truncated: bool,
}

/// What a successful write shows (`tool.completed.display`, or `display.value` of an operation
/// view): the legacy human summary and the diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChangeDisplay {
    pub text: String,
    pub diff: FileChangeDiff,
}

fn parse_diff(value: &Value) -> Option<FileChangeDiff> {
    value.as_object()?;
    let diff: FileChangeDiff = serde_json::from_value(value.clone()).ok()?;
    let path_ok = (1..=MAX_DIFF_PATH_CHARS).contains(&js_length(&diff.path));
    let unified_ok = diff
        .unified
        .as_deref()
        .is_none_or(|u| js_length(u) <= MAX_DIFF_UNIFIED_CHARS);
    (path_ok && unified_ok).then_some(diff)
}

/// The file-change preview of an edit approval, when `preview.diff` is valid.
pub fn get_approval_diff_preview(approval: &PendingApproval) -> Option<FileChangeDiff> {
    parse_diff(approval.preview.as_object()?.get("diff")?)
}

/// The `{text, diff}` display of a successful write, when valid. Pass `tool.completed.display`,
/// or `display.value` of an operation view (whose display is a ledger envelope).
pub fn get_file_change_display(display: &Value) -> Option<FileChangeDisplay> {
    let object = display.as_object()?;
    let text = object.get("text")?.as_str()?.to_owned();
    let diff = parse_diff(object.get("diff")?)?;
    Some(FileChangeDisplay { text, diff })
}
