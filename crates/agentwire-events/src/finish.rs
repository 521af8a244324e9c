//! [`FinishOnDrop`]: work a caller runs on its own task, which finishes as a task of its own if
//! the caller stops waiting for it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A future its caller polls in place (no task is started for it, no wake-up goes between
/// tasks) that, dropped before it completed, is spawned on the current tokio runtime to finish
/// there. For work that others wait on and must not be left half done: a group commit answering
/// other callers' appends, a thread's flush answering other callers' tickets.
///
/// Dropped outside a tokio runtime (or while the runtime shuts down, which drops its tasks),
/// the rest of the work is dropped with it.
pub struct FinishOnDrop<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    work: Option<Pin<Box<F>>>,
}

impl<F> FinishOnDrop<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    /// `work`, to be polled in place.
    pub fn new(work: F) -> Self {
        FinishOnDrop {
            work: Some(Box::pin(work)),
        }
    }
}

impl<F> Future for FinishOnDrop<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    type Output = F::Output;

    /// # Panics
    /// When polled again after it completed.
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let Some(work) = self.work.as_mut() else {
            panic!("FinishOnDrop polled after it completed");
        };
        let done = work.as_mut().poll(cx);
        if done.is_ready() {
            self.work = None;
        }
        done
    }
}

impl<F> Drop for FinishOnDrop<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn drop(&mut self) {
        if let Some(work) = self.work.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(work);
        }
    }
}

impl<F> std::fmt::Debug for FinishOnDrop<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FinishOnDrop")
            .field("finished", &self.work.is_none())
            .finish()
    }
}
