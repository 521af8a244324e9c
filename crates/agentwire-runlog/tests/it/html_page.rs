//! The HTML page of a run: the recorded page of a messy log (the snapshot pins its bytes), and
//! the page written from passes over a log (`write_html_by_line`) equal to the page of the whole
//! result (`render_html`) on every log the tests know and on generated messy ones.
#![allow(clippy::expect_used)] // In test helpers, a panic is the failure report.

use agentwire_runlog::{
    CoerceOptions, WrittenPage, get_scenario, plan_by_line, render_html, scenarios,
    to_run_events_from_slice, write_html_by_line,
};
use serde_json::{Value, json};

/// The repository's example log with lines of every trouble after it: HTML to escape, control
/// characters, an unknown event, a line to degrade, values that are not objects, text that is
/// not JSON.
fn messy_log() -> Vec<u8> {
    let mut log = crate::support::example_log();
    log.extend_from_slice(
        concat!(
            "{\"type\":\"step:start\",\"stepId\":\"<b>s'4</b>\",\"title\":\"a & b \\u001b[2J\\r\\n\"}\n",
            "{\"type\":\"agent:thought\",\"text\":\"\\\"quoted\\\" <script>alert(1)</script>\"}\n",
            "{\"type\":\"tool:call\",\"stepId\":\"<b>s'4</b>\",\"name\":\"x<y\",\"args\":{\"q\":\"&amp;\"}}\n",
            "{\"type\":\"tool:result\",\"ok\":false,\"error\":{\"message\":\"<e>\"}}\n",
            "{\"type\":\"approval:request\",\"summary\":\"ok? <i>\",\"risk\":\"critical\",\"preview\":{\"a\":\"<>\"}}\n",
            "[1,\"<two>\"]\n",
            "\"just text\"\n",
            "not json & <not> 'html'\n",
            "{\"type\":\"step:done\",\"stepId\":\"<b>s'4</b>\"}\n",
        )
        .as_bytes(),
    );
    log
}

/// The page of the whole coerced result, as `runlog view --html` writes it for a log read whole.
fn whole_page(bytes: &[u8], options: &CoerceOptions) -> String {
    let result = to_run_events_from_slice(bytes, options);
    let state = result.state();
    render_html(&result, &state)
}

#[test]
fn the_page_of_a_messy_log_is_the_recorded_one() {
    let page = whole_page(&messy_log(), &CoerceOptions::default());
    insta::assert_snapshot!("messy_log_page", page);
}

/// The page `runlog view --html` streams: written from passes over the line-by-line plan, for a
/// log of one run the plan takes; `None` for a log that is read whole.
fn streamed_page(bytes: &[u8], options: &CoerceOptions) -> Option<(String, WrittenPage)> {
    let plan = plan_by_line(bytes, options).filter(|p| p.run_ids().len() <= 1)?;
    let mut page = Vec::new();
    let written = write_html_by_line(&mut page, &plan).expect("write into memory");
    Some((String::from_utf8(page).expect("utf-8"), written))
}

/// Asserts that the streamed page of `bytes` is the whole result's page, with both option sets;
/// `false` when the log is not streamed.
fn same_page(name: &str, bytes: &[u8]) -> bool {
    let mut streamed = false;
    for synthesize in [true, false] {
        let options = CoerceOptions {
            synthesize_run_start: synthesize,
            ..CoerceOptions::default()
        };
        let Some((page, written)) = streamed_page(bytes, &options) else {
            continue;
        };
        streamed = true;
        let result = to_run_events_from_slice(bytes, &options);
        let state = result.state();
        // Compared as text first: a failure shows where the pages part.
        let whole = render_html(&result, &state);
        if page != whole {
            let at = page
                .bytes()
                .zip(whole.bytes())
                .position(|(a, b)| a != b)
                .unwrap_or(page.len().min(whole.len()));
            let from = at.saturating_sub(80);
            panic!(
                "{name} (synthesize {synthesize}): the pages part at byte {at}:\nstreamed …{}\nwhole    …{}",
                String::from_utf8_lossy(&page.as_bytes()[from..(at + 80).min(page.len())]),
                String::from_utf8_lossy(&whole.as_bytes()[from..(at + 80).min(whole.len())]),
            );
        }
        assert_eq!(written.state, state, "{name}");
        assert_eq!(written.events, result.meta.events, "{name}");
        assert_eq!(written.issues, result.issues.len(), "{name}");
    }
    streamed
}

fn ndjson(events: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in events {
        out.extend_from_slice(serde_json::to_string(e).expect("json").as_bytes());
        out.push(b'\n');
    }
    out
}

#[test]
fn the_streamed_page_of_the_messy_and_example_logs_is_the_whole_page() {
    assert!(same_page("messy", &messy_log()));
    assert!(same_page("example", &crate::support::example_log()));
}

