//! Scenarios of the request methods: every happy path, bad params, methods and params of newer
//! versions, idempotent retries and snapshot paging.

use agentwire_roll::{Feature, Method, ProtocolVersion, RollErrorCode};
use serde_json::{Value, json};

use super::{Context, QUIET_PERIOD};
use crate::conformance::wire::{Failure, Wire, ensure, event_type, excerpt, uuid};

/// Pages of `thread.list` the suite reads looking for a thread, at most.
const MAX_LIST_PAGES: usize = 100;

/// Finds `thread_id` in `thread.list`, paging with `nextCursor`.
async fn listed(wire: &mut Wire, thread_id: &str) -> Result<Value, Failure> {
    let mut cursor: Option<Value> = None;
    for _ in 0..MAX_LIST_PAGES {
        let mut params = json!({"limit": 100});
        if let Some(cursor) = &cursor {
            params["cursor"] = cursor.clone();
        }
        let page = wire.ok("thread.list", params).await?;
        if let Some(found) = page["items"]
            .as_array()
            .and_then(|items| items.iter().find(|t| t["id"] == thread_id))
        {
            return Ok(found.clone());
        }
        match &page["nextCursor"] {
            Value::Null => break,
            next => {
                ensure!(
                    cursor.as_ref() != Some(next),
                    "thread.list answered nextCursor {next} for the page it was asked with it"
                );
                cursor = Some(next.clone());
            }
        }
    }
    Err(Failure::new(format!(
        "thread {thread_id}, just created, is not in thread.list (read up to {MAX_LIST_PAGES} pages)"
    )))
}

