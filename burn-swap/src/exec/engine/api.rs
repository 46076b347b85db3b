//! What the client calls besides ops: data in and out, tensors moving between devices,
//! reconfiguration, the trace and profile, and the figures the report is built from.

use burn_backend::{DType, ExecutionError, Shape, TensorData};
use burn_ir::{BackendIr, TensorId, TensorIr, TensorStatus};
use burn_std::future::DynFut;

use super::Engine;
use crate::config::SwapConfig;
use crate::error::SwapError;
use crate::exec::figures::{Figures, Tracked};
use crate::exec::residency::{Books, State};
use crate::plan::profile::Profile;
use crate::trace::Trace;

impl<B: BackendIr> Engine<B> {
    /// The figures of the device now, once the link probe, when it runs, has reported.
    pub fn figures(&mut self) -> Figures {
        // The link probe's outcome is part of them (its time, a copy of its that failed).
        self.machine
            .wait_for_link_probe(&mut self.residency, &mut self.history.counters);
        // The period is read first: reading it may find a new schedule, whose plan is not
        // made yet.
        let period = self.history.recorder.period();
        self.drop_stale_plan();
        let program = self.plans.program();
        Figures {
            config: self.settings.config.clone(),
            budget: self.budget(),
            books: *self.residency.books(),
            counters: self.history.counters.clone(),
            device_memory: self.machine.device_memory,
            planned_offloads: program.map_or(0, |p| p.offloads),
            planned_recomputes: program.map_or(0, |p| p.recomputes),
            peers: self
                .copies
                .peers
                .as_ref()
                .map_or_else(Vec::new, |p| p.stats()),
            peer_fallbacks: self.copies.peers.as_ref().map_or(0, |p| p.fallbacks()),
            period,
            iteration_peaks: self.history.recorder.iteration_peaks(),
            traced_ops: self.history.recorder.next_index(),
            untraced_ops: self.history.threads.left_out(),
            trace_reads: self.history.recorder.reads(),
            tracked: Tracked {
                tensors: self.residency.len() as u64,
                kept_for_recipes: self.residency.iter().filter(|(_, e)| e.orphan).count() as u64,
                handles: self.handles.len() as u64,
            },
            streams: self.machine.pools.streams(self.copies.transfers.pools()),
            allocator_cleanups: self.machine.pools.cleanups,
            reserved_over: self.machine.temporaries.over().cloned(),
            temporaries: (
                self.machine.temporaries.shapes(),
                self.machine.temporaries.largest(),
            ),
        }
    }

    /// The counted bytes now: the books (once the link probe's temporaries, when it runs,
    /// are off the device).
    pub fn books(&mut self) -> Books {
        self.machine
            .wait_for_link_probe_copies(&mut self.residency, &mut self.history.counters);
        *self.residency.books()
    }

    /// Starts a new measurement: peaks from the current values, counts from zero.
    pub fn reset_counters(&mut self) {
        self.history.counters.reset();
        self.machine.pools.cleanups = 0;
        self.machine.temporaries.reset_over();
        self.machine
            .pools
            .reset_peaks(self.copies.transfers.pools());
        self.residency.reset_peaks();
        if let Some(peers) = &self.copies.peers {
            peers.reset_counters();
        }
    }

    /// Forgets the trace and the plans made from it: the one in force, the one being made,
    /// those kept, and what they and the fallback were measured to cost.
    pub fn restart_trace(&mut self) {
        self.history.threads = Default::default();
        self.trace_anew();
        self.plans.clear_kept();
    }

    /// Forgets the ops recorded so far and the plan in force or being made from them, keeping
    /// the plans kept for schedules: what a change of the training thread does (the trace held
    /// other threads' ops, or another thread's: `trace::threads`), as the first iteration's
    /// end would have been found in a log of one thread's ops.
    pub(super) fn trace_anew(&mut self) {
        self.history.recorder = Default::default();
        // Most iterations kept without their tensors while no budget is set (`Recorder::set_lean`).
        let lean = self.budget().is_none();
        self.history.recorder.set_lean(lean);
        self.forget_plan();
        self.plans.abandon();
    }

    /// Drops the plan in force and what the report says of it.
    pub(super) fn forget_plan(&mut self) {
        self.plans.forget();
        self.history.counters.clear_plan_figures();
    }

