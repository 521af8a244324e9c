//! The HTML page of a run: self-contained (inline CSS and script, no network), with the issues'
//! banner, the steps with their tool calls and approvals, the timeline with expandable raw JSON
//! and the malformed lines, written from a coerced result or from passes over a log.

use std::borrow::Cow;
use std::io;

use serde_json::Value;

use super::{LEVELS, Lookup, approval_status_name, level_index, step_status_name, summary_line};
use crate::coerce::{CoerceResult, Issue, IssueLevel, LineItem, LinePlan};
use crate::event::RunEvent;
use crate::state::{
    ApprovalState, ApprovalStatus, Deriver, RunState, ToolCallState, ToolCallStatus,
};

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
/// [`write_html`] into a string.
pub fn render_html(result: &CoerceResult, state: &RunState) -> String {
    let mut page = Vec::with_capacity(16 * 1024 + result.renderable.len() * 512);
    // Writing into a vector cannot fail.
    let _ = write_html(&mut page, result, state);
    // Every piece written is a `str`.
    String::from_utf8(page).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The page of [`render_html`], written to `out` as it is made.
pub fn write_html(
    out: &mut impl io::Write,
    result: &CoerceResult,
    state: &RunState,
) -> io::Result<()> {
    let counts = LEVELS.map(|l| result.issues_at(l).count());
    write_html_head(out, state, &counts)?;
    for issue in &result.issues {
        write_html_issue(out, issue)?;
    }
    write_html_steps(out, state, !result.issues.is_empty())?;
    for (i, event) in result.renderable.iter().enumerate() {
        write_html_entry(out, event, result.is_valid_entry(i))?;
    }
    out.write_all(b"</section>\n")?;
    if !result.malformed.is_empty() {
        out.write_all(MALFORMED_HEAD.as_bytes())?;
        for m in &result.malformed {
            write_html_malformed(out, m.line, m.raw.as_ref(), m.text.as_deref())?;
        }
        out.write_all(b"</section>\n")?;
    }
    write_html_end(out)
}

/// What [`write_html_by_line`] wrote a page of: the run state and the counts a caller reports.
#[derive(Debug, Clone, PartialEq)]
pub struct WrittenPage {
    /// The run state the page shows.
    pub state: RunState,
    /// Valid events (`meta.events`).
    pub events: usize,
    /// Issues listed.
    pub issues: usize,
}

/// [`write_html`] of a log coerced line by line: the same page, written from passes over the
/// log (the state, the issue counts and the issues' list first, then the timeline with the
/// malformed lines beside it; a list or section over a bound is dropped and written from a
/// pass of its own), so only the state and those bounded sections are held, never the events
/// or the page.
pub fn write_html_by_line(
    out: &mut impl io::Write,
    plan: &LinePlan<'_>,
) -> io::Result<WrittenPage> {
    let mut deriver = Deriver::new();
    let mut counts = [0usize; 4];
    let (mut events, mut malformed) = (0usize, 0usize);
    // The issues' list is rendered during this pass while it is short; past the bound, it is
    // written from a pass of its own.
    let mut listed = Some(Vec::new());
    for (item, issues) in plan.items() {
        for issue in &issues {
            counts[level_index(issue.level)] += 1;
            if let Some(list) = &mut listed {
                write_html_issue(list, issue)?;
                if list.len() > MAX_HELD_SECTION_BYTES {
                    listed = None;
                }
            }
        }
        match &item {
            Some(LineItem::Event(e) | LineItem::Synthesized(e)) => {
                events += 1;
                deriver.push(e);
            }
            Some(LineItem::Degraded { .. } | LineItem::Dropped { .. }) => malformed += 1,
            None => {}
        }
    }
    let state = deriver.into_state();
    let issues: usize = counts.iter().sum();
    write_html_head(out, &state, &counts)?;
    if let Some(list) = &listed {
        out.write_all(list)?;
    } else {
        for (_, item_issues) in plan.items() {
            for issue in &item_issues {
                write_html_issue(out, issue)?;
            }
        }
    }
    write_html_steps(out, &state, issues > 0)?;
    // The malformed lines are rendered during the timeline's pass while they are few; past the
    // bound, they are written from a pass of their own.
    let mut section = (malformed > 0).then(Vec::new);
    for (item, _) in plan.items() {
        if let Some(event) = item.as_ref().and_then(LineItem::renderable) {
            let valid = !matches!(item, Some(LineItem::Degraded { .. }));
            write_html_entry(out, event, valid)?;
        }
        if let Some(held) = &mut section {
            write_html_malformed_item(held, item.as_ref())?;
            if held.len() > MAX_HELD_SECTION_BYTES {
                section = None;
            }
        }
    }
    out.write_all(b"</section>\n")?;
    if malformed > 0 {
        out.write_all(MALFORMED_HEAD.as_bytes())?;
        if let Some(held) = &section {
            out.write_all(held)?;
        } else {
            for (item, _) in plan.items() {
                write_html_malformed_item(out, item.as_ref())?;
            }
        }
        out.write_all(b"</section>\n")?;
    }
    write_html_end(out)?;
    Ok(WrittenPage {
        state,
        events,
        issues,
    })
}

/// Most bytes of the issues' list or of the malformed lines' section [`write_html_by_line`]
/// holds to save a pass over the log.
const MAX_HELD_SECTION_BYTES: usize = 1 << 20;

/// The malformed line of `item`, if it is one.
fn write_html_malformed_item(out: &mut impl io::Write, item: Option<&LineItem>) -> io::Result<()> {
    match item {
        Some(LineItem::Degraded { line, raw, .. }) => {
            write_html_malformed(out, *line, Some(raw), None)
        }
        Some(LineItem::Dropped { line, text }) => {
            write_html_malformed(out, *line, None, Some(text))
        }
        _ => Ok(()),
    }
}

const MALFORMED_HEAD: &str = "<h2>Malformed lines</h2><section id=\"malformed\">\n";

/// The page up to the list of issues: head, run, goal, summary and the banner's counts; the
/// list is opened when there are issues (`counts` in [`LEVELS`] order).
fn write_html_head(
    out: &mut impl io::Write,
    state: &RunState,
    counts: &[usize; 4],
) -> io::Result<()> {
    let run = esc(state.run_id.as_deref().unwrap_or("(no run)"));
    write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>Run {run}</title><style>{PAGE_STYLE}</style></head><body><main>\n"
    )?;
    writeln!(out, "<h1 id=\"run\">Run {run}</h1>")?;
    if let Some(goal) = &state.goal {
        writeln!(out, "<div class=\"goal\" id=\"goal\">{}</div>", esc(goal))?;
    }
    writeln!(
        out,
        "<div class=\"summary\" id=\"summary\">{}</div>",
        esc(&summary_line(state))
    )?;
    let count = |l: IssueLevel| counts[level_index(l)];
    let class = if count(IssueLevel::Degraded) + count(IssueLevel::Dropped) > 0 {
        "banner bad"
    } else if count(IssueLevel::Fixed) > 0 {
        "banner warn"
    } else {
        "banner"
    };
    write!(
        out,
        "<section class=\"{class}\" id=\"issues\"><strong>Issues:</strong> "
    )?;
    let per_level: Vec<String> = LEVELS
        .iter()
        .map(|l| format!("{} {}", count(*l), l.as_str()))
        .collect();
    write!(out, "{}", esc(&per_level.join(", ")))?;
    if counts.iter().sum::<usize>() == 0 {
        out.write_all(" — the log was valid as written.".as_bytes())
    } else {
        out.write_all(b"<ul>")
    }
}

