#![allow(clippy::unwrap_used)]
use rusqlite::{Connection, params};
use std::time::{Duration, Instant};

fn conn(path: &std::path::Path, sync: &str) -> Connection {
    let c = Connection::open(path).unwrap();
    c.execute_batch(&format!("PRAGMA journal_mode=WAL; PRAGMA synchronous={sync};
      CREATE TABLE IF NOT EXISTS aw_threads (thread TEXT PRIMARY KEY, next_seq INTEGER NOT NULL, low_seq INTEGER NOT NULL, bytes INTEGER NOT NULL, deleted INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS aw_events (thread TEXT NOT NULL, seq INTEGER NOT NULL, event_id BLOB NOT NULL, kind TEXT NOT NULL, committed_at INTEGER NOT NULL, size INTEGER NOT NULL, payload BLOB NOT NULL, PRIMARY KEY (thread, seq));
      INSERT OR IGNORE INTO aw_threads VALUES ('t', 0, 0, 0, 0, 0);")).unwrap();
    c
}
fn commit(c: &Connection, seq: &mut i64, update: bool) {
    c.execute_batch("BEGIN IMMEDIATE").unwrap();
    if update {
        let _: i64 = c.prepare_cached("UPDATE aw_threads SET next_seq = next_seq + ?2, bytes = bytes + ?3 WHERE thread = ?1 AND deleted = 0 AND (?4 < 0 OR next_seq = ?4) RETURNING next_seq").unwrap()
          .query_row(params!["t", 1i64, 120i64, -1i64], |r| r.get(0)).unwrap();
    }
    c.prepare_cached("INSERT INTO aw_events (thread, seq, event_id, kind, committed_at, size, payload) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)").unwrap()
      .execute(params!["t", *seq, uuid::Uuid::new_v4().as_bytes().as_slice(), "thread.renamed", 1i64, 120i64, vec![b'x'; 100]]).unwrap();
    *seq += 1;
    c.execute_batch("COMMIT").unwrap();
}
fn p(v: &mut Vec<Duration>, q: f64) -> f64 {
    v.sort();
    v[((v.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6
}

fn main() {
    let sync = std::env::args().nth(1).unwrap_or("FULL".into());
    let spin: u64 = std::env::args()
        .nth(2)
        .map(|s| s.parse().unwrap())
        .unwrap_or(0);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(rt.spawn(async move {
        let dir = tempfile::tempdir().unwrap();
        let a = conn(&dir.path().join("a"), &sync);
        let b = conn(&dir.path().join("b"), &sync);
        let (tx, mut rx) = tokio::sync::mpsc::channel::<tokio::sync::oneshot::Sender<()>>(64);
        let cpath = dir.path().join("c");
        let cc = conn(&cpath, &sync);
        std::thread::spawn(move || {
            let mut seq = 0;
            loop {
                let mut got = None;
                if spin > 0 {
                    let start = Instant::now();
                    while start.elapsed() < Duration::from_micros(spin) {
                        if let Ok(r) = rx.try_recv() { got = Some(r); break; }
                        std::hint::spin_loop();
                    }
                }
                let r = match got { Some(r) => r, None => match rx.blocking_recv() { Some(r) => r, None => break } };
                commit(&cc, &mut seq, false);
                let _ = r.send(());
            }
        });
        let (mut sa, mut sb, mut sc) = (0, 0, 0);
        let (mut va, mut vb, mut vc) = (vec![], vec![], vec![]);
        let dd = conn(&dir.path().join("d"), &sync); let mut sd = 0; let mut vd = vec![];
        for i in 0..3000 {
            for k in 0..4 {
                let side = (i + k) % 4;
                let t = Instant::now();
                match side {
                    0 => { commit(&a, &mut sa, false); va.push(t.elapsed()); }
                    1 => { commit(&b, &mut sb, true); vb.push(t.elapsed()); }
                    3 => { let d = &dd; let s = &mut sd; tokio::task::block_in_place(|| commit(d, s, false)); vd.push(t.elapsed()); }
                    _ => { let (r, w) = tokio::sync::oneshot::channel(); tx.send(r).await.unwrap(); w.await.unwrap(); sc += 1; vc.push(t.elapsed()); }
                }
            }
        }
        let _ = sc;
        println!("sync {sync} spin {spin}us: raw insert p50 {:.1} p99 {:.1} | update+insert p50 {:.1} p99 {:.1} | handoff raw p50 {:.1} p99 {:.1} | block_in_place p50 {:.1} p99 {:.1} (us)",
          p(&mut va, 0.5), p(&mut va, 0.99), p(&mut vb, 0.5), p(&mut vb, 0.99), p(&mut vc, 0.5), p(&mut vc, 0.99), p(&mut vd, 0.5), p(&mut vd, 0.99));
    })).unwrap();
}
