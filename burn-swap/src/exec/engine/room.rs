//! Making room: an op's budget check, and the escalation that frees bytes when the budget
//! binds. Which tensors leave, and how, is `plan::reactive`'s choice; this room carries it
//! out and says, when nothing more can leave, how much room was missing and why.

use std::time::Instant;

use burn_ir::{BackendIr, TensorId};

use super::{Engine, OpScratch};
use crate::error::SwapError;
use crate::exec::counters::Wait;
use crate::exec::residency::{Remake, Residency, State};
use crate::plan::reactive::{self, Candidate, Leave, LinkModel, RoomStep, VictimFacts};

impl<B: BackendIr> Engine<B> {
    /// Keeps the budget for an op whose inputs are in `self.op.inputs`: its inputs and
    /// outputs must fit at once; other tensors leave to make room, then its inputs are
    /// brought back (fetched, waited for, or recomputed).
    #[inline]
    pub(super) fn fit(
        &mut self,
        input_bytes: u64,
        absent_bytes: u64,
        output_bytes: u64,
    ) -> Result<(), SwapError> {
        let needed = input_bytes + output_bytes;
        self.history.counters.largest_op = self.history.counters.largest_op.max(needed);
        self.note_minimum(needed + self.op.apart_bytes);
        // With no budget and every input on the device there is nothing to bring or make
        // room for (every op of an unbudgeted run).
        if absent_bytes == 0 && self.budget().is_none() {
            return Ok(());
        }
        self.fit_in_budget(needed, absent_bytes, output_bytes)
    }

    #[inline(never)]
    fn fit_in_budget(
        &mut self,
        needed: u64,
        absent_bytes: u64,
        output_bytes: u64,
    ) -> Result<(), SwapError> {
        if let Some(budget) = self.budget()
            && needed > budget
        {
            return Err(SwapError::OpExceedsBudget {
                op: String::new(),
                needed,
                budget,
            });
        }
        self.op.fitting = true;
        let result = self.put_inputs_in_place(absent_bytes, output_bytes);
        // Room for what the device holds beyond the books while the op runs (its
        // temporaries), as far as the budget and what can leave allow: the device may pass
        // the budget by what is left of them (told in the report), never the counted bytes.
        let beyond = self
            .op
            .beyond_the_books(self.history.counters.allocator, self.resident())
            .min(self.budget().map_or(0, |b| b.saturating_sub(needed)));
        if result.is_ok() && beyond > 0 {
            let _ = self.reserve(output_bytes + beyond);
        }
        self.op.fitting = false;
        result
    }

    /// Brings the op's absent inputs back one by one (each making its own room: a
    /// recomputation may need its own inputs back first), then makes room for its outputs.
    /// The op's inputs are protected throughout, so room made later never takes back what
    /// was brought earlier.
    fn put_inputs_in_place(
        &mut self,
        absent_bytes: u64,
        output_bytes: u64,
    ) -> Result<(), SwapError> {
        if absent_bytes > 0 {
            for i in 0..self.op.inputs.len() {
                let id = self.op.inputs[i].0;
                if self.residency.is_absent(&id) {
                    // An absent input whose planned prefetch is still in flight though no
                    // wait of the analysis covered it: the analysis missed a read, counted.
                    // (A fetch the analysis leaves without a wait of its own, because a wait
                    // for a later fetch on the same in-order receive queue implies it, has
                    // landed by then.) Its use here waits for the fetch, so the values stay
                    // right; the count is what the tests of the analysis read.
                    if self.plans.prefetching(id)
                        && matches!(
                            self.residency.get(&id).map(|e| e.state()),
                            Some(State::Fetching)
                        )
                    {
                        self.history.counters.unawaited_prefetch_reads += 1;
                    }
                    self.bring(id)?;
                }
            }
        }
        self.reserve(output_bytes)
    }

    /// Counts an op that needs `needed` bytes of its own towards the smallest budget the run
    /// could have had: those, plus the resident strided tensors outside the op that could
    /// not have left (no recipe, and no way to get one: their source is gone), each shared
    /// buffer once.
    #[inline]
    fn note_minimum(&mut self, needed: u64) {
        let stuck = if self.residency.views.strided_live.is_empty() {
            0
        } else {
            self.op.stuck_strided_bytes(&mut self.residency)
        };
        let counters = &mut self.history.counters;
        counters.minimum_budget = counters.minimum_budget.max(needed + stuck);
    }

    /// Makes room for `bytes` more resident bytes, never touching the current op's inputs
    /// or the protected tensors.
    pub(super) fn reserve(&mut self, bytes: u64) -> Result<(), SwapError> {
        if let Some(budget) = self.budget() {
            let after = self.resident() + bytes;
            if after > budget {
                self.make_room(after - budget, true)?;
            }
        }
        Ok(())
    }

