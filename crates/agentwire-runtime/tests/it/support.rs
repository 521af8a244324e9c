//! What the runtime's test modules share: a turn's input, collecting what is published until
//! an event arrives, and what ends a turn.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use agentwire_runtime::{Published, Subscription, ThreadEvent, TurnInput};

/// A bound on how long a test waits for an event, so a bug fails instead of hanging.
const WAIT: Duration = Duration::from_secs(30);

pub(crate) fn input(text: &str) -> TurnInput {
    TurnInput {
        text: text.into(),
        attachments: vec![],
    }
}

/// Collects what is published until a durable event matches `done`.
pub(crate) async fn until(
    rx: &mut Subscription,
    done: impl Fn(&ThreadEvent) -> bool,
) -> Vec<Published> {
    let mut seen = Vec::new();
    tokio::time::timeout(WAIT, async {
        loop {
            let published = rx.recv().await.unwrap();
            let finished =
                matches!(&published, Published::Durable { event, .. } if done(&event.event));
            seen.push(published);
            if finished {
                break;
            }
        }
    })
    .await
    .expect("the awaited event was published");
    seen
}

pub(crate) fn is_turn_end(event: &ThreadEvent) -> bool {
    matches!(
        event,
        ThreadEvent::TurnCompleted { .. }
            | ThreadEvent::TurnFailed { .. }
            | ThreadEvent::TurnCancelled { .. }
    )
}
