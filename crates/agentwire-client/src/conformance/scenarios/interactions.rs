//! Scenarios of the interactions a turn asks the host for: approvals on each version's write
//! path and user-input forms (1.2+).

use agentwire_roll::user_input::{
    Control, SubmittedValue, UserInputResult, normalize_user_input_result_for_form, validate_form,
};
use agentwire_roll::{ProtocolVersion, RollErrorCode};
use serde_json::{Number, Value, json};

use super::Context;
use crate::conformance::wire::{Failure, Frame, Wire, ensure, event_type, excerpt, uuid};

/// The reason the suite gives when it rejects or cancels.
const REASON: &str = "answered by the conformance suite";

async fn snapshot(wire: &mut Wire, thread: &str) -> Result<Value, Failure> {
    wire.ok("thread.snapshot", json!({"threadId": thread, "limit": 10}))
        .await
}

fn lists_approval(snapshot: &Value, approval_id: &str) -> bool {
    snapshot["pendingApprovals"]
        .as_array()
        .is_some_and(|items| items.iter().any(|a| a["id"] == approval_id))
}

fn lists_interaction(snapshot: &Value, method: &str, interaction_id: &Value) -> bool {
    snapshot["pendingInteractions"]
        .as_array()
        .is_some_and(|items| {
            items
                .iter()
                .any(|i| i["method"] == method && i["interactionId"] == *interaction_id)
        })
}

pub(super) async fn approval(context: &Context) -> Result<(), Failure> {
    let version = context.version;
    let mut wire = context.open().await?;
    let thread = wire.create_thread("approvals").await?;
    let input = context.script.approval.as_str();
    for approve in [true, false] {
        let decision = if approve { "approve" } else { "reject" };
        let turn = wire.start_turn(&thread, input).await?;
        let what = format!("turn {turn} (input {input:?}) to ask for approval");
        let approval_id = if version == ProtocolVersion::V1_0 {
            // 1.0: the approval.required event is the control event; approval.respond answers.
            let required = wire
                .wait_for(&what, |f| {
                    f.event_of(&thread).is_some_and(|e| {
                        e["turnId"] == turn && event_type(e) == "approval.required"
                    })
                })
                .await?;
            let approval_id = required.params()["event"]["approval"]["id"].clone();
            let id = approval_id.as_str().unwrap_or_default().to_owned();
            let pending = snapshot(&mut wire, &thread).await?;
            ensure!(
                lists_approval(&pending, &id),
                "while approval {id} waits, the snapshot's pendingApprovals is {}",
                excerpt(&pending["pendingApprovals"])
            );
            let mut respond = json!({"requestId": uuid(), "threadId": thread, "turnId": turn,
                "approvalId": approval_id, "decision": decision});
            if !approve {
                respond["reason"] = json!(REASON);
            }
            let answered = wire.ok("approval.respond", respond).await?;
            ensure!(
                answered == json!({"resolved": true}),
                "approval.respond answered {}",
                excerpt(&answered)
            );
            id
        } else {
            let request = wire
                .wait_for(&what, |f| {
                    f.is_server_request("approval.request") && f.params()["threadId"] == thread
                })
                .await?;
            let params = request.params().clone();
            let approval = &params["approval"];
            let id = approval["id"].as_str().unwrap_or_default().to_owned();
            ensure!(
                approval["turnId"] == turn
                    && (version == ProtocolVersion::V1_1 || params["turnId"] == turn),
                "the approval.request of turn {turn} names turn {}: {}",
                approval["turnId"],
                excerpt(&params)
            );
            // Only frames read before the request count: the inbox may already hold frames
            // that followed it in the same read.
            let required_first = wire.inbox().find(|f: &&Frame| {
                f.index < request.index
                    && f.event_of(&thread).is_some_and(|e| {
                        event_type(e) == "approval.required" && e["event"]["approval"]["id"] == id
                    })
            });
            if let Some(early) = required_first {
                return Err(Failure::new(format!(
                    "frame {}, the approval.required event of approval {id}, came before its approval.request (frame {}); the runtime sends the request first",
                    early.index, request.index
                )));
            }
            let pending = snapshot(&mut wire, &thread).await?;
            ensure!(
                lists_approval(&pending, &id),
                "while approval {id} waits, the snapshot's pendingApprovals is {}",
                excerpt(&pending["pendingApprovals"])
            );
            if version >= ProtocolVersion::V1_2 {
                ensure!(
                    lists_interaction(&pending, "approval.request", &params["interactionId"]),
                    "while approval {id} waits, the snapshot's pendingInteractions is {}",
                    excerpt(&pending["pendingInteractions"])
                );
            }
            let answer = if approve {
                json!({"decision": "approve"})
            } else {
                json!({"decision": "reject", "reason": REASON})
            };
            wire.respond(request.id(), answer).await?;
            id
        };
        let events = wire.turn_events(&thread, &turn).await?;
        let last = events.last().map(event_type).unwrap_or_default();
        ensure!(
            last != "turn.failed",
            "the turn whose approval was answered {decision} failed: {}",
            excerpt(events.last().unwrap_or(&Value::Null))
        );
        if version >= ProtocolVersion::V1_1 {
            let resolved = events.iter().find(|e| {
                event_type(e) == "approval.resolved" && e["event"]["approvalId"] == approval_id
            });
            let resolution = resolved.map(|e| e["event"]["resolution"].clone());
            ensure!(
                resolution
                    .as_ref()
                    .is_some_and(|r| r["status"] == "resolved" && r["decision"] == decision),
                "approval {approval_id}, answered {decision}, resolved as {}",
                resolution.map_or("nothing (no approval.resolved event)".to_owned(), |r| {
                    excerpt(&r)
                })
            );
        }
        let ran = events.iter().any(|e| {
            event_type(e) == "tool.completed" && e["event"]["outcome"]["kind"] == "success"
        });
        ensure!(
            approve || !ran,
            "a tool completed successfully although its approval was rejected"
        );
        let after = snapshot(&mut wire, &thread).await?;
        ensure!(
            !lists_approval(&after, &approval_id),
            "after approval {approval_id} was answered the snapshot still lists it as pending"
        );
    }
    if version == ProtocolVersion::V1_0 {
        let turn = wire.start_turn(&thread, &context.script.text).await?;
        wire.turn_events(&thread, &turn).await?;
        wire.refused(
            "approval.respond",
            json!({"requestId": uuid(), "threadId": thread, "turnId": turn,
                "approvalId": uuid(), "decision": "approve"}),
            RollErrorCode::APPROVAL_NOT_FOUND,
        )
        .await?;
    } else {
        wire.refused(
            "approval.respond",
            json!({"requestId": uuid(), "threadId": thread, "turnId": uuid(),
                "approvalId": uuid(), "decision": "approve"}),
            RollErrorCode::CAPABILITY_UNAVAILABLE,
        )
        .await
        .map_err(|f| {
            Failure::new(format!(
                "from 1.1 approvals are answered through approval.request only: {f}"
            ))
        })?;
    }
    wire.close().await;
    Ok(())
}

