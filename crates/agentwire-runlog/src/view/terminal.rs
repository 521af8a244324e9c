//! The terminal timeline: the run, its issues (grouped by code or all), its steps with their
//! tool calls and approvals, the timeline and the lines that are not JSON, as text made safe for
//! a terminal, optionally colored.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io;

use serde_json::Value;

use super::issues::{IssueGroup, IssueGroups};
use super::{LEVELS, Lookup, approval_status_name, step_status_name, summary_line};
use crate::coerce::{CoerceResult, Issue, IssueLevel, LineItem, LinePlan};
use crate::event::RunEvent;
use crate::state::{ApprovalStatus, Deriver, RunState, StepState, StepStatus, ToolCallStatus};

/// Longest raw JSON shown inline in the terminal view; longer text is cut with an ellipsis.
pub const MAX_INLINE_JSON_CHARS: usize = 160;

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

/// How the terminal views list issues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IssueList {
    /// One line per code: its level, count and the lines it touched.
    #[default]
    Grouped,
    /// Every issue on its own line.
    All,
}

/// How [`write_text`] renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TextOptions {
    /// ANSI colors (for a terminal only).
    pub color: bool,
    /// How issues are listed.
    pub issues: IssueList,
}

fn format_ranges(group: &IssueGroup) -> String {
    let listed: usize = group.ranges.iter().map(|(a, b)| b - a + 1).sum();
    let mut out = String::from(if group.lines == 1 { "line " } else { "lines " });
    for (i, (a, b)) in group.ranges.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        if a == b {
            let _ = write!(out, "{a}");
        } else {
            let _ = write!(out, "{a}-{b}");
        }
    }
    if group.lines > listed {
        let _ = write!(out, " and {} more", group.lines - listed);
    }
    out
}

