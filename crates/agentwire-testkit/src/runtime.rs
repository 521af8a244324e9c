//! What the tests of the runtime core and of its agents share, behind the `runtime` feature: a
//! turn's input, collecting what the runtime publishes until an event arrives, and what ends a
//! turn.

use std::time::Duration;

use agentwire_runtime::{Published, Subscription, ThreadEvent, TurnInput};

/// A bound on how long a test waits for an event, so a bug fails instead of hanging.
const WAIT: Duration = Duration::from_secs(30);

/// A turn's input of `text` alone.
pub fn input(text: &str) -> TurnInput {
    TurnInput {
        text: text.into(),
        attachments: vec![],
    }
}

/// Collects what is published until a durable event matches `done`.
///
/// # Panics
/// When the subscription closes, or no such event is published within 30 seconds.
pub async fn until(rx: &mut Subscription, done: impl Fn(&ThreadEvent) -> bool) -> Vec<Published> {
    let mut seen = Vec::new();
    let waited = tokio::time::timeout(WAIT, async {
        loop {
            let published = match rx.recv().await {
                Ok(published) => published,
                Err(e) => panic!("the runtime's publication stopped: {e}"),
            };
            let finished =
                matches!(&published, Published::Durable { event, .. } if done(&event.event));
            seen.push(published);
            if finished {
                break;
            }
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "the awaited event was not published within {WAIT:?}"
    );
    seen
}

/// Whether `event` ends a turn (completed, failed or cancelled).
pub fn is_turn_end(event: &ThreadEvent) -> bool {
    matches!(
        event,
        ThreadEvent::TurnCompleted { .. }
            | ThreadEvent::TurnFailed { .. }
            | ThreadEvent::TurnCancelled { .. }
    )
}
