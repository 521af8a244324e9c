//! What a one-event PostgreSQL append's pieces cost, each against the plain insert of the same
//! row: on a fresh database of the test tools' server (`synchronous_commit = on`) holding the
//! event log's schema, four shapes of a one-event commit alternate commit by commit, each on a
//! thread of its own:
//!
//! - `insert`: one `INSERT` into a table of `aw_events`' shape, as its own transaction (the
//!   appends benchmark's anchor);
//! - `update+insert`: the thread's row moved on and the event inserted, one statement (the
//!   writer's statement without its notification);
//! - `writer`: the statement the log's writer commits a batch of one one-event append with
//!   (the above with the notification);
//! - `aw_append`: the path of the appends that statement leaves (a new thread, a conflict):
//!   `BEGIN`, the log's `aw_append` call, the notification and `COMMIT`, in one flight.
//!
//! usage: cargo run --release -p agentwire-events --example pg_append_pieces [-- N] (default
//! 1,500 commits a shape). Prints each shape's median commit.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use futures_util::future::join4;
use tokio_postgres::types::ToSql;

const SHAPES: [&str; 4] = ["insert", "update+insert", "writer", "aw_append"];

const NOTIFY: &str = "SELECT pg_notify('agentwire_events', '')";

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let commits: usize = std::env::args()
        .nth(1)
        .map_or(1_500, |n| n.parse().expect("N commits a shape"));
    let url = agentwire_testkit::postgres_server().fresh_database("pg_append_pieces");
    // The log creates its schema; then the database is this connection's alone.
    agentwire_events::open(&url)
        .await
        .unwrap()
        .close()
        .await
        .unwrap();
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    // As the writer's connection is set.
    client
        .batch_execute(
            "SET plan_cache_mode = force_generic_plan;
             CREATE TABLE plain (LIKE aw_events INCLUDING ALL)",
        )
        .await
        .unwrap();
    let insert = client
        .prepare(
            "INSERT INTO plain (thread, seq, event_id, kind, committed_at, size, payload)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .await
        .unwrap();
    let writer_sql = agentwire_events::postgres_one_event_sql();
    let notification = writer_sql
        .rfind(", pg_notify(")
        .expect("the writer's statement notifies");
    let end = notification + writer_sql[notification..].find(')').unwrap() + 1;
    let quiet_sql = format!("{}{}", &writer_sql[..notification], &writer_sql[end..]);
    let writer = client.prepare(&writer_sql).await.unwrap();
    let quiet = client.prepare(&quiet_sql).await.unwrap();
    let append = client
        .prepare("SELECT status, first_seq, actual, at FROM aw_append($1, $2, $3, $4, $5, $6)")
        .await
        .unwrap();
    let payload = vec![b'x'; 120];
    let (kind, size, at) = ("thread.renamed", 160i64, 1_796_000_000_000i64);
    // The threads the log's statements append to exist, as a thread's do after its first.
    for shape in 1..SHAPES.len() {
        client
            .execute(
                "INSERT INTO aw_threads (thread, next_seq, low_seq, bytes, created_at)
                 VALUES ($1, 0, 0, 0, 0)",
                &[&format!("thread-{shape}")],
            )
            .await
            .unwrap();
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(commits); SHAPES.len()];
    for i in 0..commits {
        for k in 0..SHAPES.len() {
            let shape = (i + k) % SHAPES.len();
            let thread = format!("thread-{shape}");
            let seq = i as i64;
            let id = uuid::Uuid::new_v4();
            let started = Instant::now();
            match shape {
                0 => {
                    client
                        .execute(&insert, &[&thread, &seq, &id, &kind, &at, &size, &payload])
                        .await
                        .unwrap();
                }
                1 | 2 => {
                    let statement = if shape == 1 { &quiet } else { &writer };
                    let rows = client
                        .query(statement, &[&thread, &seq, &id, &kind, &size, &payload])
                        .await
                        .unwrap();
                    assert_eq!(rows.len(), 1, "the append was refused");
                }
                _ => {
                    let (ids, kinds, sizes, payloads) =
                        (vec![id], vec![kind], vec![size], vec![&payload[..]]);
                    let params: [&(dyn ToSql + Sync); 6] =
                        [&thread, &seq, &ids, &kinds, &sizes, &payloads];
                    let (begun, appended, notified, committed) = join4(
                        client.batch_execute("BEGIN"),
                        client.query_one(&append, &params),
                        client.batch_execute(NOTIFY),
                        client.batch_execute("COMMIT"),
                    )
                    .await;
                    let status: i16 = appended.unwrap().get(0);
                    assert_eq!(status, 0, "the append was refused");
                    (begun.and(notified).and(committed)).unwrap();
                }
            }
            times[shape].push(started.elapsed());
        }
    }
    println!("one-event commits on PostgreSQL, {commits} a shape, alternating");
    for (name, shape) in SHAPES.iter().zip(&mut times) {
        shape.sort();
        println!(
            "  {name:<14} median {:7.1} us",
            shape[shape.len() / 2].as_secs_f64() * 1e6
        );
    }
}