/// Text made safe to print on a terminal: control characters (C0 including line breaks and
/// ESC, DEL, C1), bidirectional overrides and isolates, and line or paragraph separators are
/// written as escapes (`\n`, `\r`, `\t`, `\u{1b}`), so a log can neither move the cursor, clear
/// the screen, reorder what is shown nor start a line of its own. Other text is unchanged.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    fn unsafe_char(c: char) -> bool {
        c.is_control()
            || matches!(
                c,
                '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}'
                    | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}'
            )
    }
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if unsafe_char(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// [`terminal_safe`], then [`cut`] to `max` characters.
fn safe_cut(text: &str, max: usize) -> String {
    cut(&terminal_safe(text), max)
}

/// Writes the issues for people: a count per level, then one line per code
/// ([`IssueList::Grouped`]) or per issue ([`IssueList::All`]).
pub fn write_issues(
    out: &mut impl io::Write,
    issues: &[Issue],
    list: IssueList,
    color: bool,
) -> io::Result<()> {
    let mut groups = IssueGroups::default();
    for issue in issues {
        groups.push(issue);
    }
    write_issue_summary(out, &groups, list, color, || issues.iter().cloned())
}

/// [`write_issues`] from issues grouped as they passed by; with [`IssueList::All`], `all`
/// gives them again, in order.
pub fn write_issue_summary<I: IntoIterator<Item = Issue>>(
    out: &mut impl io::Write,
    groups: &IssueGroups,
    list: IssueList,
    color: bool,
    all: impl FnOnce() -> I,
) -> io::Result<()> {
    let p = Paint { color };
    let counts: Vec<String> = LEVELS
        .iter()
        .map(|l| format!("{} {}", groups.count(*l), l.as_str()))
        .collect();
    writeln!(out, "{} ({})", p.bold("Issues"), counts.join(", "))?;
    if groups.groups.is_empty() {
        writeln!(out, "  none: the log was valid as written")?;
        return Ok(());
    }
    match list {
        IssueList::All => {
            for issue in all() {
                writeln!(
                    out,
                    "  {} line {:<4} {:<24} {}",
                    p.level(issue.level),
                    issue.line,
                    issue.code,
                    terminal_safe(&issue.message)
                )?;
            }
        }
        IssueList::Grouped => {
            for group in groups.groups() {
                write!(
                    out,
                    "  {} {:<24} {:>6}×  {}",
                    p.level(group.level),
                    group.code,
                    group.count,
                    format_ranges(group)
                )?;
                // What could not be repaired is worth reading; a fix says what it did by its code.
                if matches!(group.level, IssueLevel::Degraded | IssueLevel::Dropped) {
                    write!(out, ": {}", safe_cut(&group.example, MAX_INLINE_JSON_CHARS))?;
                }
                writeln!(out)?;
            }
            writeln!(out, "  (one line per code; --issues all lists every issue)")?;
        }
    }
    Ok(())
}

/// The terminal timeline as a string, issues grouped by code. `color` adds ANSI colors (for a
/// terminal only).
pub fn render_text(result: &CoerceResult, state: &RunState, color: bool) -> String {
    let mut out = Vec::new();
    let options = TextOptions {
        color,
        issues: IssueList::Grouped,
    };
    // Writing into memory cannot fail.
    let _ = write_text(&mut out, result, state, &options);
    String::from_utf8_lossy(&out).into_owned()
}

/// Writes the terminal timeline: the run, the issues, the steps with their tool calls and
/// approvals, the timeline (unknown events and bad lines folded) and the lines that are not
/// JSON. Text from the log passes through [`terminal_safe`].
pub fn write_text(
    out: &mut impl io::Write,
    result: &CoerceResult,
    state: &RunState,
    options: &TextOptions,
) -> io::Result<()> {
    let p = Paint {
        color: options.color,
    };
    write_head(out, state, &p)?;
    write_issues(out, &result.issues, options.issues, options.color)?;
    write_steps(out, state, &p)?;
    writeln!(out, "\n{}", p.bold("Timeline"))?;
    for (i, event) in result.renderable.iter().enumerate() {
        write_entry(out, event, result.is_valid_entry(i), &p)?;
    }
    let mut dropped = result
        .malformed
        .iter()
        .filter(|m| m.text.is_some())
        .peekable();
    if dropped.peek().is_some() {
        write_not_json_head(out, &p)?;
        for m in dropped {
            write_not_json(out, m.line, m.text.as_deref().unwrap_or(""), &p)?;
        }
    }
    Ok(())
}

/// [`write_text`] of a log coerced line by line: the same text, written from passes over the
/// log (the state and the issue counts first, then the list of issues if asked, the timeline
/// and the lines that are not JSON), so only the state is held. Returns the state.
pub fn write_text_by_line(
    out: &mut impl io::Write,
    plan: &LinePlan<'_>,
    options: &TextOptions,
) -> io::Result<RunState> {
    let p = Paint {
        color: options.color,
    };
    let mut deriver = Deriver::new();
    let mut groups = IssueGroups::default();
    let mut dropped = 0usize;
    for (item, issues) in plan.items() {
        for issue in &issues {
            groups.push(issue);
        }
        match &item {
            Some(LineItem::Event(e) | LineItem::Synthesized(e)) => {
                deriver.push(e);
            }
            Some(LineItem::Dropped { .. }) => dropped += 1,
            _ => {}
        }
    }
    let state = deriver.into_state();
    write_head(out, &state, &p)?;
    write_issue_summary(out, &groups, options.issues, options.color, || {
        plan.items().flat_map(|(_, issues)| issues)
    })?;
    write_steps(out, &state, &p)?;
    writeln!(out, "\n{}", p.bold("Timeline"))?;
    for (item, _) in plan.items() {
        if let Some(event) = item.as_ref().and_then(LineItem::renderable) {
            let valid = !matches!(item, Some(LineItem::Degraded { .. }));
            write_entry(out, event, valid, &p)?;
        }
    }
    if dropped > 0 {
        write_not_json_head(out, &p)?;
        for (item, _) in plan.items() {
            if let Some(LineItem::Dropped { line, text }) = &item {
                write_not_json(out, *line, text, &p)?;
            }
        }
    }
    Ok(state)
}

fn write_head(out: &mut impl io::Write, state: &RunState, p: &Paint) -> io::Result<()> {
    let run = terminal_safe(state.run_id.as_deref().unwrap_or("(no run)"));
    writeln!(out, "{} {}", p.bold("Run"), p.bold(&run))?;
    if let Some(goal) = &state.goal {
        writeln!(out, "goal    {}", terminal_safe(goal))?;
    }
    writeln!(out, "{}", terminal_safe(&summary_line(state)))?;
    writeln!(out)
}

/// One entry of the timeline; `valid` is false for a wrapper of a line that was not repaired.
fn write_entry(
    out: &mut impl io::Write,
    event: &RunEvent,
    valid: bool,
    p: &Paint,
) -> io::Result<()> {
    let folded = !valid || event.kind().is_none();
    let mut line = format!(
        "  #{:<5} {:<18}",
        event.seq,
        terminal_safe(&event.event_type)
    );
    if folded {
        let what = if valid {
            "unknown event, folded"
        } else {
            "bad line, folded"
        };
        let _ = write!(
            line,
            " ({what}) {}",
            safe_cut(
                &compact(&Value::Object(event.payload.clone())),
                MAX_INLINE_JSON_CHARS
            )
        );
        writeln!(out, "{}", p.dim(&line))
    } else {
        let mut fields = event.payload.clone();
        fields.shift_remove("args");
        fields.shift_remove("result");
        fields.shift_remove("preview");
        if !fields.is_empty() {
            let _ = write!(
                line,
                " {}",
                safe_cut(&compact(&Value::Object(fields)), MAX_INLINE_JSON_CHARS)
            );
        }
        writeln!(out, "{line}")
    }
}

fn write_not_json_head(out: &mut impl io::Write, p: &Paint) -> io::Result<()> {
    writeln!(
        out,
        "\n{}",
        p.bold("Lines that are not JSON (kept, not shown above)")
    )
}

fn write_not_json(out: &mut impl io::Write, line: usize, text: &str, p: &Paint) -> io::Result<()> {
    writeln!(
        out,
        "  line {:<4} {}",
        line,
        p.dim(&safe_cut(text, MAX_INLINE_JSON_CHARS))
    )
}

fn write_steps(out: &mut impl io::Write, state: &RunState, p: &Paint) -> io::Result<()> {
    writeln!(out, "\n{}", p.bold("Steps"))?;
    if state.steps.is_empty() {
        writeln!(out, "  (no steps)")?;
    }
    let lookup = Lookup::new(state);
    for step in &state.steps {
        let mark = match step.status {
            StepStatus::Done => p.green(step_mark(step)),
            StepStatus::Error => p.red(step_mark(step)),
            StepStatus::Running => p.yellow(step_mark(step)),
            StepStatus::Pending => p.dim(step_mark(step)),
        };
        write!(
            out,
            "  {mark} {} {} [{}]",
            terminal_safe(&step.id),
            terminal_safe(step.title.as_deref().unwrap_or("")),
            step_status_name(step.status)
        )?;
        if step.retries > 0 {
            write!(out, " retried {}×", step.retries)?;
        }
        writeln!(out)?;
        if let Some(err) = &step.error {
            writeln!(
                out,
                "      {} {}",
                p.red("error"),
                safe_cut(err.as_str(), MAX_INLINE_JSON_CHARS)
            )?;
        }
        for key in &step.tool_calls {
            if let Some(call) = lookup.call(key) {
                let status = match call.status {
                    ToolCallStatus::Pending => p.yellow("pending"),
                    ToolCallStatus::Ok => p.green("ok"),
                    ToolCallStatus::Error => p.red("error"),
                };
                write!(
                    out,
                    "      tool {} {status}",
                    terminal_safe(call.name.as_deref().unwrap_or("(unknown tool)"))
                )?;
                if let Some(ms) = &call.ms {
                    write!(out, " {ms} ms")?;
                }
                if let Some(t) = call.tokens {
                    write!(out, " {t} tokens")?;
                }
                if let Some(args) = &call.args {
                    write!(
                        out,
                        " args {}",
                        safe_cut(args.as_str(), MAX_INLINE_JSON_CHARS)
                    )?;
                }
                writeln!(out)?;
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
                writeln!(
                    out,
                    "      approval {} [{}] {status}: {}",
                    terminal_safe(&a.approval_id),
                    a.risk.map_or("?", |r| r.as_str()),
                    terminal_safe(a.summary.as_deref().unwrap_or(""))
                )?;
            }
        }
    }
    Ok(())
}