/// One issue of the banner's list.
fn write_html_issue(out: &mut impl io::Write, issue: &Issue) -> io::Result<()> {
    write!(
        out,
        "<li><span class=\"lvl lvl-{0}\">{0}</span> line {1} <code>{2}</code> {3}</li>",
        issue.level.as_str(),
        issue.line,
        esc(issue.code),
        esc(&issue.message)
    )
}

/// The end of the banner (closing the list when there is one), the steps with their tool calls
/// and approvals, and the head of the timeline.
fn write_html_steps(out: &mut impl io::Write, state: &RunState, listed: bool) -> io::Result<()> {
    if listed {
        out.write_all(b"</ul>")?;
    }
    out.write_all(b"</section>\n")?;
    out.write_all(b"<h2>Steps</h2><section id=\"steps\">\n")?;
    let lookup = Lookup::new(state);
    for step in &state.steps {
        let status = step_status_name(step.status);
        write!(
            out,
            "<div class=\"step\" data-step=\"{}\"><div class=\"step-head\">{} {}<span class=\"badge s-{status}\">{status}</span>",
            esc(&step.id),
            esc(&step.id),
            esc(step.title.as_deref().unwrap_or("")),
        )?;
        if step.retries > 0 {
            write!(
                out,
                "<span class=\"badge\">retried {}×</span>",
                step.retries
            )?;
        }
        out.write_all(b"</div>")?;
        if let Some(err) = &step.error {
            write!(
                out,
                "<div class=\"item\">error: <code>{}</code></div>",
                esc(err.as_str())
            )?;
        }
        for key in &step.tool_calls {
            if let Some(call) = lookup.call(key) {
                write_html_call(out, call)?;
            }
        }
        for key in &step.approvals {
            if let Some(a) = lookup.approval(key) {
                write_html_approval(out, a)?;
            }
        }
        out.write_all(b"</div>\n")?;
    }
    if state.steps.is_empty() {
        out.write_all(b"<p>No steps.</p>")?;
    }
    out.write_all(b"</section>\n")?;
    out.write_all(
        b"<h2>Timeline</h2><div><button id=\"expand-all\" type=\"button\">Expand all</button>\
         <button id=\"collapse-all\" type=\"button\">Collapse all</button></div><section id=\"timeline\">\n",
    )
}