/// Waits until a turn that asked for approval has asked: the `approval.required` event on 1.0,
/// the `approval.request` server request from 1.1. Returns the pending approval's id.
async fn asked(
    wire: &mut Wire,
    context: &Context,
    thread_id: &str,
    turn_id: &str,
) -> Result<String, Failure> {
    let what = format!(
        "turn {turn_id} (input {:?}) to ask for approval",
        context.script.approval
    );
    let approval = if context.version == ProtocolVersion::V1_0 {
        let frame = wire
            .wait_for(&what, |f| {
                f.event_of(thread_id)
                    .is_some_and(|e| e["turnId"] == turn_id && event_type(e) == "approval.required")
            })
            .await?;
        frame.params()["event"]["approval"].clone()
    } else {
        let frame = wire
            .wait_for(&what, |f| {
                f.is_server_request("approval.request") && f.params()["threadId"] == thread_id
            })
            .await?;
        frame.params()["approval"].clone()
    };
    approval["id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| Failure::new("the approval has no id"))
}

pub(super) async fn methods(context: &Context) -> Result<(), Failure> {
    let version = context.version;
    let mut wire = context.open().await?;
    let created = wire
        .ok(
            "thread.create",
            json!({"requestId": uuid(), "title": "conformance methods"}),
        )
        .await?;
    let thread = &created["thread"];
    ensure!(
        thread["title"] == "conformance methods" && thread["messageCount"] == 0,
        "thread.create with a title answered {}",
        excerpt(thread)
    );
    let id = thread["id"].as_str().unwrap_or_default().to_owned();

    let first = wire.ok("thread.list", json!({"limit": 1})).await?;
    let items = first["items"].as_array().map_or(0, Vec::len);
    ensure!(
        items == 1,
        "thread.list with limit 1 answered {items} threads, and at least one exists"
    );
    if first["nextCursor"].is_string() {
        let second = wire
            .ok(
                "thread.list",
                json!({"limit": 1, "cursor": first["nextCursor"]}),
            )
            .await?;
        ensure!(
            second["items"][0]["id"] != first["items"][0]["id"],
            "thread.list with nextCursor {} answered the first page's thread again",
            first["nextCursor"]
        );
    }
    listed(&mut wire, &id).await?;

    let renamed = wire
        .ok(
            "thread.rename",
            json!({"requestId": uuid(), "threadId": id, "title": "  renamed by the suite  "}),
        )
        .await?;
    ensure!(
        renamed["thread"]["id"] == id.as_str()
            && renamed["thread"]["title"] == "renamed by the suite",
        "thread.rename to \"  renamed by the suite  \" answered {} (titles are trimmed)",
        excerpt(&renamed)
    );
    let opened = wire.ok("thread.open", json!({"threadId": id})).await?;
    ensure!(
        opened["thread"]["id"] == id.as_str()
            && opened["thread"]["title"] == "renamed by the suite",
        "thread.open answered the thread {}",
        excerpt(&opened["thread"])
    );
    ensure!(
        opened["messages"]["items"] == json!([]) && opened["operations"]["items"] == json!([]),
        "thread.open of a new thread answered messages or operations: {}",
        excerpt(&opened)
    );
    let snapshot = wire
        .ok("thread.snapshot", json!({"threadId": id, "limit": 10}))
        .await?;
    ensure!(
        snapshot["thread"]["id"] == id.as_str(),
        "thread.snapshot answered thread {}",
        snapshot["thread"]["id"]
    );
    if version >= ProtocolVersion::V1_3 {
        ensure!(
            snapshot["eventCursor"].is_null(),
            "the snapshot of a thread without events answered eventCursor {}",
            snapshot["eventCursor"]
        );
    }
    wire.ok("thread.capabilities", json!({"threadId": id}))
        .await?;
    let operation = wire
        .ok(
            "operation.get",
            json!({"threadId": id, "operationId": uuid()}),
        )
        .await?;
    ensure!(
        operation == json!({"operation": null}),
        "operation.get of an unknown operation answered {}; expected {{\"operation\":null}}",
        excerpt(&operation)
    );
    if wire.has_feature(Feature::AppOutput) {
        let result = wire
            .ok(
                "operation.result.get",
                json!({"threadId": id, "operationId": uuid()}),
            )
            .await?;
        ensure!(
            result == json!({"result": null}),
            "operation.result.get of an unknown operation answered {}; expected {{\"result\":null}}",
            excerpt(&result)
        );
    }
    wire.refused(
        "thread.open",
        json!({"threadId": uuid()}),
        RollErrorCode::THREAD_NOT_FOUND,
    )
    .await?;

    let turn = wire.start_turn(&id, &context.script.text).await?;
    let events = wire.turn_events(&id, &turn).await?;
    let kinds: Vec<&str> = events.iter().map(event_type).collect();
    ensure!(
        kinds.first() == Some(&"turn.started") && kinds.last() == Some(&"turn.completed"),
        "the turn {:?} wrote {kinds:?}; expected turn.started first and turn.completed last",
        context.script.text
    );
    let after = wire
        .ok("thread.snapshot", json!({"threadId": id, "limit": 10}))
        .await?;
    let has_input = after["messages"]["items"].as_array().is_some_and(|items| {
        items
            .iter()
            .any(|m| m["role"] == "user" && m["parts"][0]["text"] == context.script.text.as_str())
    });
    ensure!(
        has_input,
        "after the turn the snapshot has no user message {:?}: {}",
        context.script.text,
        excerpt(&after["messages"])
    );

    // turn.cancel on a turn waiting for approval.
    let waiting = wire.start_turn(&id, &context.script.approval).await?;
    asked(&mut wire, context, &id, &waiting).await?;
    let cancel = json!({"requestId": uuid(), "threadId": id, "turnId": waiting});
    let cancelling = wire.ok("turn.cancel", cancel).await?;
    ensure!(
        cancelling == json!({"cancelling": true}),
        "turn.cancel of a turn waiting for approval answered {}",
        excerpt(&cancelling)
    );
    let events = wire.turn_events(&id, &waiting).await?;
    let last = events.last().map(event_type).unwrap_or_default();
    ensure!(
        last == "turn.cancelled",
        "the cancelled turn ended with {last}, not turn.cancelled"
    );
    wire.refused(
        "turn.cancel",
        json!({"requestId": uuid(), "threadId": id, "turnId": waiting}),
        RollErrorCode::TURN_NOT_FOUND,
    )
    .await?;

    let detached = wire
        .ok(
            "thread.detach",
            json!({"requestId": uuid(), "threadId": id}),
        )
        .await?;
    ensure!(
        detached["detached"].is_boolean(),
        "thread.detach answered {}",
        excerpt(&detached)
    );
    let deleted = wire
        .ok(
            "thread.delete",
            json!({"requestId": uuid(), "threadId": id}),
        )
        .await?;
    ensure!(
        deleted == json!({"deleted": true}),
        "thread.delete answered {}",
        excerpt(&deleted)
    );
    wire.refused(
        "thread.snapshot",
        json!({"threadId": id, "limit": 1}),
        RollErrorCode::THREAD_NOT_FOUND,
    )
    .await?;
    wire.close().await;
    Ok(())
}

pub(super) async fn bad_params(context: &Context) -> Result<(), Failure> {
    let mut wire = context.open().await?;
    let thread = wire.create_thread("bad params").await?;
    let cases = [
        (
            "thread.create",
            json!({"requestId": uuid(), "title": 5}),
            "a title that is a number",
        ),
        (
            "thread.create",
            json!({"requestId": "not-a-uuid"}),
            "a requestId that is not a UUID",
        ),
        ("thread.list", json!({"limit": 0}), "limit 0"),
        ("thread.list", json!({"limit": 501}), "limit 501"),
        ("thread.snapshot", json!({"limit": 1}), "no threadId"),
        (
            "thread.capabilities",
            json!({"threadId": thread, "extra": true}),
            "an unknown key",
        ),
        (
            "thread.rename",
            json!({"requestId": uuid(), "threadId": thread, "title": ""}),
            "an empty title",
        ),
        (
            "turn.start",
            json!({"requestId": uuid(), "threadId": thread, "turnId": "turn-1", "input": {"text": "x"}}),
            "a turnId that is not a UUID",
        ),
        (
            "operation.get",
            json!({"threadId": thread}),
            "no operationId",
        ),
    ];
    for (method, params, what) in cases {
        wire.refused(method, params, RollErrorCode::INVALID_PARAMS)
            .await
            .map_err(|f| Failure::new(format!("{method} with {what}: {f}")))?;
    }
    wire.refused_with_code("thread.fly", json!({}), -32601)
        .await?;
    // The session goes on.
    let snapshot = wire
        .ok("thread.snapshot", json!({"threadId": thread, "limit": 1}))
        .await?;
    ensure!(
        snapshot["thread"]["id"] == thread.as_str(),
        "after the refused calls thread.snapshot answered thread {}",
        snapshot["thread"]["id"]
    );
    wire.close().await;
    Ok(())
}

pub(super) async fn newer_version(context: &Context) -> Result<(), Failure> {
    let version = context.version;
    let mut wire = context.open().await?;
    let thread = wire.create_thread("newer version").await?;
    for method in Method::ALL.into_iter().filter(|m| m.since() > version) {
        wire.refused_with_code(method.as_str(), json!({}), -32601)
            .await
            .map_err(|f| {
                Failure::new(format!(
                    "{} exists from {}, so on {version} it is method not found: {f}",
                    method.as_str(),
                    method.since()
                ))
            })?;
    }
    if version < ProtocolVersion::V1_3 {
        wire.refused(
            "thread.snapshot",
            json!({"threadId": thread, "limit": 1, "recovery": true}),
            RollErrorCode::INVALID_PARAMS,
        )
        .await
        .map_err(|f| Failure::new(format!("recovery snapshots exist from 1.3: {f}")))?;
    }
    if version < ProtocolVersion::V1_4 {
        let attachments = json!({"requestId": uuid(), "threadId": thread, "turnId": uuid(),
            "input": {"text": "x", "attachments": [uuid()]}});
        wire.refused("turn.start", attachments, RollErrorCode::INVALID_PARAMS)
            .await
            .map_err(|f| Failure::new(format!("turn attachments exist from 1.4: {f}")))?;
        let empty = json!({"requestId": uuid(), "threadId": thread, "turnId": uuid(),
            "input": {"text": ""}});
        wire.refused("turn.start", empty, RollErrorCode::INVALID_PARAMS)
            .await
            .map_err(|f| {
                Failure::new(format!("a turn without text is allowed from 1.4 only: {f}"))
            })?;
    }
    wire.close().await;
    Ok(())
}

pub(super) async fn idempotency(context: &Context) -> Result<(), Failure> {
    let mut wire = context.open().await?;
    let request_id = uuid();
    let create = json!({"requestId": request_id, "title": "idempotent"});
    let first = wire.ok("thread.create", create.clone()).await?;
    let retry = wire.ok("thread.create", create.clone()).await?;
    ensure!(
        first == retry,
        "thread.create retried with the same requestId answered {}, the first time {}",
        excerpt(&retry),
        excerpt(&first)
    );
    let thread = first["thread"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    wire.refused(
        "thread.create",
        json!({"requestId": request_id, "title": "another title"}),
        RollErrorCode::INVALID_PARAMS,
    )
    .await
    .map_err(|f| Failure::new(format!("a requestId reused with other params: {f}")))?;
    wire.refused(
        "thread.rename",
        json!({"requestId": request_id, "threadId": thread, "title": "x"}),
        RollErrorCode::INVALID_PARAMS,
    )
    .await
    .map_err(|f| Failure::new(format!("a requestId reused for another method: {f}")))?;

    let rename = json!({"requestId": uuid(), "threadId": thread, "title": "renamed once"});
    let renamed = wire.ok("thread.rename", rename.clone()).await?;
    let again = wire.ok("thread.rename", rename).await?;
    ensure!(
        renamed == again,
        "thread.rename retried answered {}, the first time {}",
        excerpt(&again),
        excerpt(&renamed)
    );

    let turn_id = uuid();
    let start = json!({"requestId": uuid(), "threadId": thread, "turnId": turn_id,
        "input": {"text": context.script.text}});
    let accepted = wire.ok("turn.start", start.clone()).await?;
    let retried = wire.ok("turn.start", start).await?;
    let same_turn = wire
        .ok(
            "turn.start",
            json!({"requestId": uuid(), "threadId": thread, "turnId": turn_id,
                "input": {"text": context.script.text}}),
        )
        .await?;
    ensure!(
        accepted == retried && accepted == same_turn,
        "turn.start retried (same requestId: {}; same turnId, new requestId: {}) differs from the first answer {}",
        excerpt(&retried),
        excerpt(&same_turn),
        excerpt(&accepted)
    );
    let events = wire.turn_events(&thread, &turn_id).await?;
    wire.settle(QUIET_PERIOD).await?;
    let started = events
        .iter()
        .filter(|e| event_type(e) == "turn.started")
        .count()
        + wire
            .inbox()
            .filter(|f| {
                f.event_of(&thread).is_some_and(|e| {
                    e["turnId"] == turn_id.as_str() && event_type(e) == "turn.started"
                })
            })
            .count();
    ensure!(
        started == 1,
        "three starts of turn {turn_id} (one retry by requestId, one by turnId) started it {started} times"
    );

    let delete = json!({"requestId": uuid(), "threadId": thread});
    let deleted = wire.ok("thread.delete", delete.clone()).await?;
    let again = wire.ok("thread.delete", delete).await?;
    ensure!(
        deleted == json!({"deleted": true}) && again == deleted,
        "thread.delete and its retry answered {} and {}",
        excerpt(&deleted),
        excerpt(&again)
    );
    wire.close().await;
    Ok(())
}

/// Reads every page of one list of a snapshot (`messages` or `operations`) with `limit`,
/// checking each page against the rules, and returns the items oldest first.
async fn page_through(
    wire: &mut Wire,
    thread: &str,
    list: &str,
    before_key: &str,
    limit: u64,
    other_first_page: &Value,
    bound: usize,
) -> Result<Vec<Value>, Failure> {
    let other = if list == "messages" {
        "operations"
    } else {
        "messages"
    };
    let mut pages: Vec<Vec<Value>> = Vec::new();
    let mut before: Option<u64> = None;
    loop {
        let mut params = json!({"threadId": thread, "limit": limit});
        if let Some(before) = before {
            params[before_key] = json!(before);
        }
        let page = wire.ok("thread.snapshot", params.clone()).await?;
        let items = page[list]["items"].as_array().cloned().unwrap_or_default();
        let shown = excerpt(&params);
        ensure!(
            !items.is_empty() && items.len() as u64 <= limit,
            "thread.snapshot {shown} answered {} {list} (limit {limit}{})",
            items.len(),
            if before.is_some() {
                ", after a nextBeforeSequence"
            } else {
                ""
            }
        );
        let sequences: Vec<u64> = items
            .iter()
            .filter_map(|i| i["sequence"].as_u64())
            .collect();
        ensure!(
            sequences.windows(2).all(|w| w[0] < w[1]),
            "thread.snapshot {shown} answered {list} with sequences {sequences:?}; a page is ordered oldest first"
        );
        if let Some(before) = before {
            ensure!(
                sequences.iter().all(|s| *s < before),
                "thread.snapshot {shown} answered {list} with sequences {sequences:?}, not all before {before}"
            );
            ensure!(
                page[other] == *other_first_page,
                "thread.snapshot {shown} changed the first page of {other} ({}); the two lists page independently",
                excerpt(&page[other])
            );
        }
        pages.push(items);
        match page[list]["nextBeforeSequence"].as_u64() {
            None => break,
            Some(next) => {
                ensure!(
                    pages.len() <= bound,
                    "thread.snapshot kept answering a nextBeforeSequence for {list} after {bound} pages"
                );
                before = Some(next);
            }
        }
    }
    Ok(pages.into_iter().rev().flatten().collect())
}

pub(super) async fn snapshot_paging(context: &Context) -> Result<(), Failure> {
    let mut wire = context.open().await?;
    let thread = wire.create_thread("paging").await?;
    let script = &context.script;
    for text in [
        &script.text,
        &script.tool,
        &script.text,
        &script.tool,
        &script.text,
    ] {
        let turn = wire.start_turn(&thread, text).await?;
        wire.turn_events(&thread, &turn).await?;
    }
    let full = wire
        .ok("thread.snapshot", json!({"threadId": thread, "limit": 100}))
        .await?;
    let messages = full["messages"]["items"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let operations = full["operations"]["items"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    ensure!(
        messages.len() >= 5,
        "after 5 turns the snapshot has {} messages; each turn's input is a user message",
        messages.len()
    );
    ensure!(
        operations.len() >= 2,
        "after 2 tool turns ({:?}) the snapshot has {} operations",
        script.tool,
        operations.len()
    );
    ensure!(
        full["messages"]["nextBeforeSequence"].is_null()
            && full["operations"]["nextBeforeSequence"].is_null(),
        "a snapshot with limit 100 of a thread of {} messages and {} operations answered a nextBeforeSequence",
        messages.len(),
        operations.len()
    );
    let first_two = wire
        .ok("thread.snapshot", json!({"threadId": thread, "limit": 2}))
        .await?;
    let newest: Vec<Value> = messages[messages.len() - 2..].to_vec();
    ensure!(
        first_two["messages"]["items"] == json!(newest),
        "the first page of messages with limit 2 is {}; expected the newest two, oldest first: {}",
        excerpt(&first_two["messages"]["items"]),
        excerpt(&json!(newest))
    );
    let paged = page_through(
        &mut wire,
        &thread,
        "messages",
        "messageBeforeSequence",
        2,
        &first_two["operations"],
        messages.len(),
    )
    .await?;
    ensure!(
        paged == messages,
        "paging messages by 2 gave {} messages {}; the whole list is {}",
        paged.len(),
        excerpt(&json!(paged)),
        excerpt(&json!(messages))
    );
    let first_one = wire
        .ok("thread.snapshot", json!({"threadId": thread, "limit": 1}))
        .await?;
    let paged = page_through(
        &mut wire,
        &thread,
        "operations",
        "operationBeforeSequence",
        1,
        &first_one["messages"],
        operations.len(),
    )
    .await?;
    ensure!(
        paged == operations,
        "paging operations by 1 gave {} operations {}; the whole list is {}",
        paged.len(),
        excerpt(&json!(paged)),
        excerpt(&json!(operations))
    );
    wire.close().await;
    Ok(())
}
