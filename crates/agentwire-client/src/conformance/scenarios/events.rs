//! Scenarios of durable events (1.3+): resume and its barrier, expired checkpoints after a
//! trim, and the recovery snapshot.

use agentwire_roll::RollErrorCode;
use agentwire_roll::cursor::{EventCursor, event_cursor_distance};
use serde_json::{Value, json};

use super::{Context, QUIET_PERIOD};
use crate::conformance::script::TrimHook;
use crate::conformance::wire::{Failure, RpcError, Wire, durable, ensure, excerpt, uuid};

/// The largest recovery snapshot frame that counts as small: its metadata is bounded (1,024
/// characters for title and model, 64 for timestamps), whatever the thread holds.
pub(crate) const RECOVERY_FRAME_LIMIT: usize = 16 * 1024;

fn cursor_of(envelope: &Value) -> Result<EventCursor, Failure> {
    let text = envelope["cursor"].as_str().unwrap_or_default();
    EventCursor::parse(text).map_err(|e| {
        Failure::new(format!(
            "the durable event {} has a cursor the suite cannot read ({e})",
            excerpt(envelope)
        ))
    })
}

/// Runs `inputs` as turns on `thread` and returns their durable events in order, checking that
/// their cursors count up by one from the start of the log.
async fn durable_turns(
    wire: &mut Wire,
    thread: &str,
    inputs: &[&str],
) -> Result<Vec<Value>, Failure> {
    let mut live = Vec::new();
    for input in inputs {
        let turn = wire.start_turn(thread, input).await?;
        live.extend(durable(&wire.turn_events(thread, &turn).await?));
    }
    ensure!(
        live.len() >= 2 * inputs.len(),
        "{} turns wrote {} durable events; each writes at least turn.started and its end",
        inputs.len(),
        live.len()
    );
    let mut previous: Option<EventCursor> = None;
    for envelope in &live {
        let cursor = cursor_of(envelope)?;
        let step = event_cursor_distance(previous.as_ref(), Some(&cursor)).map_err(|e| {
            Failure::new(format!(
                "cursor {cursor} does not follow {previous:?} in one log: {e}"
            ))
        })?;
        ensure!(
            step == 1,
            "the thread's durable events are not numbered one by one from the start: cursor {cursor} follows {} at distance {step}",
            previous
                .as_ref()
                .map_or("the start".to_owned(), EventCursor::to_string)
        );
        previous = Some(cursor);
    }
    Ok(live)
}

/// One resume: the events replayed before its answer, and the answer.
struct Resumed {
    replayed: Vec<Value>,
    result: Value,
}

async fn resume_once(
    wire: &mut Wire,
    thread: &str,
    after: Option<&str>,
) -> Result<Result<Resumed, RpcError>, Failure> {
    let id = wire
        .request(
            "runtime.events.resume",
            json!({"threadId": thread, "afterCursor": after}),
        )
        .await?;
    let answer = wire.answer(id).await?;
    let replayed: Vec<Value> = wire
        .drain(|f| {
            f.index < answer.index
                && f.event_of(thread)
                    .is_some_and(|e| e["durability"] == "durable")
        })
        .into_iter()
        .map(|f| f.params().clone())
        .collect();
    Ok(answer.result.map(|result| Resumed { replayed, result }))
}

/// Checks a resume after `live[..from]` against the events written live.
async fn check_resume(
    wire: &mut Wire,
    thread: &str,
    live: &[Value],
    from: usize,
) -> Result<(), Failure> {
    let after = from
        .checked_sub(1)
        .and_then(|at| live[at]["cursor"].as_str());
    let shown = after.map_or("null".to_owned(), |c| format!("cursor {c}"));
    let resumed = resume_once(wire, thread, after).await?.map_err(|error| {
        Failure::new(format!(
            "runtime.events.resume after {shown} answered {error}"
        ))
    })?;
    let count = resumed.result["replayedCount"].as_u64().unwrap_or_default();
    let expected = (live.len() - from) as u64;
    if resumed.replayed.len() as u64 != count {
        wire.settle(QUIET_PERIOD).await?;
        let late = wire
            .drain(|f| {
                f.event_of(thread)
                    .is_some_and(|e| e["durability"] == "durable")
            })
            .len();
        return Err(Failure::new(format!(
            "runtime.events.resume after {shown} answered replayedCount {count}, but {} replayed events came before the answer (the barrier) and {late} after it",
            resumed.replayed.len()
        )));
    }
    ensure!(
        count == expected,
        "runtime.events.resume after {shown} replayed {count} events; {expected} durable events followed it"
    );
    let through = &resumed.result["throughCursor"];
    let last = &live[live.len() - 1]["cursor"];
    ensure!(
        through == last,
        "runtime.events.resume after {shown} answered throughCursor {through}; the last durable event's cursor is {last}"
    );
    let from_cursor = after.map(EventCursor::parse).transpose().ok().flatten();
    let through_cursor = EventCursor::parse(through.as_str().unwrap_or_default()).ok();
    let distance =
        event_cursor_distance(from_cursor.as_ref(), through_cursor.as_ref()).map_err(|e| {
            Failure::new(format!(
                "throughCursor {through} is not in the log of {shown}: {e}"
            ))
        })?;
    ensure!(
        distance == i128::from(count),
        "runtime.events.resume after {shown} answered replayedCount {count}, but throughCursor {through} is {distance} events after it"
    );
    for (replayed, original) in resumed.replayed.iter().zip(&live[from..]) {
        ensure!(
            replayed["eventId"] == original["eventId"]
                && replayed["cursor"] == original["cursor"]
                && replayed["event"] == original["event"],
            "runtime.events.resume after {shown} replayed {}; live it was {}",
            excerpt(replayed),
            excerpt(original)
        );
    }
    Ok(())
}

