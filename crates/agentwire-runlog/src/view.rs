//! Timeline views of a coerced run: text for a terminal and a self-contained HTML page (inline
//! CSS and script, no network). Both show the issues first, then the steps with their tool calls
//! and approvals, then the timeline with unknown events and bad lines folded.

use std::fmt::Write as _;

use serde_json::Value;

use crate::coerce::{CoerceResult, IssueLevel};
use crate::state::{
    ApprovalState, ApprovalStatus, RunState, RunStatus, StepState, StepStatus, ToolCallState,
    ToolCallStatus,
};

/// Longest raw JSON shown inline in the terminal view; longer text is cut with an ellipsis.
pub const MAX_INLINE_JSON_CHARS: usize = 160;

const LEVELS: [IssueLevel; 4] = [
    IssueLevel::Fixed,
    IssueLevel::Degraded,
    IssueLevel::Dropped,
    IssueLevel::Info,
];

fn status_name(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Idle => "idle",
        RunStatus::Running => "running",
        RunStatus::Paused => "paused",
        RunStatus::Done => "done",
        RunStatus::Error => "error",
    }
}

fn step_status_name(status: StepStatus) -> &'static str {
    match status {
        StepStatus::Pending => "pending",
        StepStatus::Running => "running",
        StepStatus::Done => "done",
        StepStatus::Error => "error",
    }
}

fn approval_status_name(status: ApprovalStatus) -> &'static str {
    match status {
        ApprovalStatus::Pending => "pending",
        ApprovalStatus::Approved => "approved",
        ApprovalStatus::Edited => "edited",
        ApprovalStatus::Rejected => "rejected",
    }
}

fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}

/// One line summing up the run.
pub fn summary_line(state: &RunState) -> String {
    let done = state
        .steps
        .iter()
        .filter(|s| s.status == StepStatus::Done)
        .count();
    let mut out = format!(
        "status {}{} · {done}/{} steps done · {} left · {} tool calls",
        status_name(state.status),
        state
            .paused_reason
            .map(|r| format!(" ({})", r.as_str()))
            .unwrap_or_default(),
        state.steps.len(),
        state.steps_left,
        state.tool_calls.len(),
    );
    if state.totals.failed_tool_calls > 0 {
        let _ = write!(out, " ({} failed)", state.totals.failed_tool_calls);
    }
    let _ = write!(out, " · {} approvals", state.approvals.len());
    if state.pending_approvals > 0 {
        let _ = write!(out, " ({} pending)", state.pending_approvals);
    }
    if state.totals.tokens > 0 || state.totals.cost > 0.0 {
        let _ = write!(
            out,
            " · {} tokens · ${:.4}",
            state.totals.tokens, state.totals.cost
        );
    }
    out
}

struct Paint {
    color: bool,
}

impl Paint {
    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }
    fn bold(&self, t: &str) -> String {
        self.paint("1", t)
    }
    fn dim(&self, t: &str) -> String {
        self.paint("2", t)
    }
    fn red(&self, t: &str) -> String {
        self.paint("31", t)
    }
    fn green(&self, t: &str) -> String {
        self.paint("32", t)
    }
    fn yellow(&self, t: &str) -> String {
        self.paint("33", t)
    }
    fn level(&self, level: IssueLevel) -> String {
        let name = format!("{:<8}", level.as_str());
        match level {
            IssueLevel::Fixed => self.green(&name),
            IssueLevel::Degraded => self.yellow(&name),
            IssueLevel::Dropped => self.red(&name),
            IssueLevel::Info => self.dim(&name),
        }
    }
}

fn step_mark(step: &StepState) -> &'static str {
    match step.status {
        StepStatus::Pending => "·",
        StepStatus::Running => "▶",
        StepStatus::Done => "✓",
        StepStatus::Error => "✗",
    }
}

