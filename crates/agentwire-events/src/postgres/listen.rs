//! The listener: while anything follows the log's commits (a receiver of `commits()`, such as a
//! live tail), one connection `LISTEN`s on the commit channel and wakes the followers on every
//! notification and after every (re)connect, reconnecting after a delay when it drops. With no
//! follower it holds no connection, and the commits of this and other instances signal no
//! listener of it: an instance whose commits nobody follows pays nothing for the channel.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{Notify, oneshot, watch};
use tokio_postgres::{AsyncMessage, NoTls};

use super::CHANNEL;
/// How long the listener waits before reconnecting after its connection dropped.
const LISTEN_RECONNECT_DELAY: Duration = Duration::from_millis(500);

/// How a listening session ended without an error.
enum Ended {
    /// The last follower is gone (the connection is closed with the session).
    Unfollowed,
    /// The server closed the connection.
    Dropped,
}

/// Listens on [`CHANNEL`] while `commits` has receivers (`followed` is told of each new one),
/// and bumps `commits` on every notification, and once after each (re)connect, since commits
/// may have landed while it was away.
pub(super) async fn listen(
    config: tokio_postgres::Config,
    commits: watch::Sender<u64>,
    followed: Arc<Notify>,
    mut stop: oneshot::Receiver<()>,
) {
    loop {
        // `notify_one` keeps a permit for a subscription made between the count and the wait.
        while commits.receiver_count() == 0 {
            tokio::select! {
                _ = &mut stop => return,
                () = followed.notified() => {}
            }
        }
        let session = async {
            let (client, mut connection) = config.connect(NoTls).await?;
            let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
            let sql = format!("LISTEN {CHANNEL}");
            let listen = client.batch_execute(&sql);
            tokio::pin!(listen);
            // The LISTEN's answer arrives through the connection, so drive both until it has.
            loop {
                tokio::select! {
                    done = &mut listen => { done?; break; }
                    message = messages.next() => match message {
                        Some(Ok(_)) => {}
                        Some(Err(e)) => return Err(e),
                        None => return Ok(Ended::Dropped),
                    },
                }
            }
            commits.send_modify(|n| *n = n.wrapping_add(1));
            loop {
                tokio::select! {
                    // The last follower is gone: the connection closes with the session.
                    () = commits.closed() => return Ok(Ended::Unfollowed),
                    message = messages.next() => match message {
                        Some(Ok(AsyncMessage::Notification(_))) => {
                            commits.send_modify(|n| *n = n.wrapping_add(1));
                        }
                        Some(Ok(_)) => {}
                        Some(Err(e)) => return Err(e),
                        None => return Ok(Ended::Dropped),
                    },
                }
            }
        };
        let ended = tokio::select! {
            _ = &mut stop => return,
            ended = session => ended,
        };
        match ended {
            // Wait for the next follower, or listen again at once for one that came meanwhile.
            Ok(Ended::Unfollowed) => continue,
            Ok(Ended::Dropped) => tracing::debug!("postgres listener's connection closed"),
            Err(err) => tracing::debug!(error = %err, "postgres listener disconnected"),
        }
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(LISTEN_RECONNECT_DELAY) => {}
        }
    }
}