/// `text` with its last `:`-separated part replaced.
fn with_event_id(cursor: &str, event_id: &str) -> String {
    match cursor.rsplit_once(':') {
        Some((head, _)) => format!("{head}:{event_id}"),
        None => cursor.to_owned(),
    }
}

pub(super) async fn resume(context: &Context) -> Result<(), Failure> {
    let mut wire = context.open().await?;
    let thread = wire.create_thread("resume").await?;
    let empty = resume_once(&mut wire, &thread, None)
        .await?
        .map_err(|error| {
            Failure::new(format!(
                "runtime.events.resume from null on a thread without events answered {error}"
            ))
        })?;
    let expected = json!({"throughCursor": null, "replayedCount": 0});
    ensure!(
        empty.result == expected && empty.replayed.is_empty(),
        "runtime.events.resume from null on a thread without events answered {} after {} events; expected {expected}",
        excerpt(&empty.result),
        empty.replayed.len()
    );
    let script = &context.script;
    let live = durable_turns(
        &mut wire,
        &thread,
        &[&script.text, &script.tool, &script.text],
    )
    .await?;
    check_resume(&mut wire, &thread, &live, 0).await?;
    wire.settle(QUIET_PERIOD).await?;
    if let Some(late) = wire.inbox().find(|f| {
        f.event_of(&thread)
            .is_some_and(|e| e["durability"] == "durable")
    }) {
        return Err(Failure::new(format!(
            "after the resume's answer (the barrier) the runtime wrote frame {}, a durable event of the thread: {}",
            late.index,
            excerpt(&late.value)
        )));
    }
    check_resume(&mut wire, &thread, &live, 2).await?;
    check_resume(&mut wire, &thread, &live, live.len()).await?;

    let other = wire.create_thread("resume, another thread").await?;
    let theirs = durable_turns(&mut wire, &other, &[&script.text]).await?;
    let first = live[0]["cursor"].as_str().unwrap_or_default();
    let log = first.split(':').nth(1).unwrap_or_default();
    let cases = [
        (
            theirs[0]["cursor"].as_str().unwrap_or_default().to_owned(),
            "a cursor of another thread",
        ),
        (
            with_event_id(first, &uuid()),
            "a forged cursor (its event id changed)",
        ),
        (
            format!("rte1:{}:0:{}", uuid(), uuid()),
            "a cursor of an unknown log",
        ),
        (
            format!("rte1:{log}:{}:{}", live.len() + 5, uuid()),
            "a cursor beyond the thread's last event",
        ),
    ];
    for (cursor, what) in cases {
        wire.refused(
            "runtime.events.resume",
            json!({"threadId": thread, "afterCursor": cursor}),
            RollErrorCode::EVENT_CURSOR_GAP,
        )
        .await
        .map_err(|f| Failure::new(format!("resuming after {what}: {f}")))?;
    }
    wire.refused(
        "runtime.events.resume",
        json!({"threadId": thread, "afterCursor": uuid()}),
        RollErrorCode::INVALID_PARAMS,
    )
    .await
    .map_err(|f| Failure::new(format!("resuming after a bare UUID (not a cursor): {f}")))?;
    wire.refused(
        "runtime.events.resume",
        json!({"threadId": uuid(), "afterCursor": null}),
        RollErrorCode::THREAD_NOT_FOUND,
    )
    .await?;
    wire.close().await;
    Ok(())
}

pub(super) async fn resume_expired(context: &Context) -> Result<(), Failure> {
    let Some(hook) = &context.trim_hook else {
        return Err(Failure::new("resume-expired needs a trim hook"));
    };
    let mut wire = context.open().await?;
    let thread = wire.create_thread("expired").await?;
    let checked = expiry_checks(&mut wire, context, hook, &thread).await;
    // The trimmed thread is deleted whatever the checks found, so that later scenarios on the
    // same store never meet it (a runtime that rebuilds threads from their log at start may
    // not be able to rebuild one whose start was trimmed).
    let deleted = wire
        .ok(
            "thread.delete",
            json!({"requestId": uuid(), "threadId": thread}),
        )
        .await;
    checked?;
    deleted?;
    wire.close().await;
    Ok(())
}