/// The terminal timeline. `color` adds ANSI colors (for a terminal only).
/// The calls and approvals a step lists by key, indexed once per render (a scan per key would
/// make a long run's view quadratic).
struct Lookup<'s> {
    calls: ahash::AHashMap<&'s str, &'s ToolCallState>,
    approvals: ahash::AHashMap<&'s str, &'s ApprovalState>,
}

impl<'s> Lookup<'s> {
    fn new(state: &'s RunState) -> Self {
        let mut calls = ahash::AHashMap::with_capacity(state.tool_calls.len());
        for call in &state.tool_calls {
            // The first call of a key, as the step's list means.
            calls.entry(call.call_id.as_str()).or_insert(call);
        }
        // The latest round of an approval key.
        let approvals = state
            .approvals
            .iter()
            .map(|a| (a.approval_id.as_str(), a))
            .collect();
        Lookup { calls, approvals }
    }

    fn call(&self, key: &str) -> Option<&'s ToolCallState> {
        self.calls.get(key).copied()
    }

    fn approval(&self, key: &str) -> Option<&'s ApprovalState> {
        self.approvals.get(key).copied()
    }
}

pub fn render_text(result: &CoerceResult, state: &RunState, color: bool) -> String {
    let p = Paint { color };
    let mut out = String::new();
    let run = state.run_id.as_deref().unwrap_or("(no run)");
    let _ = writeln!(out, "{} {}", p.bold("Run"), p.bold(run));
    if let Some(goal) = &state.goal {
        let _ = writeln!(out, "goal    {goal}");
    }
    let _ = writeln!(out, "{}", summary_line(state));

    let counts: Vec<String> = LEVELS
        .iter()
        .map(|l| format!("{} {}", result.issues_at(*l).count(), l.as_str()))
        .collect();
    let _ = writeln!(out, "\n{} ({})", p.bold("Issues"), counts.join(", "));
    if result.issues.is_empty() {
        let _ = writeln!(out, "  none: the log was valid as written");
    }
    for issue in &result.issues {
        let _ = writeln!(
            out,
            "  {} line {:<4} {:<24} {}",
            p.level(issue.level),
            issue.line,
            issue.code,
            issue.message
        );
    }

    let _ = writeln!(out, "\n{}", p.bold("Steps"));
    if state.steps.is_empty() {
        let _ = writeln!(out, "  (no steps)");
    }
    let lookup = Lookup::new(state);
    for step in &state.steps {
        let mark = match step.status {
            StepStatus::Done => p.green(step_mark(step)),
            StepStatus::Error => p.red(step_mark(step)),
            StepStatus::Running => p.yellow(step_mark(step)),
            StepStatus::Pending => p.dim(step_mark(step)),
        };
        let _ = write!(
            out,
            "  {mark} {} {} [{}]",
            step.id,
            step.title.as_deref().unwrap_or(""),
            step_status_name(step.status)
        );
        if step.retries > 0 {
            let _ = write!(out, " retried {}×", step.retries);
        }
        out.push('\n');
        if let Some(err) = &step.error {
            let _ = writeln!(
                out,
                "      {} {}",
                p.red("error"),
                cut(err.as_str(), MAX_INLINE_JSON_CHARS)
            );
        }
        for key in &step.tool_calls {
            if let Some(call) = lookup.call(key) {
                let status = match call.status {
                    ToolCallStatus::Pending => p.yellow("pending"),
                    ToolCallStatus::Ok => p.green("ok"),
                    ToolCallStatus::Error => p.red("error"),
                };
                let _ = write!(
                    out,
                    "      tool {} {status}",
                    call.name.as_deref().unwrap_or("(unknown tool)")
                );
                if let Some(ms) = &call.ms {
                    let _ = write!(out, " {ms} ms");
                }
                if let Some(t) = call.tokens {
                    let _ = write!(out, " {t} tokens");
                }
                if let Some(args) = &call.args {
                    let _ = write!(out, " args {}", cut(args.as_str(), MAX_INLINE_JSON_CHARS));
                }
                out.push('\n');
            }
        }
        for key in &step.approvals {
            if let Some(a) = lookup.approval(key) {
                let status = approval_status_name(a.status);
                let status = if a.status == ApprovalStatus::Pending {
                    p.yellow(status)
                } else {
                    status.to_owned()
                };
                let _ = writeln!(
                    out,
                    "      approval {} [{}] {status}: {}",
                    a.approval_id,
                    a.risk.map_or("?", |r| r.as_str()),
                    a.summary.as_deref().unwrap_or("")
                );
            }
        }
    }

    let _ = writeln!(out, "\n{}", p.bold("Timeline"));
    for (i, event) in result.renderable.iter().enumerate() {
        let folded = !result.is_valid_entry(i) || event.kind().is_none();
        let mut line = format!("  #{:<5} {:<18}", event.seq, event.event_type);
        if folded {
            let what = if result.is_valid_entry(i) {
                "unknown event, folded"
            } else {
                "bad line, folded"
            };
            let _ = write!(
                line,
                " ({what}) {}",
                cut(
                    &compact(&Value::Object(event.payload.clone())),
                    MAX_INLINE_JSON_CHARS
                )
            );
            let _ = writeln!(out, "{}", p.dim(&line));
        } else {
            let mut fields = event.payload.clone();
            fields.shift_remove("args");
            fields.shift_remove("result");
            fields.shift_remove("preview");
            if !fields.is_empty() {
                let _ = write!(
                    line,
                    " {}",
                    cut(&compact(&Value::Object(fields)), MAX_INLINE_JSON_CHARS)
                );
            }
            let _ = writeln!(out, "{line}");
        }
    }

    let dropped: Vec<_> = result
        .malformed
        .iter()
        .filter(|m| m.text.is_some())
        .collect();
    if !dropped.is_empty() {
        let _ = writeln!(
            out,
            "\n{}",
            p.bold("Lines that are not JSON (kept, not shown above)")
        );
        for m in dropped {
            let _ = writeln!(
                out,
                "  line {:<4} {}",
                m.line,
                p.dim(&cut(m.text.as_deref().unwrap_or(""), MAX_INLINE_JSON_CHARS))
            );
        }
    }
    out
}

fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

const PAGE_STYLE: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
main{max-width:980px;margin:0 auto;padding:20px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px}
.summary{color:#4a5365}.goal{font-size:15px;margin:4px 0}
.banner{border-radius:6px;padding:10px 14px;margin:16px 0;background:#eef6ee;border:1px solid #b9dcb9}
.banner.warn{background:#fff7e6;border-color:#f0c36d}.banner.bad{background:#fdecec;border-color:#e8a3a3}
.banner ul{margin:6px 0 0;padding-left:18px}.lvl{display:inline-block;min-width:66px;font-weight:600}
.lvl-fixed{color:#1f7a1f}.lvl-degraded{color:#9a6400}.lvl-dropped{color:#b42318}.lvl-info{color:#667085}
.step{background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:8px 12px;margin:8px 0}
.step-head{font-weight:600}.badge{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;margin-left:6px;background:#e4e7ec}
.s-done{background:#d3f0d3}.s-error{background:#f8d0d0}.s-running{background:#fde9b8}.s-pending{background:#e4e7ec}
.item{margin:4px 0 0 18px}.risk-high,.risk-critical{color:#b42318;font-weight:600}
.approval.pending{background:#fff7e6;border-radius:4px;padding:2px 6px}
.ev{background:#fff;border:1px solid #e4e7ec;border-radius:4px;margin:4px 0;padding:4px 8px}
.ev.folded{background:#f2f4f7;color:#475467}.seq{color:#667085;display:inline-block;min-width:48px}
.type{font-family:ui-monospace,Menlo,Consolas,monospace;font-weight:600}
pre{background:#0f172a;color:#e2e8f0;padding:8px;border-radius:4px;overflow:auto;font-size:12px}
summary{cursor:pointer}button{margin:0 6px 0 0}
"#;

const PAGE_SCRIPT: &str = r#"
(function () {
  function setAll(open) {
    var nodes = document.querySelectorAll('details.raw');
    for (var i = 0; i < nodes.length; i++) { nodes[i].open = open; }
  }
  document.getElementById('expand-all').addEventListener('click', function () { setAll(true); });
  document.getElementById('collapse-all').addEventListener('click', function () { setAll(false); });
})();
"#;

/// A self-contained HTML page of the run: issues banner, steps with tool calls and approvals,
/// the timeline with expandable raw JSON, and the lines that could not be repaired, folded.
pub fn render_html(result: &CoerceResult, state: &RunState) -> String {
    let mut h = String::with_capacity(16 * 1024 + result.renderable.len() * 512);
    let run = state.run_id.as_deref().unwrap_or("(no run)");
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>Run {}</title><style>{PAGE_STYLE}</style></head><body><main>\n",
        esc(run)
    );
    let _ = writeln!(h, "<h1 id=\"run\">Run {}</h1>", esc(run));
    if let Some(goal) = &state.goal {
        let _ = writeln!(h, "<div class=\"goal\" id=\"goal\">{}</div>", esc(goal));
    }
    let _ = writeln!(
        h,
        "<div class=\"summary\" id=\"summary\">{}</div>",
        esc(&summary_line(state))
    );

    let count = |l| result.issues_at(l).count();
    let class = if count(IssueLevel::Degraded) + count(IssueLevel::Dropped) > 0 {
        "banner bad"
    } else if count(IssueLevel::Fixed) > 0 {
        "banner warn"
    } else {
        "banner"
    };
    let _ = write!(
        h,
        "<section class=\"{class}\" id=\"issues\"><strong>Issues:</strong> "
    );
    let counts: Vec<String> = LEVELS
        .iter()
        .map(|l| format!("{} {}", count(*l), l.as_str()))
        .collect();
    let _ = write!(h, "{}", esc(&counts.join(", ")));
    if result.issues.is_empty() {
        h.push_str(" — the log was valid as written.");
    } else {
        h.push_str("<ul>");
        for issue in &result.issues {
            let _ = write!(
                h,
                "<li><span class=\"lvl lvl-{0}\">{0}</span> line {1} <code>{2}</code> {3}</li>",
                issue.level.as_str(),
                issue.line,
                esc(issue.code),
                esc(&issue.message)
            );
        }
        h.push_str("</ul>");
    }
    h.push_str("</section>\n");

    h.push_str("<h2>Steps</h2><section id=\"steps\">\n");
    let lookup = Lookup::new(state);
    for step in &state.steps {
        let status = step_status_name(step.status);
        let _ = write!(
            h,
            "<div class=\"step\" data-step=\"{}\"><div class=\"step-head\">{} {}<span class=\"badge s-{status}\">{status}</span>",
            esc(&step.id),
            esc(&step.id),
            esc(step.title.as_deref().unwrap_or("")),
        );
        if step.retries > 0 {
            let _ = write!(h, "<span class=\"badge\">retried {}×</span>", step.retries);
        }
        h.push_str("</div>");
        if let Some(err) = &step.error {
            let _ = write!(
                h,
                "<div class=\"item\">error: <code>{}</code></div>",
                esc(err.as_str())
            );
        }
        for key in &step.tool_calls {
            if let Some(call) = lookup.call(key) {
                let status = match call.status {
                    ToolCallStatus::Pending => "pending",
                    ToolCallStatus::Ok => "ok",
                    ToolCallStatus::Error => "error",
                };
                let _ = write!(
                    h,
                    "<div class=\"item tool\">tool <span class=\"type\">{}</span> <span class=\"badge s-{}\">{status}</span>",
                    esc(call.name.as_deref().unwrap_or("(unknown tool)")),
                    if status == "ok" {
                        "done"
                    } else if status == "error" {
                        "error"
                    } else {
                        "running"
                    },
                );
                if let Some(ms) = &call.ms {
                    let _ = write!(h, " {ms} ms");
                }
                if let Some(t) = call.tokens {
                    let _ = write!(h, " · {t} tokens");
                }
                if let Some(c) = &call.cost {
                    let _ = write!(h, " · ${c}");
                }
                let mut raw = serde_json::Map::new();
                if let Some(a) = &call.args {
                    raw.insert("args".into(), a.to_value());
                }
                if let Some(r) = &call.result {
                    raw.insert("result".into(), r.to_value());
                }
                if let Some(e) = &call.error {
                    raw.insert("error".into(), e.to_value());
                }
                if !raw.is_empty() {
                    let _ = write!(
                        h,
                        "<details class=\"raw\"><summary>args and result</summary><pre>{}</pre></details>",
                        esc(&pretty(&Value::Object(raw)))
                    );
                }
                h.push_str("</div>");
            }
        }
        for key in &step.approvals {
            if let Some(a) = lookup.approval(key) {
                let status = approval_status_name(a.status);
                let risk = a.risk.map_or("unknown", |r| r.as_str());
                let _ = write!(
                    h,
                    "<div class=\"item approval {status}\">approval <b>{}</b> <span class=\"risk-{risk}\">risk {risk}</span> \
                     <span class=\"badge\">{}</span> {}",
                    esc(&a.approval_id),
                    if a.status == ApprovalStatus::Pending {
                        "waiting for approval"
                    } else {
                        status
                    },
                    esc(a.summary.as_deref().unwrap_or("")),
                );
                if let Some(preview) = &a.preview {
                    let _ = write!(
                        h,
                        "<details class=\"raw\"><summary>preview</summary><pre>{}</pre></details>",
                        esc(&pretty(&preview.to_value()))
                    );
                }
                h.push_str("</div>");
            }
        }
        h.push_str("</div>\n");
    }
    if state.steps.is_empty() {
        h.push_str("<p>No steps.</p>");
    }
    h.push_str("</section>\n");

    h.push_str(
        "<h2>Timeline</h2><div><button id=\"expand-all\" type=\"button\">Expand all</button>\
         <button id=\"collapse-all\" type=\"button\">Collapse all</button></div><section id=\"timeline\">\n",
    );
    for (i, event) in result.renderable.iter().enumerate() {
        let valid = result.is_valid_entry(i);
        let known = event.kind().is_some();
        let note = if !valid {
            " — line could not be repaired (folded, not executed)"
        } else if !known {
            " — unknown event (folded)"
        } else {
            ""
        };
        let _ = write!(
            h,
            "<div class=\"ev{}\" data-valid=\"{valid}\"><details class=\"raw\"><summary><span class=\"seq\">#{}</span> \
             <span class=\"type\">{}</span>{}</summary><pre>{}</pre></details></div>",
            if valid && known { "" } else { " folded" },
            event.seq,
            esc(&event.event_type),
            esc(note),
            esc(&pretty(&event.to_value())),
        );
        h.push('\n');
    }
    h.push_str("</section>\n");

    if !result.malformed.is_empty() {
        h.push_str("<h2>Malformed lines</h2><section id=\"malformed\">\n");
        for m in &result.malformed {
            let body = match (&m.raw, &m.text) {
                (Some(raw), _) => pretty(raw),
                (None, Some(text)) => text.clone(),
                (None, None) => String::new(),
            };
            let _ = writeln!(
                h,
                "<details class=\"raw ev folded\"><summary>line {}{}</summary><pre>{}</pre></details>",
                m.line,
                if m.text.is_some() { " (not JSON)" } else { "" },
                esc(&body)
            );
        }
        h.push_str("</section>\n");
    }
    let _ = writeln!(h, "</main><script>{PAGE_SCRIPT}</script></body></html>");
    h
}