    /// The trace of the last complete iteration.
    pub fn trace(&mut self) -> Option<Trace> {
        self.history.recorder.trace()
    }

    /// The trace of every op still in the window.
    pub fn trace_window(&mut self) -> Trace {
        self.history.recorder.trace_all()
    }

    /// The profile of the last complete iteration, with the links measured.
    pub fn profile(&mut self) -> Option<Profile> {
        let trace = self.history.recorder.trace()?;
        let links = self.link_meter().links();
        Some(Profile::new(&trace, links))
    }

    /// Applies a new configuration, all or nothing: when the new budget is below what is
    /// resident, offloads at once so that the budget holds from now on; when that fails, the
    /// configuration in force stays. A new policy or budget is planned afresh.
    pub fn reconfigure(
        &mut self,
        config: SwapConfig,
        budget: Option<u64>,
    ) -> Result<(), SwapError> {
        let previous = (self.settings.config.clone(), self.settings.budget);
        let budget_before = self.budget();
        let replan = config.policy != self.settings.config.policy
            || config.planner != self.settings.config.planner
            || budget != self.settings.budget;
        // What the fallback and the plans cost was measured under the old configuration.
        if config != self.settings.config || budget != self.settings.budget {
            self.plans.clear_verdicts();
        }
        self.settings.config = config;
        self.settings.budget = budget;
        if let Some(budget) = self.budget()
            && self.resident() > budget
        {
            self.op.inputs.clear();
            let deficit = self.resident() - budget;
            if let Err(error) = self.make_room(deficit, false) {
                (self.settings.config, self.settings.budget) = previous;
                return Err(error.for_op(|| "Configure".to_string()));
            }
        }
        if replan {
            // The plan being made is for the old budget, policy or planner: it would never be
            // followed, and the new one is made without waiting for it.
            self.forget_plan();
            self.plans.abandon();
        }
        // Most iterations kept without their tensors while no budget is set (`Recorder::set_lean`).
        let lean = self.budget().is_none();
        self.history.recorder.set_lean(lean);
        let budget = self.budget();
        self.machine.follow_budget_in_pools::<B>(
            budget,
            budget_before,
            self.handles.device(),
            self.copies.transfers.pools(),
            &mut self.history.counters,
        );
        self.copies
            .transfers
            .set_jitter(self.settings.config.transfer_jitter_micros);
        if !self
            .copies
            .peers
            .as_ref()
            .is_some_and(|p| p.is(&self.settings.config.peers))
        {
            let device = self.handles.device().clone();
            self.copies.peers =
                crate::exec::peers::PeerPool::new(&self.settings.config.peers, |peer| {
                    crate::exec::measure_peer::<B>(&device, peer)
                });
        }
        Ok(())
    }

    /// Registers a tensor made from host data (its `Init` op follows).
    pub fn register_data(&mut self, data: TensorData) -> Result<TensorIr, SwapError> {
        self.admit(crate::exec::bytes_of(&data.shape, data.dtype), "FromData")?;
        let ir = self.handles.upload(data);
        self.residency
            .admit_resident(ir.id, &ir.shape, ir.dtype, self.history.now);
        Ok(ir)
    }

    /// Registers a tensor arriving from another device as a backend handle; returns its id.
    pub fn register_handle(
        &mut self,
        handle: B::Handle,
        shape: Shape,
        dtype: DType,
    ) -> Result<TensorId, SwapError> {
        self.admit(crate::exec::bytes_of(&shape, dtype), "Arrive")?;
        let id = self.handles.insert_fresh(handle);
        self.residency
            .admit_resident(id, &shape, dtype, self.history.now);
        let out = TensorIr {
            id,
            shape,
            status: TensorStatus::NotInit,
            dtype,
        };
        self.record_named("Arrive", &[], std::slice::from_ref(&out), None);
        self.op.inputs.clear();
        self.op.out_ids.clear();
        self.op.out_ids.push(out.id);
        self.finish_op();
        Ok(out.id)
    }

    /// Takes a tensor's handle out for a move to another device.
    pub fn take_handle(&mut self, tensor: &TensorIr) -> Result<B::Handle, SwapError> {
        self.ensure_resident(tensor)?;
        self.record_named("Depart", std::slice::from_ref(tensor), &[], None);
        let handle = self.take_for_read(tensor);
        self.op.out_ids.clear();
        self.finish_op();
        Ok(handle)
    }