    /// Makes room for `bytes` new bytes outside any op (`what`: a tensor created from data,
    /// arriving from another device).
    pub(super) fn admit(&mut self, bytes: u64, what: &'static str) -> Result<(), SwapError> {
        self.history.counters.largest_op = self.history.counters.largest_op.max(bytes);
        self.op.inputs.clear();
        self.op.seen_buffers.clear();
        self.note_minimum(bytes);
        let Some(budget) = self.budget() else {
            return Ok(());
        };
        if bytes > budget {
            return Err(SwapError::OpExceedsBudget {
                op: what.to_string(),
                needed: bytes,
                budget,
            });
        }
        let after = self.resident() + bytes;
        if after > budget {
            self.make_room(after - budget, false)
                .map_err(|e| e.for_op(|| what.to_string()))?;
        }
        Ok(())
    }

    /// Frees at least `deficit` resident bytes, never touching a tensor the current op uses
    /// (when `protect_inputs`) or a protected one, by the escalation `plan::reactive` sets
    /// out: transfers in flight finish first, then victims leave on this thread. Tensors
    /// whose offload fails stay resident and the next candidate is tried.
    pub(super) fn make_room(
        &mut self,
        deficit: u64,
        protect_inputs: bool,
    ) -> Result<(), SwapError> {
        let _span = tracing::debug_span!("burn_swap::make_room", deficit).entered();
        let needed = self.budget().map_or(0, |budget| budget + deficit);
        let freed_before = self.history.counters.fallback_bytes_under_plan;
        let result = self.make_room_by_steps(deficit, protect_inputs);
        let freed = self.history.counters.fallback_bytes_under_plan - freed_before;
        if freed > 0 {
            let program = self.plans.active.as_ref().map(|a| &a.program);
            self.history.note_fallback_room(program, needed, freed);
        }
        result
    }

    /// [`Self::make_room`]'s escalation.
    fn make_room_by_steps(&mut self, deficit: u64, protect_inputs: bool) -> Result<(), SwapError> {
        let target = self.resident().saturating_sub(deficit);
        let mut step = Some(RoomStep::FIRST);
        let mut result = Ok(());
        while let Some(now) = step {
            match now {
                RoomStep::AwaitOffloads => {
                    if self.residency.books().offloading > 0 {
                        self.exposed(Wait::Room, |e| {
                            while e.resident() > target && e.residency.books().offloading > 0 {
                                if !e.settle_next() {
                                    break;
                                }
                            }
                        });
                    }
                }
                RoomStep::AwaitEverything => self.exposed(Wait::Room, |e| e.settle_everything()),
                RoomStep::Evict | RoomStep::EvictAgain => {
                    result = self.evict_victims(self.resident() - target, protect_inputs);
                }
            }
            if self.resident() <= target {
                return Ok(());
            }
            // The link probe's temporaries are room that only its report gives back.
            let in_flight = self.copies.transfers.in_flight() > 0 || self.link_probe_running();
            step = now.next(result.is_ok(), in_flight);
        }
        result
    }

