//! The HTML page of a run: the recorded page of a messy log (the snapshot pins its bytes), and
//! the page written from passes over a log (`write_html_by_line`) equal to the page of the whole
//! result (`render_html`) on every log the tests know and on generated messy ones.
#![allow(clippy::expect_used)] // In test helpers, a panic is the failure report.

use agentwire_runlog::{CoerceOptions, render_html, to_run_events_from_slice};

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