/// A text of `length` characters.
fn text_of(length: usize) -> String {
    "conformance".chars().cycle().take(length).collect()
}

/// A number within the control's bounds (an integer when it asks for one).
fn number_for(min: Option<f64>, max: Option<f64>, integer: bool) -> Option<Number> {
    let mut value = match (min, max) {
        (Some(min), _) => min,
        (None, Some(max)) => max.min(0.0),
        (None, None) => 1.0,
    };
    if integer {
        value = value.ceil();
        if max.is_some_and(|max| value > max) {
            value = value.floor();
        }
        if value.abs() < 9_007_199_254_740_992.0 {
            // Whole and within ±2^53, so the conversion is exact.
            return Some(Number::from(value as i64));
        }
    }
    Number::from_f64(value)
}

/// An answer to every control of a form that its rules accept.
fn fill(controls: &[Control]) -> Result<UserInputResult, String> {
    let mut values = Vec::with_capacity(controls.len());
    for control in controls {
        let value = match control {
            Control::Text(c) | Control::Multiline(c) => {
                let (min, max) = c.length_bounds();
                json!(text_of(11usize.clamp(min, max.max(min))))
            }
            Control::Number(c) => match number_for(c.min, c.max, c.integer == Some(true)) {
                Some(number) => Value::Number(number),
                None => return Err(format!("control {} has no finite number to give", c.id)),
            },
            Control::Boolean(_) => json!(true),
            Control::Choice(c) if !c.multiple => match c.options.first() {
                Some(option) => json!(option.id),
                None => return Err(format!("choice {} has no options", c.id)),
            },
            Control::Choice(c) => {
                let count = c
                    .effective_min_selections()
                    .max(1)
                    .min(c.effective_max_selections())
                    .min(c.options.len());
                json!(
                    c.options
                        .iter()
                        .take(count)
                        .map(|o| o.id.as_str())
                        .collect::<Vec<_>>()
                )
            }
        };
        values.push(SubmittedValue {
            id: control.id().to_owned(),
            value,
        });
    }
    normalize_user_input_result_for_form(controls, UserInputResult::Submitted { values })
        .map_err(|e| e.to_string())
}