#[test]
fn the_streamed_page_of_every_mock_scenario_is_the_whole_page() {
    for scenario in scenarios() {
        let events: Vec<Value> = get_scenario(scenario.name)
            .expect("scenario")
            .iter()
            .map(|e| e.to_value())
            .collect();
        let mut log = ndjson(&events);
        assert!(same_page(scenario.name, &log), "{} streams", scenario.name);
        // With a bad line at the end, the page has its malformed section.
        log.extend_from_slice(
            b"{\"type\":\"approval:decision\",\"decision\":\"maybe\"}\n{broken\n",
        );
        assert!(same_page(scenario.name, &log), "{} streams", scenario.name);
    }
}

/// Every fixture of the protocol, each as the line after a `run:start` and all of them (ids
/// removed, so that none repeats) as one log.
#[test]
fn the_streamed_page_of_every_fixture_is_the_whole_page() {
    let dir = agentwire_testkit::repo_root().join("protocols/tasklens/fixtures");
    let fixtures = agentwire_testkit::files_with_extension(dir, "json");
    assert!(fixtures.len() >= 40, "{} fixtures", fixtures.len());
    let start = json!({"type": "run:start", "goal": "fixtures"});
    let mut streamed = 0;
    let mut all = vec![start.clone()];
    for path in &fixtures {
        let name = path.display().to_string();
        let mut fixture = agentwire_testkit::read_json(path);
        streamed += usize::from(same_page(&name, &ndjson(&[start.clone(), fixture.clone()])));
        if let Some(object) = fixture.as_object_mut() {
            object.remove("id");
            object.remove("runId");
        }
        all.push(fixture);
    }
    // Most fixtures make a log of one run in order (the others name a run or a seq the first
    // line's renumbering contradicts, or none at all).
    assert!(
        streamed * 2 > fixtures.len(),
        "{streamed} of {} streamed",
        fixtures.len()
    );
    assert!(same_page("every fixture", &ndjson(&all)));
}

#[test]
fn the_streamed_page_of_generated_messy_logs_is_the_whole_page() {
    let huge_message = "y".repeat(2 << 20);
    // Over a megabyte of malformed lines: more than the writer holds beside the timeline.
    let huge_text = "<not json & \u{1b}[2J> ".repeat(60_000);
    let mut envelope_less = String::from("{\"type\":\"run:start\",\"goal\":\"g\"}\n");
    for i in 0..2_000 {
        envelope_less.push_str(&format!(
            "{{\"type\":\"step:start\",\"stepId\":\"s{}\",\"title\":\"<t{i}>\"}}\n{{\"type\":\"tool_call\",\"name\":\"n{i}\",\"args\":{{\"i\":{i}}}}}\n{{\"type\":\"tool:result\",\"ok\":true}}\n",
            i % 7
        ));
        if i % 97 == 0 {
            envelope_less.push_str("garbage line & <b>\n[1,2]\n{\"type\":\"approval:decision\"}\n");
        }
    }
    // Over a megabyte of the issues' list (five issues a line): more than the writer holds
    // during its first pass.
    let mut many_issues = String::from("{\"type\":\"run:start\",\"goal\":\"g\"}\n");
    for i in 0..2_500 {
        many_issues.push_str(&format!(
            "{{\"type\":\"step:progress\",\"stepId\":\"s\",\"message\":\"m{i}\"}}\n"
        ));
    }
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("envelope-less", envelope_less.into_bytes()),
        ("many issues", many_issues.into_bytes()),
        (
            "unparsable lines",
            b"{\"type\":\"run:start\"}\n{broken\n{\"type\":\n]\n\xff\xfe not utf-8\n{\"a\":1,\"a\":2}\n\"x\"\n"
                .to_vec(),
        ),
        (
            "control characters",
            "{\"type\":\"run:start\",\"goal\":\"\\u0000\\u001b[2J\\r\\n\\u202e\"}\n\x1b[31mred\x1b[0m\t\x07\n{\"type\":\"step:start\",\"stepId\":\"\\u0007\",\"title\":\"\u{2028}\"}\n"
                .as_bytes()
                .to_vec(),
        ),
        (
            "huge lines",
            format!(
                "{{\"type\":\"run:start\"}}\n{{\"type\":\"step:progress\",\"stepId\":\"s\",\"message\":\"{huge_message}\"}}\n{huge_text}\n"
            )
            .into_bytes(),
        ),
        (
            "bom, crlf and blank lines",
            b"\xef\xbb\xbf{\"type\":\"run:start\",\"goal\":\"g\"}\r\n\r\n  \n{\"type\":\"step:start\",\"stepId\":\"s\"}\r\nnope\r\n"
                .to_vec(),
        ),
        (
            "no run:start",
            b"{\"type\":\"step:start\",\"stepId\":\"s\"}\n{\"type\":\"step:done\",\"stepId\":\"s\"}\n"
                .to_vec(),
        ),
    ];
    for (name, log) in cases {
        assert!(same_page(name, &log), "{name} streams");
    }
}
