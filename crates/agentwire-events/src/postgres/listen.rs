//! The listener: one connection `LISTEN`ing on the commit channel that wakes tails on every
//! notification and after every (re)connect, reconnecting after a delay when it drops.

use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{oneshot, watch};
use tokio_postgres::{AsyncMessage, NoTls};

use super::CHANNEL;
/// How long the listener waits before reconnecting after its connection dropped.
const LISTEN_RECONNECT_DELAY: Duration = Duration::from_millis(500);

/// Keeps one connection listening on [`CHANNEL`] and bumps `commits` on every notification,
/// and once after each (re)connect, since commits may have landed while it was away.
pub(super) async fn listen(
    config: tokio_postgres::Config,
    commits: watch::Sender<u64>,
    mut stop: oneshot::Receiver<()>,
) {
    loop {
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
                        None => return Ok(()),
                    },
                }
            }
            commits.send_modify(|n| *n = n.wrapping_add(1));
            while let Some(message) = messages.next().await {
                if let AsyncMessage::Notification(_) = message? {
                    commits.send_modify(|n| *n = n.wrapping_add(1));
                }
            }
            Ok::<(), tokio_postgres::Error>(())
        };
        tokio::select! {
            _ = &mut stop => return,
            ended = session => {
                if let Err(err) = ended {
                    tracing::debug!(error = %err, "postgres listener disconnected");
                }
            }
        }
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(LISTEN_RECONNECT_DELAY) => {}
        }
    }
}