    /// Moves off the device, on this thread, the resident tensors the reactive policy picks
    /// to free `deficit` bytes: each by offload or by eviction, as the policy says. Room for
    /// an op (its inputs protected) frees up to the policy's headroom beyond the deficit
    /// (`reactive::room_goal`) when more can leave.
    fn evict_victims(&mut self, deficit: u64, protect_inputs: bool) -> Result<(), SwapError> {
        let goal = if protect_inputs {
            reactive::room_goal(deficit, self.budget().unwrap_or(0))
        } else {
            deficit
        };
        let search = Instant::now();
        let mut candidates = std::mem::take(&mut self.op.candidates);
        let stuck = self.op.list_candidates(
            &mut candidates,
            protect_inputs,
            &self.residency,
            self.settings.config.host_budget,
        );
        let victims = reactive::choose_victims(
            &candidates,
            deficit,
            self.history.now,
            self.settings.config.eviction,
            &LinkModel::default(),
        );
        self.history
            .counters
            .add_room_search(search.elapsed().as_nanos() as u64);
        let chosen = victims.is_some();
        let mut result = Ok(());
        let mut freed = 0;
        for c in victims.into_iter().flatten() {
            if freed >= goal {
                break;
            }
            let before = self.resident();
            let id = TensorId::new(c.key);
            match self.residency.get(&id).and_then(|e| e.shared()) {
                // A holder that cannot leave alone: the buffer leaves as one copy.
                Some(buffer) if self.residency.leaves_whole(&self.residency.holders(buffer)) => {
                    if let Err(e) = self.offload_whole(buffer) {
                        result = Err(e);
                    }
                }
                // A shared buffer leaves with every tensor that holds it.
                Some(buffer) => {
                    for holder in self.residency.holders(buffer) {
                        let strided = self.residency.get(&holder).is_some_and(|e| e.strided);
                        let leave = if strided {
                            Leave::Recompute
                        } else {
                            Leave::Offload
                        };
                        if let Err(e) = self.leave(holder, leave) {
                            result = Err(e);
                            break;
                        }
                    }
                }
                None => {
                    if let Err(e) = self.leave(id, c.leave) {
                        result = Err(e);
                    }
                }
            }
            freed += before.saturating_sub(self.resident());
        }
        if freed < deficit && (!chosen || result.is_ok()) {
            // The host budget, when it is what kept room from being made, names both.
            let budget = self.budget().unwrap_or(u64::MAX);
            let resident = self.resident();
            result = Err(self
                .op
                .host_full(
                    protect_inputs,
                    &self.residency,
                    self.settings.config.host_budget,
                    self.budget(),
                )
                .unwrap_or(SwapError::NoRoom {
                    op: String::new(),
                    needed: deficit,
                    budget,
                    resident,
                    pinned: stuck,
                    // What could not leave, plus what was asked for on top of the budget; at
                    // least what an earlier op of the run needed.
                    minimum_budget: (stuck + (deficit + budget).saturating_sub(resident))
                        .max(self.history.counters.minimum_budget),
                }));
        } else if freed >= deficit {
            result = Ok(());
        }
        // Room the plan did not make: from its first full iteration on, a plan that steers
        // leaves the fallback nothing to do (the iteration it took over in started under the
        // fallback's residency).
        if self.plans.active.as_ref().is_some_and(|a| a.iterations > 0) {
            self.history.counters.fallback_bytes_under_plan += freed;
        }
        self.op.candidates = candidates;
        result
    }

    /// Moves one tensor off the device as the policy said: by offload, or by eviction (a
    /// strided one gets its recipe first).
    pub(super) fn leave(&mut self, id: TensorId, leave: Leave) -> Result<(), SwapError> {
        match leave {
            Leave::Recompute => {
                self.residency.make_view_recipe(id);
                self.evict(id);
                Ok(())
            }
            Leave::Offload => {
                // A failed offload leaves the tensor resident and whole: a transient failure
                // costs a retry; a lasting one is the op's error.
                let mut attempt = 1;
                loop {
                    match self.offload(id) {
                        Err(SwapError::OffloadFailed { .. })
                            if attempt < super::TRANSFER_ATTEMPTS =>
                        {
                            attempt += 1
                        }
                        result => return result,
                    }
                }
            }
        }
    }
}

/// A shared buffer as a victim: the holders seen so far.
struct SharedCandidate {
    buffer: u32,
    /// A holder that can leave (the candidate's key), and how it leaves.
    first: Option<(u64, Leave)>,
    last_use: u64,
    /// A holder cannot leave.
    kept: bool,
}

impl SharedCandidate {
    fn new(buffer: u32) -> Self {
        Self {
            buffer,
            first: None,
            last_use: 0,
            kept: false,
        }
    }

    fn add(&mut self, key: u64, last_use: u64, leave: Option<Leave>, keeps: bool) {
        self.last_use = self.last_use.max(last_use);
        self.kept |= keeps;
        if let Some(leave) = leave
            && self.first.is_none_or(|(k, _)| key < k)
        {
            self.first = Some((key, leave));
        }
    }

    /// The candidate for the whole buffer of `bytes`, when every holder can leave.
    fn candidate(&self, bytes: u64) -> Option<Candidate> {
        let (key, leave) = self.first.filter(|_| !self.kept)?;
        Some(Candidate {
            key,
            bytes,
            last_use: self.last_use,
            leave,
        })
    }
}

impl OpScratch {
    /// When the host budget is what kept room from being made: the largest resident tensor
    /// that could have been offloaded but for it, as the error that names both budgets.
    fn host_full(
        &self,
        protect_inputs: bool,
        books: &Residency,
        host_budget: Option<u64>,
        budget: Option<u64>,
    ) -> Option<SwapError> {
        host_budget?;
        let (id, bytes) = books
            .iter()
            .filter(|(id, e)| {
                let in_use = (protect_inputs && self.inputs.iter().any(|(i, _)| i == *id))
                    || self.protect.contains(id);
                let offloadable = matches!(e.state(), State::Resident) && !e.strided && !in_use;
                offloadable && !books.host_has_room(host_budget, e.bytes())
            })
            .map(|(id, e)| (*id, e.bytes()))
            .max_by_key(|&(id, bytes)| (bytes, std::cmp::Reverse(id.value())))?;
        Some(books.host_full_for(id, bytes, host_budget, budget))
    }