fn write_html_call(out: &mut impl io::Write, call: &ToolCallState) -> io::Result<()> {
    let status = match call.status {
        ToolCallStatus::Pending => "pending",
        ToolCallStatus::Ok => "ok",
        ToolCallStatus::Error => "error",
    };
    write!(
        out,
        "<div class=\"item tool\">tool <span class=\"type\">{}</span> <span class=\"badge s-{}\">{status}</span>",
        esc(call.name.as_deref().unwrap_or("(unknown tool)")),
        if status == "ok" {
            "done"
        } else if status == "error" {
            "error"
        } else {
            "running"
        },
    )?;
    if let Some(ms) = &call.ms {
        write!(out, " {ms} ms")?;
    }
    if let Some(t) = call.tokens {
        write!(out, " · {t} tokens")?;
    }
    if let Some(c) = &call.cost {
        write!(out, " · ${c}")?;
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
        write!(
            out,
            "<details class=\"raw\"><summary>args and result</summary><pre>{}</pre></details>",
            esc(&pretty(&Value::Object(raw)))
        )?;
    }
    out.write_all(b"</div>")
}

fn write_html_approval(out: &mut impl io::Write, a: &ApprovalState) -> io::Result<()> {
    let status = approval_status_name(a.status);
    let risk = a.risk.map_or("unknown", |r| r.as_str());
    write!(
        out,
        "<div class=\"item approval {status}\">approval <b>{}</b> <span class=\"risk-{risk}\">risk {risk}</span> \
         <span class=\"badge\">{}</span> {}",
        esc(&a.approval_id),
        if a.status == ApprovalStatus::Pending {
            "waiting for approval"
        } else {
            status
        },
        esc(a.summary.as_deref().unwrap_or("")),
    )?;
    if let Some(preview) = &a.preview {
        write!(
            out,
            "<details class=\"raw\"><summary>preview</summary><pre>{}</pre></details>",
            esc(&pretty(&preview.to_value()))
        )?;
    }
    out.write_all(b"</div>")
}

/// One entry of the timeline; `valid` is false for a wrapper of a line that was not repaired.
fn write_html_entry(out: &mut impl io::Write, event: &RunEvent, valid: bool) -> io::Result<()> {
    let known = event.kind().is_some();
    let note = if !valid {
        " — line could not be repaired (folded, not executed)"
    } else if !known {
        " — unknown event (folded)"
    } else {
        ""
    };
    writeln!(
        out,
        "<div class=\"ev{}\" data-valid=\"{valid}\"><details class=\"raw\"><summary><span class=\"seq\">#{}</span> \
         <span class=\"type\">{}</span>{}</summary><pre>{}</pre></details></div>",
        if valid && known { "" } else { " folded" },
        event.seq,
        esc(&event.event_type),
        esc(note),
        esc(&pretty(&event.to_value())),
    )
}

/// One malformed line: its value when it was JSON, else its text.
fn write_html_malformed(
    out: &mut impl io::Write,
    line: usize,
    raw: Option<&Value>,
    text: Option<&str>,
) -> io::Result<()> {
    let body = match (raw, text) {
        (Some(raw), _) => Cow::Owned(pretty(raw)),
        (None, Some(text)) => Cow::Borrowed(text),
        (None, None) => Cow::Borrowed(""),
    };
    writeln!(
        out,
        "<details class=\"raw ev folded\"><summary>line {line}{}</summary><pre>{}</pre></details>",
        if text.is_some() { " (not JSON)" } else { "" },
        esc(&body)
    )
}

fn write_html_end(out: &mut impl io::Write) -> io::Result<()> {
    writeln!(out, "</main><script>{PAGE_SCRIPT}</script></body></html>")
}
