//! Batches made on a worker thread, as Burn's `DataLoader` makes them: each batch's tensors
//! are created on the device by the worker (its uploads are ops of that thread) and handed to
//! the training loop through a bounded queue, so that where the worker's ops fall among the
//! step's ops depends on thread timing, as it does in a user's program.

use std::sync::mpsc::{Receiver, sync_channel};
use std::thread::JoinHandle;

/// A worker thread making `steps` batches, at most `ahead` of them waiting.
pub struct Loader<T: Send + 'static> {
    batches: Receiver<T>,
    worker: Option<JoinHandle<()>>,
}

impl<T: Send + 'static> Loader<T> {
    /// Starts the worker: it calls `make(step)` for each step in `0..steps` in order and queues
    /// the batch, waiting while `ahead` batches wait unread.
    pub fn start(steps: usize, ahead: usize, make: impl Fn(usize) -> T + Send + 'static) -> Self {
        let (send, batches) = sync_channel(ahead);
        let worker = std::thread::Builder::new()
            .name("batch-loader".into())
            .spawn(move || {
                for step in 0..steps {
                    if send.send(make(step)).is_err() {
                        return;
                    }
                }
            })
            .expect("spawn the batch loader");
        Self {
            batches,
            worker: Some(worker),
        }
    }

    /// The next batch, in step order.
    ///
    /// # Panics
    /// If the worker has made every batch already, or panicked.
    pub fn next_batch(&mut self) -> T {
        match self.batches.recv() {
            Ok(batch) => batch,
            Err(_) => {
                let worker = self.worker.take().expect("the worker is joined once");
                match worker.join() {
                    Ok(()) => panic!("the loader has no batch left"),
                    Err(payload) => std::panic::resume_unwind(payload),
                }
            }
        }
    }
}

impl<T: Send + 'static> Drop for Loader<T> {
    fn drop(&mut self) {
        // Unread batches are dropped with the queue; the worker then sees it closed.
        let (_, closed) = sync_channel::<T>(0);
        drop(std::mem::replace(&mut self.batches, closed));
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}