    /// Lists in `candidates` the resident tensors that may leave now, each with how it would
    /// (`plan::reactive::leaves`); returns the resident bytes that may not.
    fn list_candidates(
        &self,
        candidates: &mut Vec<Candidate>,
        protect_inputs: bool,
        books: &Residency,
        host_budget: Option<u64>,
    ) -> u64 {
        candidates.clear();
        let mut stuck = 0;
        // Shared buffers leave whole: one candidate each, when every holder can leave.
        let mut shared: Vec<SharedCandidate> = Vec::new();
        for (id, entry) in books.iter() {
            let resident = matches!(entry.state(), State::Resident);
            if !resident && entry.shared().is_none() {
                // Not a candidate (`reactive::leaves`: only a resident tensor leaves), and
                // its facts are not worth gathering.
                if entry.state().on_device() || matches!(entry.state(), State::Fetching) {
                    stuck += entry.bytes();
                }
                continue;
            }
            let in_use = (protect_inputs && self.inputs.iter().any(|(i, _)| i == id))
                || self.protect.contains(id);
            let facts = VictimFacts {
                resident,
                in_use,
                strided: entry.strided,
                restorable: entry.leaves_with_layout(),
                has_recipe: entry.recipe.is_some(),
                rebuildable: entry.strided && books.can_rebuild(entry),
                host_has_room: books.host_has_room(host_budget, entry.bytes()),
            };
            let leave = reactive::leaves(&facts);
            if let Some(buffer) = entry.shared() {
                // A holder that cannot leave alone may leave with its buffer whole, by offload.
                let leave = leave.or_else(|| {
                    (facts.resident && !in_use && entry.restorable && facts.host_has_room)
                        .then_some(Leave::Offload)
                });
                // A holder whose offload is in flight leaves anyway; any other that cannot
                // leave keeps the buffer.
                let keeps =
                    leave.is_none() && (in_use || !matches!(entry.state(), State::Offloading));
                let at = match shared.iter().position(|s| s.buffer == buffer) {
                    Some(at) => at,
                    None => {
                        shared.push(SharedCandidate::new(buffer));
                        shared.len() - 1
                    }
                };
                shared[at].add(id.value(), entry.last_use, leave, keeps);
                continue;
            }
            match leave {
                Some(leave) => candidates.push(Candidate {
                    key: id.value(),
                    bytes: entry.bytes(),
                    last_use: entry.last_use,
                    leave,
                }),
                None if entry.state().on_device() || matches!(entry.state(), State::Fetching) => {
                    stuck += entry.bytes()
                }
                None => {}
            }
        }
        for s in shared {
            let bytes = books.buffer(s.buffer).map_or(0, |b| b.bytes);
            match s.candidate(bytes) {
                Some(candidate) => candidates.push(candidate),
                None if s.kept => stuck += bytes,
                None => {}
            }
        }
        stuck
    }
    /// The bytes of the strided tensors that could not leave the device while the op runs.
    /// One pass over the strided tensors that cannot be restored: those gone from the books,
    /// or no longer strided, leave the list as the others are counted (one lookup each, on
    /// every op while any lives; on the backends whose views are restorable, none does).
    #[inline(never)]
    fn stuck_strided_bytes(&self, books: &mut Residency) -> u64 {
        let mut live = std::mem::take(&mut books.views.strided_live);
        let mut buffers: Vec<u32> = Vec::new();
        let mut stuck = 0;
        live.retain(|id| {
            let Some(e) = books.get(id).filter(|e| e.strided) else {
                return false;
            };
            let could_not_leave = !self.inputs.iter().any(|(i, _)| i == id)
                && e.state().on_device()
                // A strided holder of a shared buffer leaves with it whole.
                && !e.restorable
                && e.recipe.is_none()
                && !books.can_rebuild(e)
                && match e.view_source() {
                    Some(Remake::Pinned) => false,
                    Some(Remake::From(s)) => books.get(&s).is_none(),
                    None => true,
                };
            if could_not_leave {
                stuck += match e.shared() {
                    // A shared buffer once, and not when it is an input's.
                    Some(b) if buffers.contains(&b) || self.seen_buffers.contains(&b) => 0,
                    Some(b) => {
                        buffers.push(b);
                        books.counted(e)
                    }
                    None => e.bytes(),
                };
            }
            true
        });
        books.views.strided_live = live;
        stuck
    }
}
