//! The event stream of a connection: durable and ephemeral events forwarded live as
//! `runtime.event` envelopes, and `runtime.events.resume`'s replay from the log up to its
//! barrier.

use std::collections::HashMap;
use std::sync::Arc;

use agentwire_jsonrpc::{ErrorObject, FrameError, NotificationBatch, Peer, RequestContext};
use agentwire_roll::cursor::CursorWriter;
use agentwire_roll::types::{RuntimeEventsResumeParams, RuntimeEventsResumeResult};
use agentwire_roll::{ProtocolVersion, RollErrorCode};
use agentwire_runtime::event::view::StoredView;
use agentwire_runtime::{
    Published, Runtime, RuntimeError, StampedEvent, Subscription, ThreadEvent,
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::super::wire;
use super::Session;
use super::attached::Attaching;

/// Events read from the log per page while replaying: the most one read returns.
const REPLAY_PAGE: usize = agentwire_events::MAX_PAGE_EVENTS;

/// Bytes of stored events a replay's reader holds ahead of the writer: it reads on while the
/// pages not yet written hold less. A single page over the budget takes all of it, so at most
/// one such page waits at a time.
const READ_AHEAD_BYTES: usize = 8 * 1024 * 1024;

/// Pages a replay's reader may queue, within [`READ_AHEAD_BYTES`].
const READ_AHEAD_PAGES: usize = 3;

impl Session {
    pub(super) async fn resume(
        &self,
        ctx: &RequestContext,
        version: ProtocolVersion,
        params: RuntimeEventsResumeParams,
    ) -> Result<RuntimeEventsResumeResult, ErrorObject> {
        let thread_id = params.thread_id.as_str();
        let runtime = &self.face.runtime;
        // Attached before the replay's end is read, so every later event is sent live: the
        // replay and the live stream may overlap (the client de-duplicates by eventId) but
        // never leave a gap.
        // A refused or failed resume leaves the connection as it found it.
        let attaching = Attaching::new(&self.attached, thread_id);
        let timeline = runtime
            .inspect(thread_id, |state| state.timeline.clone())
            .await
            .map_err(|error| self.runtime_error(&error))?;
        let log_id = self.face.event_log_id(thread_id);
        let gap = |message: String| self.err(RollErrorCode::EVENT_CURSOR_GAP, message);
        let checkpoint = match params.after_cursor {
            None => None,
            Some(cursor) => {
                cursor.ensure_log(&log_id).map_err(|e| gap(e.to_string()))?;
                self.face
                    .key()
                    .verify(&cursor)
                    .map_err(|e| gap(e.to_string()))?;
                if cursor.sequence() >= timeline.len() as u64 {
                    return Err(gap(format!(
                        "the cursor is beyond the thread's {} durable events",
                        timeline.len()
                    )));
                }
                Some(cursor)
            }
        };
        let low_watermark = runtime
            .low_watermark(thread_id)
            .await
            .map_err(|e| self.runtime_error(&e))?;
        let start = checkpoint.as_ref().map_or(0, |c| c.sequence() as usize + 1);
        let expired = match &checkpoint {
            None => low_watermark > 0,
            Some(c) => timeline[c.sequence() as usize] < low_watermark,
        };
        if expired {
            return Err(self.err(
                RollErrorCode::EVENT_CURSOR_EXPIRED,
                "the events after this cursor were trimmed from the log",
            ));
        }
        let peer = ctx.peer();
        // One replay of the connection at a time: each holds up to `READ_AHEAD_BYTES` read
        // ahead and the page it writes, so a connection that does not read, sent many resumes,
        // holds one replay's worth, not one per resume.
        let _replaying = self.replaying.lock().await;
        let mut ordinal = start;
        let from = timeline.get(start).copied().unwrap_or(0);
        // The next page is read while this one is encoded and written.
        let total = timeline.len();
        let cursors = CursorWriter::new(self.face.key(), log_id);
        let mut writer = wire::EnvelopeWriter::new(version, runtime.instance_id(), thread_id);
        let mut pages = read_ahead(
            runtime.clone(),
            thread_id.to_owned(),
            from,
            Arc::new(timeline),
            start,
            READ_AHEAD_BYTES,
        );
        while ordinal < total {
            let Some(page) = pages.recv().await else {
                break;
            };
            let (events, _read_ahead) = page.map_err(|e| match e {
                RuntimeError::Log(agentwire_events::Error::Expired { .. }) => self.err(
                    RollErrorCode::EVENT_CURSOR_EXPIRED,
                    "the events after this cursor were trimmed from the log",
                ),
                other => self.runtime_error(&other),
            })?;
            if let Some((last, _)) = events.last() {
                ordinal = *last as usize + 1;
            }
            // Each event is written from its stored view (its fields copied as stored) or, when
            // the view does not read it, from its decode.
            let mut batch = peer.notification_batch("runtime.event", events.len());
            for (ordinal, payload) in &events {
                let durability = wire::Durability::Durable {
                    cursors: &cursors,
                    ordinal: *ordinal,
                };
                let written = match StoredView::parse(payload) {
                    Some(view) => match wire::stored_event(&view.event).project(version) {
                        Some(event) => batch.push_with(|out| {
                            let sequence = self.face.next_sequence();
                            let turn_id = view.event.turn_id();
                            writer
                                .write(out, sequence, view.at_ms, turn_id, &event, durability)
                                .map_err(stamp_error)
                        }),
                        None => Ok(()),
                    },
                    None => {
                        let stamped =
                            serde_json::from_slice::<StampedEvent>(payload).map_err(|error| {
                                self.err(
                                    RollErrorCode::INTERNAL_ERROR,
                                    format!("undecodable event: {error}"),
                                )
                            })?;
                        let event = wire::durable_event(&stamped.event)
                            .and_then(|event| event.project(version));
                        match event {
                            Some(event) => batch.push_with(|out| {
                                let sequence = self.face.next_sequence();
                                let turn_id = stamped.event.turn_id();
                                writer
                                    .write(
                                        out,
                                        sequence,
                                        stamped.at_ms,
                                        turn_id,
                                        &event,
                                        durability,
                                    )
                                    .map_err(stamp_error)
                            }),
                            None => Ok(()),
                        }
                    }
                };
                written.map_err(|error| {
                    self.err(
                        RollErrorCode::INTERNAL_ERROR,
                        format!("event {ordinal} cannot be sent: {error}"),
                    )
                })?;
            }
            peer.send_batch(batch)
                .await
                .map_err(|_| self.err(RollErrorCode::RUNTIME_CLOSING, "connection closed"))?;
        }
        attaching.keep();
        Ok(RuntimeEventsResumeResult {
            through_cursor: self.event_cursor(thread_id, total),
            replayed_count: ordinal.saturating_sub(start) as u64,
        })
    }

    /// Forwards what the runtime publishes, for as long as the connection lasts. The
    /// subscription reads back from the log whatever this connection fell behind on, so every
    /// durable event and every interaction reaches it.
    pub(super) async fn pump(self: Arc<Self>, mut published: Subscription) {
        let mut ready = Vec::new();
        while let Some(event) = published.recv_until_stopped().await {
            ready.push(event);
            while ready.len() < PUMP_BATCH {
                let Some(event) = published.try_recv() else {
                    break;
                };
                ready.push(event);
            }
            self.forward(&mut ready).await;
        }
    }

    /// Sends what the runtime published, in order, as few writes: the envelopes of the events
    /// of attached threads in one batch (one envelope writer and one cursor writer per thread),
    /// cut where an interaction opens (its server request goes out first, the view-only event
    /// after it) or ends (its request is withdrawn).
    async fn forward(self: &Arc<Self>, events: &mut Vec<Published>) {
        let (Some(version), Some(peer)) = (self.version(), self.peer.get()) else {
            events.clear();
            return;
        };
        let mut batch = peer.notification_batch("runtime.event", events.len());
        let mut writers: HashMap<String, (wire::EnvelopeWriter, CursorWriter)> = HashMap::new();
        for published in events.drain(..) {
            match published {
                Published::Durable {
                    thread_id,
                    ordinal,
                    event,
                    ..
                } => {
                    match &event.event {
                        ThreadEvent::InteractionOpened { interaction } => {
                            send(peer, &mut batch).await;
                            self.deliver(&thread_id, interaction.clone()).await;
                        }
                        ThreadEvent::InteractionResolved {
                            interaction_id,
                            resolution,
                            ..
                        } => {
                            send(peer, &mut batch).await;
                            self.withdraw(interaction_id, resolution);
                        }
                        _ => {}
                    }
                    let Some(ordinal) = ordinal else { continue };
                    if !self.is_attached(&thread_id) {
                        continue;
                    }
                    let Some(roll) =
                        wire::durable_event(&event.event).and_then(|roll| roll.project(version))
                    else {
                        continue;
                    };
                    let (writer, cursors) = self.writers_of(&mut writers, version, &thread_id);
                    let durability = wire::Durability::Durable { cursors, ordinal };
                    let _ = batch.push_with(|out| {
                        writer
                            .write(
                                out,
                                self.face.next_sequence(),
                                event.at_ms,
                                event.event.turn_id(),
                                &roll,
                                durability,
                            )
                            .map_err(stamp_error)
                    });
                }
                Published::Live {
                    thread_id,
                    turn_id,
                    event,
                } => {
                    if !self.is_attached(&thread_id) {
                        continue;
                    }
                    let Some(roll) = wire::live_event(&event).project(version) else {
                        continue;
                    };
                    let at_ms = self.face.runtime.now_ms();
                    let (writer, _) = self.writers_of(&mut writers, version, &thread_id);
                    let _ = batch.push_with(|out| {
                        writer
                            .write(
                                out,
                                self.face.next_sequence(),
                                at_ms,
                                Some(turn_id.as_str()),
                                &roll,
                                wire::Durability::Ephemeral,
                            )
                            .map_err(stamp_error)
                    });
                }
            }
        }
        send(peer, &mut batch).await;
    }

    /// The envelope and cursor writers of `thread_id` for one forwarded batch.
    fn writers_of<'w>(
        &self,
        writers: &'w mut HashMap<String, (wire::EnvelopeWriter, CursorWriter)>,
        version: ProtocolVersion,
        thread_id: &str,
    ) -> (&'w mut wire::EnvelopeWriter, &'w CursorWriter) {
        let (writer, cursors) = writers.entry(thread_id.to_owned()).or_insert_with(|| {
            (
                wire::EnvelopeWriter::new(version, self.face.runtime.instance_id(), thread_id),
                CursorWriter::new(self.face.key(), self.face.event_log_id(thread_id)),
            )
        });
        (writer, cursors)
    }
}

