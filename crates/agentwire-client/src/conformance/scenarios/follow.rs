//! The host's view: the crate's own [`RollClient`] negotiates with the runtime and follows a
//! thread across a replay and live turns.

use std::time::{Duration, Instant};

use agentwire_roll::approval::ApprovalDecision;
use agentwire_roll::types::{RuntimeEvent, TurnInput};
use agentwire_roll::user_input::UserInputResult;

use super::Context;
use crate::conformance::wire::{Failure, ensure};
use crate::roll::{
    ClientError, ClientEvent, ClientOptions, FollowOptions, Followed, InitializeOptions,
    Interactions, RollClient, ShutdownTimeouts,
};

fn failed(what: &str, error: &ClientError) -> Failure {
    Failure::new(format!(
        "the Roll client: {what} failed ({}): {error}",
        error.code()
    ))
}

pub(super) async fn client_follow(context: &Context) -> Result<(), Failure> {
    let version = context.version;
    let interactions = Interactions::new()
        .on_approval(|_| async { Ok(ApprovalDecision::Approve {}) })
        .on_user_input(|_| async { Ok(UserInputResult::Cancelled { reason: None }) });
    let options = ClientOptions::new(context.command.program())
        .args(context.command.args())
        .request_timeout(Some(context.timeout))
        .interactions(interactions)
        .shutdown(ShutdownTimeouts {
            stdin: Duration::from_secs(3),
            terminate: Duration::from_secs(2),
            kill: Duration::from_secs(2),
        });
    let client = RollClient::spawn(options).map_err(|e| match e {
        ClientError::Spawn { message, .. } => Failure::spawn(message),
        other => failed("starting the runtime", &other),
    })?;
    let mut events = client.events();
    let session = client
        .initialize(InitializeOptions::default().versions([version.as_str()]))
        .await
        .map_err(|e| failed(&format!("initialize offering {version}"), &e))?;
    ensure!(
        session.version == version,
        "the Roll client negotiated {} offering only {version}",
        session.version
    );
    let thread = client
        .create_thread(Some("followed".to_owned()))
        .await
        .map_err(|e| failed("thread.create", &e))?
        .thread
        .id;
    let input = |text: &str| TurnInput {
        text: text.to_owned(),
        attachments: None,
    };
    // One turn before following (replayed), then two more, each started when the one before
    // it ended (live).
    let start = |text: String| {
        let client = &client;
        let thread = thread.clone();
        async move {
            client
                .start_turn(thread, input(&text))
                .await
                .map(|started| started.turn_id.as_str().to_owned())
                .map_err(|e| failed("turn.start", &e))
        }
    };
    let mut inputs = vec![context.script.text.clone(), context.script.tool.clone()];
    let mut running = start(context.script.text.clone()).await?;
    let mut ended = 0;
    let mut follower = client
        .follow(thread.clone(), FollowOptions::after(None))
        .map_err(|e| failed("follow", &e))?;
    let mut previous: Option<u64> = None;
    let mut idle_since = Instant::now();
    loop {
        let left = context
            .timeout
            .saturating_sub(idle_since.elapsed())
            .min(context.deadline.saturating_duration_since(Instant::now()));
        let item = match tokio::time::timeout(left, follower.next()).await {
            Err(_) => {
                return Err(Failure::new(format!(
                    "the followed thread delivered nothing for {} ms; {ended} of its 3 turns had ended",
                    left.as_millis()
                )));
            }
            Ok(item) => item.map_err(|e| failed("following the thread", &e))?,
        };
        idle_since = Instant::now();
        let envelope = match item {
            Followed::Reset { reason, .. } => {
                return Err(Failure::new(format!(
                    "the Roll client could not prove the thread's events continuous and fell back to a snapshot ({})",
                    reason.code()
                )));
            }
            Followed::Event(envelope) => envelope,
        };
        let sequence = envelope.cursor.as_ref().map(|c| c.sequence());
        ensure!(
            sequence == Some(previous.map_or(0, |p| p + 1)),
            "the followed thread's events are not gap-free: {sequence:?} after {previous:?}"
        );
        previous = sequence;
        let terminal = matches!(
            envelope.event,
            RuntimeEvent::TurnCompleted
                | RuntimeEvent::TurnCancelled { .. }
                | RuntimeEvent::TurnFailed { .. }
        );
        if terminal
            && envelope
                .turn_id
                .as_ref()
                .is_some_and(|t| t.as_str() == running)
        {
            ended += 1;
            match inputs.pop() {
                Some(text) => running = start(text).await?,
                None => break,
            }
        }
    }
    if let Some(events) = events.as_mut() {
        while let Ok(item) = events.try_recv() {
            if let ClientEvent::Rejected {
                method,
                code,
                message,
            } = item
            {
                return Err(Failure::new(format!(
                    "the Roll client rejected a {method} from the runtime ({code}): {message}"
                )));
            }
        }
    }
    let stats = client.stats();
    ensure!(
        stats.rejected == 0,
        "the Roll client rejected {} frames of the runtime",
        stats.rejected
    );
    drop(follower);
    client
        .shutdown()
        .await
        .map_err(|e| failed("shutdown", &e))?;
    Ok(())
}
