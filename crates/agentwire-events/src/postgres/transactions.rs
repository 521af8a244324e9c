//! The transactions other than appends, each under a lock on the thread's row: a retention
//! trim (the cut both engines compute, then the events below it deleted) and a thread's
//! deletion with its events and checkpoint (and a NOTIFY), both run by the writer; and a
//! checkpoint write that only moves forward, run on a connection of its own beside the writer's
//! appends.
//!
//! The row locks: appends (`aw_append`) and trims take the row `FOR NO KEY UPDATE`, so they
//! queue behind one another; a checkpoint takes it `FOR KEY SHARE`, which neither waits for
//! nor holds up an append or a trim while its payload is written; a deletion takes it
//! `FOR UPDATE`, which waits for a checkpoint being written and is waited for by one starting,
//! so no checkpoint outlives its thread's deletion.

use std::time::SystemTime;

use tokio_postgres::Client;

use super::CHANNEL;
use crate::error::{Error, Result};
use crate::retention::{age_cutoff_ms, stored_low_watermark};
use crate::types::{Checkpoint, Retention, ThreadId, Trimmed, check_checkpoint_position};
pub(super) async fn trim(
    client: &mut Client,
    thread: &ThreadId,
    retention: &Retention,
    now: SystemTime,
) -> Result<Trimmed> {
    let tx = client.transaction().await?;
    let Some(row) = tx
        .query_opt(
            "SELECT low_seq, next_seq, deleted FROM aw_threads WHERE thread = $1
             FOR NO KEY UPDATE",
            &[&thread.as_str()],
        )
        .await?
    else {
        tx.commit().await?;
        return Ok(Trimmed {
            thread: thread.clone(),
            removed: 0,
            low_watermark: 0,
            next_seq: 0,
        });
    };
    let low: i64 = row.get(0);
    let next: i64 = row.get(1);
    if row.get::<_, bool>(2) {
        return Err(Error::ThreadDeleted {
            thread: thread.to_string(),
        });
    }
    let max_bytes = i64::try_from(retention.max_bytes).unwrap_or(i64::MAX);
    let bytes_cut: Option<i64> = tx
        .query_opt(
            "SELECT seq FROM (
                 SELECT seq, (SUM(size) OVER (ORDER BY seq DESC))::bigint AS suffix
                 FROM aw_events WHERE thread = $1
             ) s WHERE suffix > $2 ORDER BY seq DESC LIMIT 1",
            &[&thread.as_str(), &max_bytes],
        )
        .await?
        .map(|r| r.get(0));
    let first_young: Option<i64> = tx
        .query_one(
            "SELECT MIN(seq) FROM aw_events WHERE thread = $1 AND committed_at >= $2",
            &[&thread.as_str(), &age_cutoff_ms(retention, now)],
        )
        .await?
        .get(0);
    let checkpoint: Option<i64> = tx
        .query_opt(
            "SELECT through FROM aw_checkpoints WHERE thread = $1",
            &[&thread.as_str()],
        )
        .await?
        .map(|r| r.get(0));
    let cut = stored_low_watermark(
        thread,
        retention,
        low,
        next,
        bytes_cut,
        first_young,
        checkpoint,
    )?;
    let removed = tx
        .query_one(
            "WITH gone AS (DELETE FROM aw_events WHERE thread = $1 AND seq < $2 RETURNING size)
             SELECT COUNT(*), COALESCE(SUM(size), 0)::bigint FROM gone",
            &[&thread.as_str(), &(cut as i64)],
        )
        .await?;
    let count: i64 = removed.get(0);
    let freed: i64 = removed.get(1);
    tx.execute(
        "UPDATE aw_threads SET low_seq = $2, bytes = bytes - $3 WHERE thread = $1",
        &[&thread.as_str(), &(cut as i64), &freed],
    )
    .await?;
    tx.commit().await?;
    Ok(Trimmed {
        thread: thread.clone(),
        removed: count as u64,
        low_watermark: cut,
        next_seq: next as u64,
    })
}

pub(super) async fn delete(client: &mut Client, thread: &ThreadId) -> Result<bool> {
    let tx = client.transaction().await?;
    tx.execute(
        "SELECT 1 FROM aw_threads WHERE thread = $1 FOR UPDATE",
        &[&thread.as_str()],
    )
    .await?;
    let changed = tx
        .execute(
            "UPDATE aw_threads SET deleted = true, low_seq = next_seq, bytes = 0 WHERE thread = $1",
            &[&thread.as_str()],
        )
        .await?;
    tx.execute(
        "DELETE FROM aw_events WHERE thread = $1",
        &[&thread.as_str()],
    )
    .await?;
    tx.execute(
        "DELETE FROM aw_checkpoints WHERE thread = $1",
        &[&thread.as_str()],
    )
    .await?;
    tx.execute("SELECT pg_notify($1, '')", &[&CHANNEL]).await?;
    tx.commit().await?;
    Ok(changed > 0)
}

pub(super) async fn put_checkpoint(
    client: &mut Client,
    thread: &ThreadId,
    checkpoint: &Checkpoint,
) -> Result<()> {
    let tx = client.transaction().await?;
    // Acknowledged only once durable, whatever the pool connection's default.
    tx.batch_execute("SET LOCAL synchronous_commit = on")
        .await?;
    // The thread's row is locked so a deletion cannot slip in between the check and the write
    // (see the module's doc for why this lock and not another).
    let row = tx
        .query_opt(
            "SELECT next_seq, deleted FROM aw_threads WHERE thread = $1 FOR KEY SHARE",
            &[&thread.as_str()],
        )
        .await?;
    let (next, deleted): (i64, bool) = row.map_or((0, false), |r| (r.get(0), r.get(1)));
    let through = check_checkpoint_position(thread, checkpoint.through, next as u64, deleted)?;
    tx.execute(
        "INSERT INTO aw_checkpoints (thread, through, payload) VALUES ($1, $2, $3)
         ON CONFLICT (thread) DO UPDATE SET through = excluded.through, payload = excluded.payload
         WHERE excluded.through > aw_checkpoints.through",
        &[&thread.as_str(), &through, &checkpoint.payload],
    )
    .await?;
    tx.commit().await?;
    Ok(())
}