pub(super) async fn user_input(context: &Context) -> Result<(), Failure> {
    let mut wire = context.open().await?;
    let thread = wire.create_thread("user input").await?;
    let input = context.script.user_input.as_str();
    for submit in [true, false] {
        let turn = wire.start_turn(&thread, input).await?;
        let request = wire
            .wait_for(
                &format!("turn {turn} (input {input:?}) to ask the user"),
                |f| f.is_server_request("userInput.request") && f.params()["threadId"] == thread,
            )
            .await?;
        let params = request.params().clone();
        ensure!(
            params["turnId"] == turn,
            "the userInput.request of turn {turn} names turn {}",
            params["turnId"]
        );
        let controls: Vec<Control> =
            serde_json::from_value(params["controls"].clone()).map_err(|e| {
                Failure::new(format!(
                    "the form's controls cannot be read ({e}): {}",
                    excerpt(&params["controls"])
                ))
            })?;
        validate_form(&controls).map_err(|e| {
            Failure::new(format!(
                "the userInput.request form breaks the form rules ({}): {e}",
                e.code()
            ))
        })?;
        let waiting = snapshot(&mut wire, &thread).await?;
        ensure!(
            waiting["activeTurn"]["status"] == "waiting-for-user",
            "while the form is open the snapshot's activeTurn is {}; expected status waiting-for-user",
            excerpt(&waiting["activeTurn"])
        );
        ensure!(
            lists_interaction(&waiting, "userInput.request", &params["interactionId"]),
            "while the form is open the snapshot's pendingInteractions is {}",
            excerpt(&waiting["pendingInteractions"])
        );
        let answer = if submit {
            fill(&controls).map_err(|e| {
                Failure::new(format!(
                    "the suite could not fill the form {}: {e}",
                    excerpt(&params["controls"])
                ))
            })?
        } else {
            UserInputResult::Cancelled {
                reason: Some(REASON.to_owned()),
            }
        };
        let answer = serde_json::to_value(&answer)
            .map_err(|e| Failure::new(format!("cannot encode the answer: {e}")))?;
        wire.respond(request.id(), answer.clone()).await?;
        let events = wire.turn_events(&thread, &turn).await?;
        let last = events.last().map(event_type).unwrap_or_default();
        ensure!(
            last != "turn.failed",
            "the turn failed after the valid answer {}: {}",
            excerpt(&answer),
            excerpt(events.last().unwrap_or(&Value::Null))
        );
        let after = snapshot(&mut wire, &thread).await?;
        ensure!(
            !lists_interaction(&after, "userInput.request", &params["interactionId"]),
            "after the form was answered the snapshot still lists it as pending"
        );
    }
    wire.close().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_filled_form_is_one_its_rules_accept() {
        let controls: Vec<Control> = serde_json::from_value(json!([
            {"type": "text", "id": "name", "label": "Name", "required": true, "minLength": 20},
            {"type": "multiline", "id": "notes", "label": "Notes", "required": false, "maxLength": 3},
            {"type": "number", "id": "n", "label": "N", "required": true, "min": 1.5, "max": 4, "integer": true},
            {"type": "number", "id": "m", "label": "M", "required": true, "max": -3},
            {"type": "boolean", "id": "b", "label": "B", "required": true},
            {"type": "choice", "id": "one", "label": "One", "required": true, "multiple": false,
             "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}]},
            {"type": "choice", "id": "many", "label": "Many", "required": true, "multiple": true,
             "minSelections": 2, "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}, {"id": "c", "label": "C"}]}
        ]))
        .unwrap();
        validate_form(&controls).unwrap();
        let UserInputResult::Submitted { values } = fill(&controls).unwrap() else {
            panic!("submitted");
        };
        let value = |id: &str| values.iter().find(|v| v.id == id).unwrap().value.clone();
        assert_eq!(value("name").as_str().unwrap().len(), 20);
        assert_eq!(value("notes"), json!("con"));
        assert_eq!(value("n"), json!(2));
        assert_eq!(value("m"), json!(-3.0));
        assert_eq!(value("many"), json!(["a", "b"]));
    }
}