    /// The handle of a tensor that is on the device, for a read or a move; Burn's last use of
    /// it takes it out of the books (unless a recipe still needs it).
    pub(super) fn take_for_read(&mut self, tensor: &TensorIr) -> B::Handle {
        let read = self.residency.read_status(tensor);
        let read = read;
        let handle = self.handles.handle(&read);
        self.consume_if_last(tensor);
        handle
    }

    /// Brings a tensor back to the device before it leaves through a read or a move.
    fn ensure_resident(&mut self, tensor: &TensorIr) -> Result<(), SwapError> {
        self.poll_transfers();
        self.op.inputs.clear();
        self.op.inputs.push((tensor.id, tensor.status));
        if self.residency.is_absent(&tensor.id) {
            self.bring(tensor.id)?;
        }
        Ok(())
    }

    fn consume_if_last(&mut self, tensor: &TensorIr) {
        if tensor.status == TensorStatus::ReadWrite {
            self.tensors().remove_unless_pinned(&tensor.id);
        } else if let Some(entry) = self.residency.get_mut(&tensor.id) {
            entry.last_use = self.history.now;
        }
    }

    /// Reads a tensor's data. An offloaded tensor is served from the host store without
    /// coming back to the device.
    pub fn read(&mut self, tensor: TensorIr) -> DynFut<Result<TensorData, ExecutionError>> {
        self.record_named("Read", std::slice::from_ref(&tensor), &[], None);
        self.op.out_ids.clear();
        let future: DynFut<Result<TensorData, ExecutionError>> =
            if let Some(data) = self.read_offloaded(&tensor) {
                self.op.inputs.clear();
                let data = data.map_err(|e| ExecutionError::WithContext {
                    reason: format!("burn-swap: {e}"),
                });
                Box::pin(async move { data })
            } else {
                match self.ensure_resident(&tensor) {
                    Ok(()) => {
                        let read = self.residency.read_status(&tensor);
                        let future = self.handles.read(&read);
                        self.consume_if_last(&tensor);
                        future
                    }
                    Err(error) => {
                        let reason = error.to_string();
                        Box::pin(async move { Err(ExecutionError::WithContext { reason }) })
                    }
                }
            };
        self.finish_op();
        future
    }

    /// The data of an offloaded tensor, from its host copy: taken when Burn reads it for the
    /// last time, copied otherwise. `None` when the tensor is not offloaded.
    fn read_offloaded(
        &mut self,
        tensor: &TensorIr,
    ) -> Option<Result<TensorData, crate::exec::peers::ReceiveError>> {
        let entry = self.residency.get(&tensor.id)?;
        let State::Offloaded(copy) = entry.state() else {
            return None;
        };
        if entry.kept_layout().is_some() {
            // The copy is of a strided tensor's whole buffer: read once it is back.
            return None;
        }
        let last =
            tensor.status == TensorStatus::ReadWrite && !self.residency.is_pinned(&tensor.id);
        if !last {
            let data = copy.to_data();
            self.consume_if_last(tensor);
            return Some(data);
        }
        match self.tensors().remove(&tensor.id)?.into_state() {
            State::Offloaded(copy) => Some(copy.into_data()),
            _ => None,
        }
    }

    /// Gives the idle buffers and free pages of every stream burn-swap uses back to the
    /// device (`Backend::memory_cleanup` of `Swap`).
    pub fn allocator_cleanup(&mut self) {
        self.machine.cleanup_pools::<B>(
            self.handles.device(),
            self.copies.transfers.pools(),
            &mut self.history.counters,
        );
    }

    /// Releases what an op that failed (and so never ran) was handed for its last use: Burn
    /// will never name those tensors again.
    pub fn abandon_op(&mut self) {
        for i in 0..self.op.inputs.len() {
            let (id, status) = self.op.inputs[i];
            if status != TensorStatus::ReadWrite {
                continue;
            }
            if self.residency.is_pinned(&id) {
                self.tensors().remove_unless_pinned(&id);
            } else {
                self.tensors().remove_with_handle(id);
            }
        }
        self.op.inputs.clear();
    }
}