/// Sends the envelopes batched so far (an envelope that cannot be sent was dropped as a failed
/// send would be) and starts the next batch.
async fn send(peer: &Peer, batch: &mut NotificationBatch) {
    if batch.is_empty() {
        return;
    }
    let full = std::mem::replace(batch, peer.notification_batch("runtime.event", 16));
    let _ = peer.send_batch(full).await;
}

/// Events forwarded as one batch at most.
const PUMP_BATCH: usize = 1_024;

/// The error of an envelope whose stamp has no RFC 3339 form.
fn stamp_error(_: std::fmt::Error) -> FrameError {
    FrameError::Encode("a stamp past the year 9999".into())
}

/// Stored timeline events with their ordinals, as read for a replay, and their share of the
/// read-ahead budget (released when the page is dropped).
type Page = (Vec<(u64, Vec<u8>)>, OwnedSemaphorePermit);

/// The stored timeline events of `thread_id` from ordinal `start` (`from` is its log
/// position), read through the runtime page by page with their ordinals, read by a task ahead of the receiver while the
/// pages not yet dropped hold less than `budget_bytes` ([`READ_AHEAD_BYTES`]), up to the end of
/// `timeline` or the first error; the task ends when the receiver is dropped.
fn read_ahead(
    runtime: Runtime,
    thread_id: String,
    mut from: u64,
    timeline: Arc<Vec<u64>>,
    start: usize,
    budget_bytes: usize,
) -> tokio::sync::mpsc::Receiver<Result<Page, RuntimeError>> {
    let (pages, received) = tokio::sync::mpsc::channel(READ_AHEAD_PAGES);
    let budget = Arc::new(Semaphore::new(budget_bytes));
    tokio::spawn(async move {
        let mut ordinal = start;
        while ordinal < timeline.len() {
            let page = match runtime.stored_events(&thread_id, from, REPLAY_PAGE).await {
                Ok(page) => page,
                Err(error) => {
                    let _ = pages.send(Err(error)).await;
                    return;
                }
            };
            let Some(last) = page.events.last() else {
                return;
            };
            from = last.seq + 1;
            let at_head = page.at_head();
            let mut events = Vec::with_capacity(page.events.len());
            let mut bytes = 0usize;
            for stored in page.events {
                if ordinal >= timeline.len() || stored.seq != timeline[ordinal] {
                    continue;
                }
                bytes += stored.payload.len();
                events.push((ordinal as u64, stored.payload));
                ordinal += 1;
            }
            // A page larger than the whole budget waits for every earlier page to be dropped.
            let wanted = u32::try_from(bytes.min(budget_bytes)).unwrap_or(u32::MAX);
            let Ok(permit) = Arc::clone(&budget).acquire_many_owned(wanted).await else {
                return;
            };
            if pages.send(Ok((events, permit))).await.is_err() || at_head {
                return;
            }
        }
    });
    received
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use agentwire_events::{Expected, NewEvent, ThreadId};
    use agentwire_runtime::{DemoAgent, Runtime, RuntimeConfig, SystemClock};

    use super::{READ_AHEAD_PAGES, read_ahead};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_reader_stays_within_its_byte_budget() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("log.sqlite").display());
        let log = agentwire_events::open(&url).await.unwrap();
        // Started on the empty log: the events below are only read back, never folded.
        let runtime = Runtime::start(
            Arc::clone(&log),
            Arc::new(DemoAgent::default()),
            Arc::new(SystemClock),
            RuntimeConfig::default(),
        )
        .await
        .unwrap();
        let thread = ThreadId::new("t").unwrap();
        let count = agentwire_events::MAX_PAGE_EVENTS * 3 + 10;
        let events = (0..count)
            .map(|i| NewEvent::new("e", format!("{{\"i\":{i}}}").into_bytes()))
            .collect::<Vec<_>>();
        for (index, chunk) in events
            .chunks(agentwire_events::MAX_APPEND_EVENTS)
            .enumerate()
        {
            let at = (index * agentwire_events::MAX_APPEND_EVENTS) as u64;
            log.append(&thread, Expected::Next(at), chunk.to_vec())
                .await
                .unwrap();
        }
        let timeline = Arc::new((0..count as u64).collect::<Vec<_>>());
        let read = |budget| {
            read_ahead(
                runtime.clone(),
                "t".to_owned(),
                0,
                Arc::clone(&timeline),
                0,
                budget,
            )
        };

        // A budget smaller than any page: the next page is read only once the one held is
        // dropped.
        let mut pages = read(1);
        let mut ordinal = 0u64;
        for _ in 0..4 {
            let (page, permit) = pages.recv().await.unwrap().unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert!(pages.try_recv().is_err(), "a page read past the budget");
            for (at, payload) in &page {
                assert_eq!(*at, ordinal);
                assert_eq!(payload, format!("{{\"i\":{ordinal}}}").as_bytes());
                ordinal += 1;
            }
            drop((page, permit));
        }
        assert_eq!(ordinal, count as u64);
        assert!(pages.recv().await.is_none());

        // A budget larger than every page: the reader runs ahead up to its page queue.
        let mut pages = read(64 * 1024 * 1024);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(pages.len(), READ_AHEAD_PAGES);
        let mut read = 0;
        while let Some(page) = pages.recv().await {
            read += page.unwrap().0.len();
        }
        assert_eq!(read, count);
    }
}
