//! The PostgreSQL schema and its versioned migrations, applied under an advisory lock so several
//! instances starting at once migrate once.

use tokio_postgres::Client;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::types::LogId;

/// Key of the advisory lock that serializes migrations ("agentwir" in ASCII).
const MIGRATION_LOCK: i64 = 0x6167_656e_7477_6972;

/// The append function's definition after `CREATE [OR REPLACE] FUNCTION aw_append`, with the
/// row lock it takes on the thread's row (`FOR UPDATE` in schema 1, `FOR NO KEY UPDATE` from
/// schema 3, which a checkpoint's `FOR KEY SHARE` does not wait for).
macro_rules! append_function {
    ($lock:literal) => {
        concat!(
            "aw_append(",
            r#"
        p_thread text, p_expected bigint, p_ids uuid[], p_kinds text[], p_sizes bigint[],
        p_payloads bytea[]
    ) RETURNS TABLE (status smallint, first_seq bigint, actual bigint, at bigint)
    LANGUAGE plpgsql AS $fn$
    DECLARE
        v_next bigint;
        v_deleted boolean;
        v_at bigint := (extract(epoch FROM now()) * 1000)::bigint;
        v_n bigint := cardinality(p_ids);
    BEGIN
        SELECT t.next_seq, t.deleted INTO v_next, v_deleted
            FROM aw_threads t WHERE t.thread = p_thread "#,
            $lock,
            r#";
        IF NOT FOUND THEN
            IF p_expected > 0 THEN
                RETURN QUERY SELECT 1::smallint, p_expected, 0::bigint, v_at;
                RETURN;
            END IF;
            INSERT INTO aw_threads (thread, next_seq, low_seq, bytes, deleted, created_at)
                VALUES (p_thread, 0, 0, 0, false, v_at) ON CONFLICT (thread) DO NOTHING;
            SELECT t.next_seq, t.deleted INTO v_next, v_deleted
                FROM aw_threads t WHERE t.thread = p_thread "#,
            $lock,
            r#";
        END IF;
        IF v_deleted THEN
            RETURN QUERY SELECT 2::smallint, v_next, v_next, v_at;
            RETURN;
        END IF;
        IF p_expected >= 0 AND p_expected <> v_next THEN
            RETURN QUERY SELECT 1::smallint, p_expected, v_next, v_at;
            RETURN;
        END IF;
        BEGIN
            INSERT INTO aw_events (thread, seq, event_id, kind, committed_at, size, payload)
                SELECT p_thread, v_next + u.ord - 1, u.id, u.kind, v_at, u.size, u.payload
                FROM unnest(p_ids, p_kinds, p_sizes, p_payloads) WITH ORDINALITY
                    AS u(id, kind, size, payload, ord);
        EXCEPTION WHEN unique_violation THEN
            RETURN QUERY SELECT 1::smallint, v_next, v_next, v_at;
            RETURN;
        END;
        UPDATE aw_threads t
            SET next_seq = v_next + v_n,
                bytes = t.bytes + (SELECT coalesce(sum(s), 0) FROM unnest(p_sizes) AS s)
            WHERE t.thread = p_thread;
        RETURN QUERY SELECT 0::smallint, v_next, v_next + v_n, v_at;
    END
    $fn$;
"#
        )
    };
}

/// Migrations in order; the schema version of a store is the number of them applied.
const MIGRATIONS: &[&str] = &[
    // 1: threads with their bounds, events keyed by (thread, seq), and the append function. The
    // function locks the thread's row (so appends to one thread from several instances queue),
    // checks the expected sequence, and inserts inside an exception block: a subtransaction per
    // append, so a unique violation on (thread, seq) fails only that append, as a conflict.
    concat!(
        r#"
    CREATE TABLE aw_threads (
        thread text PRIMARY KEY,
        next_seq bigint NOT NULL,
        low_seq bigint NOT NULL,
        bytes bigint NOT NULL,
        deleted boolean NOT NULL DEFAULT false,
        created_at bigint NOT NULL
    );
    CREATE TABLE aw_events (
        thread text NOT NULL,
        seq bigint NOT NULL,
        event_id uuid NOT NULL,
        kind text NOT NULL,
        committed_at bigint NOT NULL,
        size bigint NOT NULL,
        payload bytea NOT NULL,
        PRIMARY KEY (thread, seq)
    );
    CREATE FUNCTION "#,
        append_function!("FOR UPDATE")
    ),
    // 2: one checkpoint per thread (the state through a position), outside retention.
    r#"
    CREATE TABLE aw_checkpoints (
        thread text PRIMARY KEY,
        through bigint NOT NULL,
        payload bytea NOT NULL
    );
    "#,
    // 3: checkpoints written beside appends. A checkpoint's transaction takes the thread's row
    // `FOR KEY SHARE` (a deletion, which takes it `FOR UPDATE`, waits for it), which appends,
    // now taking the row `FOR NO KEY UPDATE`, do not wait for; its payload (a thread's state,
    // tens of megabytes for a long thread) is stored out of line uncompressed (`STORAGE
    // EXTERNAL`), so writing it costs no compression time.
    concat!(
        "ALTER TABLE aw_checkpoints ALTER COLUMN payload SET STORAGE EXTERNAL;
    CREATE OR REPLACE FUNCTION ",
        append_function!("FOR NO KEY UPDATE")
    ),
];

/// The schema version this build writes.
pub const POSTGRES_SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the database to [`POSTGRES_SCHEMA_VERSION`] and returns the log id.
pub(crate) async fn migrate(client: &mut Client) -> Result<LogId> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS aw_meta (key text PRIMARY KEY, value text NOT NULL)",
    )
    .await?;
    let version: i64 = match tx
        .query_opt(
            "SELECT value FROM aw_meta WHERE key = 'schema_version'",
            &[],
        )
        .await?
    {
        Some(row) => {
            let text: String = row.get(0);
            text.parse().map_err(|_| Error::Corrupt {
                reason: format!("schema_version {text:?} is not a number"),
            })?
        }
        None => 0,
    };
    if version > POSTGRES_SCHEMA_VERSION {
        return Err(Error::SchemaTooNew {
            found: version,
            supported: POSTGRES_SCHEMA_VERSION,
        });
    }
    if version == 0 {
        tx.execute(
            "INSERT INTO aw_meta (key, value) VALUES ('log_id', $1)",
            &[&Uuid::new_v4().hyphenated().to_string()],
        )
        .await?;
    }
    let start = usize::try_from(version).map_err(|_| Error::Corrupt {
        reason: format!("negative schema version {version}"),
    })?;
    for step in MIGRATIONS.iter().skip(start) {
        tx.batch_execute(step).await?;
    }
    tx.execute(
        "INSERT INTO aw_meta (key, value) VALUES ('schema_version', $1)
         ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        &[&POSTGRES_SCHEMA_VERSION.to_string()],
    )
    .await?;
    let row = tx
        .query_one("SELECT value FROM aw_meta WHERE key = 'log_id'", &[])
        .await?;
    let text: String = row.get(0);
    tx.commit().await?;
    Uuid::parse_str(&text)
        .map(LogId)
        .map_err(|e| Error::Corrupt {
            reason: format!("log_id {text:?} is not a UUID: {e}"),
        })
}
