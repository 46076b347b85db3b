//! What happened on a device: the op log the planners read, the moves since the last op was
//! logged, the op clock, and the counts the report gives.

use crate::exec::counters::Counters;
use crate::trace::OpEvents;
use crate::trace::recorder::Recorder;
use crate::trace::threads::TrainingThread;

/// The device's history of ops.
#[derive(Default)]
pub(super) struct History {
    pub recorder: Recorder,
    /// Whose ops the recorder records (the training thread's, once judged).
    pub threads: TrainingThread,
    /// What was moved since the last op was recorded (for the trace's per-op events).
    pub events: OpEvents,
    /// Global index of the next op.
    pub now: u64,
    pub counters: Counters,
}
