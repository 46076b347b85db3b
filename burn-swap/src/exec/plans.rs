//! The plans of one device as the executor holds them: the program followed, the schedule it
//! was made for, and how many times a plan that does not fit is made again.
//!
//! The plans themselves are made by `crate::plan::build`, a pure function of a trace; this
//! type only keeps them.

use burn_ir::TensorId;

use crate::plan::program::Program;

/// Plans made again, at the end of each following iteration, while a schedule's plan does
/// not fit its budget.
pub(crate) const REPLANS: u8 = 2;

/// A program in force: its steps, and the tensors it offloaded this iteration, by tag.
pub(crate) struct Active {
    pub program: Program,
    pub tags: hashbrown::HashMap<u32, TensorId>,
    /// The tensors whose planned prefetch started, by tag, until an op waited for them.
    pub fetching: hashbrown::HashMap<u32, TensorId>,
}

/// The plan of one device: the program followed and the schedule it was made for.
#[derive(Default)]
pub(crate) struct Plans {
    /// The plan being followed.
    pub active: Option<Active>,
    /// The schedule last planned for, as `(period, anchor)` (planned once per schedule, and
    /// again at the end of the next iterations while its plan does not fit: see
    /// [`REPLANS`]).
    pub planned_for: Option<(usize, u64)>,
    /// Plans left for the schedule planned for while its plan does not fit.
    pub replans: u8,
}

impl Plans {
    /// The program in force, if any.
    pub fn program(&self) -> Option<&Program> {
        self.active.as_ref().map(|a| &a.program)
    }

    /// Forgets the plan and the schedule it was made for.
    pub fn forget(&mut self) {
        self.active = None;
        self.planned_for = None;
    }
}
