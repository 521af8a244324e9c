//! Timeline views of a coerced run: text for a terminal and a self-contained HTML page (inline
//! CSS and script, no network). Both show the issues first, then the steps with their tool calls
//! and approvals, then the timeline with unknown events and bad lines folded.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io;

use serde_json::Value;

use crate::coerce::{CoerceResult, Issue, IssueLevel, LineItem, LinePlan};
use crate::event::RunEvent;
use crate::state::{
    ApprovalState, ApprovalStatus, Deriver, RunState, RunStatus, StepState, StepStatus,
    ToolCallState, ToolCallStatus,
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

/// Most line ranges a grouped issue line lists; the rest is counted.
pub const MAX_GROUP_RANGES: usize = 8;

/// The issues of one code: how many, and which lines they touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueGroup {
    /// The level of the code's issues (a code has one level).
    pub level: IssueLevel,
    /// The code.
    pub code: &'static str,
    /// Issues of the code.
    pub count: usize,
    /// Distinct lines they touched.
    pub lines: usize,
    /// The first [`MAX_GROUP_RANGES`] runs of consecutive lines, `(first, last)`.
    pub ranges: Vec<(usize, usize)>,
    /// The message of the first issue of the code.
    pub example: String,
}

/// Groups issues by code as they pass by, in the order each code first appears (issues come
/// sorted by line). Memory is bounded by the number of codes, whatever the number of issues.
#[derive(Debug, Default)]
pub struct IssueGroups {
    groups: Vec<(IssueGroup, usize)>,
    /// Issues per level, in [`LEVELS`] order.
    counts: [usize; 4],
}

impl IssueGroups {
    /// Counts one issue.
    pub fn push(&mut self, issue: &Issue) {
        self.counts[level_index(issue.level)] += 1;
        let at = match self
            .groups
            .iter()
            .position(|(g, _)| g.code == issue.code && g.level == issue.level)
        {
            Some(at) => at,
            None => {
                self.groups.push((
                    IssueGroup {
                        level: issue.level,
                        code: issue.code,
                        count: 0,
                        lines: 0,
                        ranges: Vec::new(),
                        example: issue.message.clone(),
                    },
                    usize::MAX,
                ));
                self.groups.len() - 1
            }
        };
        let (group, last) = &mut self.groups[at];
        group.count += 1;
        if *last == issue.line {
            return;
        }
        group.lines += 1;
        let room = group.ranges.len() < MAX_GROUP_RANGES;
        match group.ranges.last_mut() {
            Some(range) if *last == range.1 && range.1 + 1 == issue.line => range.1 = issue.line,
            _ if room => group.ranges.push((issue.line, issue.line)),
            _ => {}
        }
        *last = issue.line;
    }

    /// Issues of `level` counted so far.
    pub fn count(&self, level: IssueLevel) -> usize {
        self.counts[level_index(level)]
    }

    /// The groups.
    pub fn groups(&self) -> impl Iterator<Item = &IssueGroup> {
        self.groups.iter().map(|(g, _)| g)
    }
}

fn level_index(level: IssueLevel) -> usize {
    match level {
        IssueLevel::Fixed => 0,
        IssueLevel::Degraded => 1,
        IssueLevel::Dropped => 2,
        IssueLevel::Info => 3,
    }
}

/// The issues grouped by code (see [`IssueGroups`]).
pub fn group_issues<'a>(issues: impl IntoIterator<Item = &'a Issue>) -> Vec<IssueGroup> {
    let mut groups = IssueGroups::default();
    for issue in issues {
        groups.push(issue);
    }
    groups.groups.into_iter().map(|(g, _)| g).collect()
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