async fn expiry_checks(
    wire: &mut Wire,
    context: &Context,
    hook: &TrimHook,
    thread: &str,
) -> Result<(), Failure> {
    let text = context.script.text.as_str();
    let live = durable_turns(wire, thread, &[text, text, text]).await?;
    hook.run(thread, context.timeout)
        .await
        .map_err(Failure::new)?;
    match resume_once(wire, thread, None).await? {
        Ok(resumed) => {
            return Err(Failure::new(format!(
                "after the trim hook removed the oldest events, runtime.events.resume from null answered {} with {} replayed events (of the {} the thread wrote) instead of EVENT_CURSOR_EXPIRED: a trimmed start must never be a shorter replay",
                excerpt(&resumed.result),
                resumed.replayed.len(),
                live.len()
            )));
        }
        Err(error) => ensure!(
            error.roll_code.as_deref() == Some("EVENT_CURSOR_EXPIRED"),
            "after the trim hook removed the oldest events, runtime.events.resume from null answered {error}; expected EVENT_CURSOR_EXPIRED"
        ),
    }
    // After the first event: expired, or (if only that one was trimmed) the whole rest.
    let first = live[0]["cursor"].as_str().unwrap_or_default();
    match resume_once(wire, thread, Some(first)).await? {
        Err(error) => ensure!(
            error.roll_code.as_deref() == Some("EVENT_CURSOR_EXPIRED"),
            "after the trim, runtime.events.resume after the first event answered {error}; expected EVENT_CURSOR_EXPIRED or the whole rest"
        ),
        Ok(resumed) => {
            let count = resumed.result["replayedCount"].as_u64().unwrap_or_default();
            ensure!(
                count == (live.len() - 1) as u64 && resumed.replayed.len() as u64 == count,
                "after the trim, runtime.events.resume after the first event answered {} with {} replayed events; the thread has {} more: a trimmed checkpoint is EVENT_CURSOR_EXPIRED, never a shorter replay",
                excerpt(&resumed.result),
                resumed.replayed.len(),
                live.len() - 1
            );
        }
    }
    // The newest event is kept: resuming after it replays nothing.
    let last = live[live.len() - 1]["cursor"].clone();
    let resumed = resume_once(wire, thread, last.as_str()).await?.map_err(|error| {
        Failure::new(format!(
            "after the trim, runtime.events.resume after the newest event answered {error}; the trim hook keeps the newest event"
        ))
    })?;
    let expected = json!({"throughCursor": last, "replayedCount": 0});
    ensure!(
        resumed.result == expected,
        "after the trim, runtime.events.resume after the newest event answered {}; expected {expected}",
        excerpt(&resumed.result)
    );
    // The fallback still works: a recovery snapshot names the newest event.
    let recovery = wire
        .ok(
            "thread.snapshot",
            json!({"threadId": thread, "limit": 1, "recovery": true}),
        )
        .await?;
    ensure!(
        recovery["eventCursor"] == last,
        "after the trim the recovery snapshot answered eventCursor {}; the newest event is {last}",
        recovery["eventCursor"]
    );
    Ok(())
}

pub(super) async fn recovery_snapshot(context: &Context) -> Result<(), Failure> {
    let mut wire = context.open().await?;
    let thread = wire.create_thread("recovery").await?;
    let turn = wire.start_turn(&thread, &context.script.burst).await?;
    let written = durable(&wire.turn_events(&thread, &turn).await?);
    let last = written
        .last()
        .map(|e| e["cursor"].clone())
        .unwrap_or_default();
    let id = wire
        .request(
            "thread.snapshot",
            json!({"threadId": thread, "limit": 1, "recovery": true}),
        )
        .await?;
    let answer = wire.answer(id).await?;
    let snapshot = answer.result.map_err(|error| {
        Failure::new(format!(
            "thread.snapshot with recovery:true answered {error}"
        ))
    })?;
    ensure!(
        snapshot["recoveryProjection"] == true,
        "thread.snapshot with recovery:true answered a full snapshot (no recoveryProjection: true): {}",
        excerpt(&snapshot)
    );
    let empty = json!({"items": [], "nextBeforeSequence": null});
    ensure!(
        snapshot["messages"] == empty
            && snapshot["operations"] == empty
            && snapshot["pendingApprovals"] == json!([])
            && snapshot["pendingInteractions"] == json!([]),
        "the recovery snapshot carries history; it holds metadata and the checkpoint only: {}",
        excerpt(&snapshot)
    );
    ensure!(
        snapshot["eventCursor"] == last && snapshot["thread"]["id"] == thread.as_str(),
        "the recovery snapshot answered eventCursor {} for thread {}; the thread's last durable event is {last}",
        snapshot["eventCursor"],
        snapshot["thread"]["id"]
    );
    ensure!(
        answer.bytes <= RECOVERY_FRAME_LIMIT,
        "the recovery snapshot of a thread of {} durable events is a frame of {} bytes; it holds metadata only and stays small (at most {RECOVERY_FRAME_LIMIT})",
        written.len(),
        answer.bytes
    );
    let full = wire
        .ok("thread.snapshot", json!({"threadId": thread, "limit": 1}))
        .await?;
    ensure!(
        full.get("recoveryProjection").is_none() && full["eventCursor"] == last,
        "a snapshot without recovery answered recoveryProjection {} and eventCursor {}",
        full["recoveryProjection"],
        full["eventCursor"]
    );
    wire.close().await;
    Ok(())
}
