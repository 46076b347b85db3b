//! The per-device engine: every op of the device passes here, in order.

use std::time::Instant;

use burn_backend::{DType, ExecutionError, Shape, TensorData};
use burn_ir::{BackendIr, OperationIr, TensorId, TensorIr, TensorStatus};
use burn_router::{Runner, RunnerClient};
use burn_std::future::DynFut;

use super::residency::{Dims, Entry, Residency, State};
use super::{bytes_of, host};
use crate::config::SwapConfig;
use crate::error::SwapError;
use crate::plan::reactive::{self, Candidate, LinkModel};
use crate::report::Counters;
use crate::trace::recorder::{OpCounters, Recorder};
use crate::trace::signature;

/// The engine of one device: the inner backend's runner, the residency table, the counters,
/// the recorder, and the configuration in force.
pub(crate) struct Engine<B: BackendIr> {
    pub runner: Runner<B>,
    pub config: SwapConfig,
    /// The budget in bytes, resolved from the configuration; `None` is unlimited.
    pub budget: Option<u64>,
    pub counters: Counters,
    pub recorder: Recorder,
    residency: Residency,
    link: LinkModel,
    /// Global index of the next op.
    now: u64,
    // Scratch space reused by every op, so that the per-op path does not allocate.
    inputs: Vec<(TensorId, TensorStatus)>,
    outputs: Vec<(TensorId, Dims, DType, u64)>,
    candidates: Vec<Candidate>,
    /// The measured copy throughput, once measured.
    links: Option<crate::plan::profile::Links>,
    /// Resident bytes when the native op in progress was prepared, and its outputs' bytes.
    native_base: u64,
    native_out: u64,
}

impl<B: BackendIr> Engine<B> {
    pub fn new(runner: Runner<B>, config: SwapConfig, budget: Option<u64>) -> Self {
        Self {
            runner,
            config,
            budget,
            counters: Counters::default(),
            recorder: Recorder::default(),
            residency: Residency::default(),
            link: LinkModel::default(),
            now: 0,
            inputs: Vec::new(),
            outputs: Vec::new(),
            candidates: Vec::new(),
            native_base: 0,
            native_out: 0,
            links: None,
        }
    }

    fn tracing(&self) -> bool {
        self.config.enabled && self.config.trace
    }

    fn budget(&self) -> Option<u64> {
        if self.config.enabled {
            self.budget
        } else {
            None
        }
    }

    /// Runs one operation on the inner backend, first making room and fetching its inputs.
    ///
    /// The hot path: one pass over the op's inputs and one over its outputs feed both the
    /// books and the recorder; nothing is allocated once the scratch vectors have grown.
    #[inline]
    pub fn run_op(&mut self, op: OperationIr) -> Result<(), SwapError> {
        self.run_op_with(op, |_| {})
    }

    /// [`Engine::run_op`], calling `on_output` with each output as it passes (so that the
    /// router client builds its output tensors in the same pass).
    #[inline]
    pub fn run_op_with(
        &mut self,
        op: OperationIr,
        mut on_output: impl FnMut(&TensorIr),
    ) -> Result<(), SwapError> {
        let tracing = self.tracing();
        let live_before = self.counters.resident + self.counters.host;
        if tracing {
            let key = signature::kind_key(&op);
            self.recorder.begin(key, || signature::kind_name(&op));
        }
        if let OperationIr::Drop(tensor) = &op {
            let id = tensor.id;
            if tracing {
                self.recorder
                    .input(tensor, bytes_of(&tensor.shape, tensor.dtype));
                self.recorder.outputs_follow();
                self.recorder.end(OpCounters {
                    nanos: 0,
                    live_before,
                    resident_during: self.counters.resident,
                });
            }
            self.drop_tensor(id, op);
            self.counters.ops += 1;
            self.now += 1;
            return Ok(());
        }

        // What the op reads and makes, in one pass each.
        let (input_bytes, fetch_bytes) = self.gather_inputs(op.inputs(), tracing);
        if tracing {
            self.recorder.outputs_follow();
        }
        // Only an `Init` op's output is already in the books (registered with its data).
        let registered = matches!(op, OperationIr::Init(_));
        self.outputs.clear();
        let mut output_bytes = 0;
        for t in op.outputs() {
            on_output(t);
            let bytes = bytes_of(&t.shape, t.dtype);
            if !registered {
                output_bytes += bytes;
            }
            if tracing {
                self.recorder.output(t, bytes);
            }
            self.outputs
                .push((t.id, Dims::from_slice(t.shape.as_slice()), t.dtype, bytes));
        }
        if let Err(error) = self.fit(input_bytes, fetch_bytes, output_bytes, || {
            signature::kind_name(&op)
        }) {
            if tracing {
                self.recorder.abort();
            }
            return Err(error);
        }

        let during = self.counters.resident + output_bytes;
        self.counters.note_resident(during);
        let start = if tracing {
            let timed = self.recorder.timing();
            self.recorder.end(OpCounters {
                nanos: 0,
                live_before,
                resident_during: during,
            });
            timed.then(Instant::now)
        } else {
            None
        };
        self.runner.register_op(op);
        if let Some(start) = start {
            self.recorder
                .set_last_nanos(start.elapsed().as_nanos() as u64);
        }

        // Inputs read for the last time are gone; outputs are new and resident.
        let now = self.now;
        for i in 0..self.inputs.len() {
            let (id, status) = self.inputs[i];
            if status == TensorStatus::ReadWrite {
                self.forget(&id);
            } else if let Some(entry) = self.residency.get_mut(&id) {
                entry.last_use = now;
            }
        }
        for (id, dims, dtype, bytes) in self.outputs.drain(..) {
            if registered {
                if let Some(entry) = self.residency.get_mut(&id) {
                    entry.last_use = now;
                }
                continue;
            }
            self.counters.resident += bytes;
            self.residency.insert(
                id,
                Entry {
                    bytes,
                    dims,
                    dtype,
                    last_use: now,
                    state: State::Resident,
                },
            );
        }
        self.counters.ops += 1;
        self.now += 1;
        Ok(())
    }

    /// Lists the op's inputs (in `self.inputs`), recording each when `record`, and returns
    /// the bytes of the distinct ones and of those to fetch.
    fn gather_inputs<'a>(
        &mut self,
        inputs: impl Iterator<Item = &'a TensorIr>,
        record: bool,
    ) -> (u64, u64) {
        self.inputs.clear();
        let (mut input_bytes, mut fetch_bytes) = (0, 0);
        for t in inputs {
            let seen = self.inputs.iter().any(|(id, _)| *id == t.id);
            self.inputs.push((t.id, t.status));
            let bytes = match self.residency.get(&t.id) {
                Some(entry) => {
                    if !seen {
                        input_bytes += entry.bytes;
                        if let State::Offloaded(_) = entry.state {
                            fetch_bytes += entry.bytes;
                        }
                    }
                    entry.bytes
                }
                None => bytes_of(&t.shape, t.dtype),
            };
            if record {
                self.recorder.input(t, bytes);
            }
        }
        (input_bytes, fetch_bytes)
    }

    /// Keeps the budget for an op whose inputs are in `self.inputs`: its inputs and outputs
    /// must fit at once; other tensors are offloaded to make room, then its inputs fetched.
    fn fit(
        &mut self,
        input_bytes: u64,
        fetch_bytes: u64,
        output_bytes: u64,
        name: impl FnOnce() -> String,
    ) -> Result<(), SwapError> {
        let needed = input_bytes + output_bytes;
        self.counters.largest_op = self.counters.largest_op.max(needed);
        if let Some(budget) = self.budget() {
            if needed > budget {
                return Err(SwapError::OpExceedsBudget {
                    op: name(),
                    needed,
                    budget,
                });
            }
            let after = self.counters.resident + fetch_bytes + output_bytes;
            if after > budget {
                self.make_room(after - budget, true)?;
            }
        }
        if fetch_bytes > 0 {
            for i in 0..self.inputs.len() {
                let id = self.inputs[i].0;
                if self.residency.is_offloaded(&id) {
                    self.fetch(id);
                }
            }
        }
        Ok(())
    }

    /// Prepares a native op: fetches its inputs and makes room for an output as large as its
    /// largest input (the output of an activation, a norm or a sort; index-producing ops such
    /// as `argwhere` or sorts with indices make more, counted when they arrive).
    pub fn native_prepare(
        &mut self,
        name: &'static str,
        inputs: &[TensorIr],
    ) -> Result<(), SwapError> {
        let (input_bytes, fetch_bytes) = self.gather_inputs(inputs.iter(), false);
        let output_bytes = inputs
            .iter()
            .map(|t| bytes_of(&t.shape, t.dtype))
            .max()
            .unwrap_or(0);
        self.fit(input_bytes, fetch_bytes, output_bytes, || {
            format!("Native.{name}")
        })?;
        self.native_base = self.counters.resident;
        self.native_out = 0;
        Ok(())
    }

    /// Takes an input's handle for a native op (removing it from the books when it is the
    /// input's last use).
    pub fn native_take(&mut self, tensor: &TensorIr) -> B::Handle {
        let handle = self.runner.get_tensor_handle(tensor);
        self.consume_if_last(tensor);
        handle
    }

    /// Registers an output of a native op; returns its id.
    pub fn native_output(&mut self, handle: B::Handle, shape: Shape, dtype: DType) -> TensorId {
        let id = self
            .runner
            .register_tensor(handle, shape.clone(), dtype, self.runner.clone())
            .into_ir()
            .id;
        self.native_out += bytes_of(&shape, dtype);
        self.insert_resident(id, shape, dtype);
        id
    }

    /// Whether the next op is to be timed (the trace's profiled iterations).
    pub fn times_next_op(&self) -> bool {
        self.tracing() && self.recorder.timing()
    }

    /// Records a native op once it ran, with its wall time when it was timed.
    pub fn native_finish(
        &mut self,
        name: &'static str,
        inputs: &[TensorIr],
        outputs: &[TensorIr],
        nanos: Option<u64>,
    ) {
        let during = self.native_base + self.native_out;
        self.counters.note_resident(during);
        let inputs: Vec<&TensorIr> = inputs.iter().collect();
        let outputs: Vec<&TensorIr> = outputs.iter().collect();
        self.record_named(name, &inputs, &outputs);
        if let (Some(nanos), true) = (nanos, self.tracing()) {
            self.recorder.set_last_nanos(nanos);
        }
        self.counters.ops += 1;
        self.now += 1;
    }

    /// Releases what an op that failed (and so never ran) was handed for its last use: Burn
    /// will never name those tensors again.
    pub fn abandon_op(&mut self) {
        for i in 0..self.inputs.len() {
            let (id, status) = self.inputs[i];
            if status != TensorStatus::ReadWrite {
                continue;
            }
            if let Some(entry) = self.forget(&id)
                && matches!(entry.state, State::Resident)
            {
                self.runner.register_op(OperationIr::Drop(TensorIr {
                    id,
                    shape: entry.dims.to_shape(),
                    status: TensorStatus::ReadWrite,
                    dtype: entry.dtype,
                }));
            }
        }
        self.inputs.clear();
    }

    /// Removes a tensor from the books, taking its bytes off the resident or host count.
    fn forget(&mut self, id: &TensorId) -> Option<Entry> {
        let entry = self.residency.remove(id)?;
        match entry.state {
            State::Resident => self.counters.resident -= entry.bytes,
            State::Offloaded(_) => self.counters.host -= entry.bytes,
        }
        Some(entry)
    }

    fn record_named(&mut self, name: &'static str, inputs: &[&TensorIr], outputs: &[&TensorIr]) {
        if !self.tracing() {
            return;
        }
        let live_before = self.counters.resident + self.counters.host;
        self.recorder
            .begin(signature::name_key(name), || name.to_string());
        for t in inputs {
            self.recorder.input(t, bytes_of(&t.shape, t.dtype));
        }
        self.recorder.outputs_follow();
        for t in outputs {
            self.recorder.output(t, bytes_of(&t.shape, t.dtype));
        }
        self.recorder.end(OpCounters {
            nanos: 0,
            live_before,
            resident_during: self.counters.resident,
        });
    }

    fn drop_tensor(&mut self, id: TensorId, op: OperationIr) {
        // An offloaded tensor has nothing left on the device to drop.
        if !matches!(
            self.forget(&id),
            Some(Entry {
                state: State::Offloaded(_),
                ..
            })
        ) {
            self.runner.register_op(op);
        }
    }

    /// Offloads resident tensors until `deficit` bytes are freed, never one the current op
    /// uses (when `protect_inputs`). Tensors whose offload fails stay resident and the next
    /// candidate is tried.
    fn make_room(&mut self, deficit: u64, protect_inputs: bool) -> Result<(), SwapError> {
        let _span = tracing::debug_span!("burn_swap::make_room", deficit).entered();
        let mut candidates = std::mem::take(&mut self.candidates);
        candidates.clear();
        for (id, entry) in self.residency.entries.iter() {
            if matches!(entry.state, State::Resident)
                && !(protect_inputs && self.inputs.iter().any(|(i, _)| i == id))
            {
                candidates.push(Candidate {
                    key: id.value(),
                    bytes: entry.bytes,
                    last_use: entry.last_use,
                });
            }
        }
        let planned = reactive::choose_victims(
            &mut candidates,
            deficit,
            self.now,
            self.config.eviction,
            &self.link,
        );
        let mut result = Ok(());
        if planned.is_some() {
            let mut freed = 0;
            let mut last_error = None;
            for c in candidates.iter() {
                if freed >= deficit {
                    break;
                }
                match self.offload(TensorId::new(c.key)) {
                    Ok(()) => freed += c.bytes,
                    Err(e) => last_error = Some(e),
                }
            }
            if freed < deficit {
                result = Err(last_error.unwrap_or(SwapError::TransferFailed {
                    tensor: 0,
                    bytes: deficit,
                    reason: "not enough tensors could be offloaded".into(),
                }));
            }
        } else {
            result = Err(SwapError::TransferFailed {
                tensor: 0,
                bytes: deficit,
                reason: "not enough resident tensors outside the op to offload".into(),
            });
        }
        self.candidates = candidates;
        result
    }

    fn offload(&mut self, id: TensorId) -> Result<(), SwapError> {
        let Some(entry) = self.residency.get(&id) else {
            return Ok(());
        };
        let bytes = entry.bytes;
        let _span =
            tracing::debug_span!("burn_swap::offload", tensor = id.value(), bytes).entered();
        let start = Instant::now();
        match host::offload(&self.runner, id, entry) {
            Ok(data) => {
                if let Some(entry) = self.residency.get_mut(&id) {
                    entry.state = State::Offloaded(Box::new(data));
                }
                self.counters.resident -= bytes;
                self.counters.host += bytes;
                self.counters.peak_host = self.counters.peak_host.max(self.counters.host);
                self.counters.offloads += 1;
                self.counters.offloaded_bytes += bytes;
                self.counters.offload_nanos += start.elapsed().as_nanos() as u64;
                Ok(())
            }
            Err(error) => {
                self.counters.failed_offloads += 1;
                tracing::warn!(tensor = id.value(), bytes, %error, "burn-swap: offload failed; the tensor stays resident");
                Err(SwapError::TransferFailed {
                    tensor: id.value(),
                    bytes,
                    reason: error.to_string(),
                })
            }
        }
    }

    fn fetch(&mut self, id: TensorId) {
        let Some(entry) = self.residency.get_mut(&id) else {
            return;
        };
        let State::Offloaded(data) = core::mem::replace(&mut entry.state, State::Resident) else {
            return;
        };
        let bytes = entry.bytes;
        let _span = tracing::debug_span!("burn_swap::fetch", tensor = id.value(), bytes).entered();
        let start = Instant::now();
        host::fetch(&self.runner, id, *data);
        self.counters.host -= bytes;
        self.counters.resident += bytes;
        self.counters.fetches += 1;
        self.counters.fetched_bytes += bytes;
        self.counters.fetch_nanos += start.elapsed().as_nanos() as u64;
    }

    /// The copy throughput between device and host, measured on first request with
    /// temporary tensors of 64 KiB, 1 MiB and 8 MiB (those that fit in half the budget's
    /// headroom); the fitted model then scores the reactive policy's choices. `None` when
    /// fewer than two sizes fit or the measurement failed.
    pub fn links(&mut self) -> Option<crate::plan::profile::Links> {
        if self.links.is_none() {
            let headroom = self
                .budget()
                .map_or(u64::MAX, |b| b.saturating_sub(self.counters.resident));
            let sizes: Vec<u64> = [64u64 << 10, 1 << 20, 8 << 20]
                .into_iter()
                .filter(|&s| s <= headroom / 2)
                .collect();
            if sizes.len() < 2 {
                return None;
            }
            match host::measure_links(&self.runner, &sizes) {
                Ok(links) => {
                    if let Some(model) = links.link_model() {
                        self.link = model;
                    }
                    self.links = Some(links);
                }
                Err(error) => {
                    tracing::warn!(%error, "burn-swap: could not measure copy throughput");
                    return None;
                }
            }
        }
        self.links.clone()
    }

    /// Applies a new configuration; when the new budget is below what is resident, offloads at
    /// once so that the budget holds from now on.
    pub fn reconfigure(
        &mut self,
        config: SwapConfig,
        budget: Option<u64>,
    ) -> Result<(), SwapError> {
        self.config = config;
        self.budget = budget;
        if let Some(budget) = self.budget()
            && self.counters.resident > budget
        {
            self.inputs.clear();
            self.make_room(self.counters.resident - budget, false)?;
        }
        Ok(())
    }

    /// Makes room for `bytes` new bytes outside any op (a tensor created from data, or arriving
    /// from another device).
    fn admit(&mut self, bytes: u64, what: &'static str) -> Result<(), SwapError> {
        self.counters.largest_op = self.counters.largest_op.max(bytes);
        if let Some(budget) = self.budget() {
            if bytes > budget {
                return Err(SwapError::OpExceedsBudget {
                    op: what.to_string(),
                    needed: bytes,
                    budget,
                });
            }
            let after = self.counters.resident + bytes;
            if after > budget {
                self.inputs.clear();
                self.make_room(after - budget, false)?;
            }
        }
        Ok(())
    }

    fn insert_resident(&mut self, id: TensorId, shape: Shape, dtype: DType) {
        let bytes = bytes_of(&shape, dtype);
        self.counters.resident += bytes;
        self.counters.note_resident(self.counters.resident);
        self.residency.insert(
            id,
            Entry {
                bytes,
                dims: Dims::from_slice(shape.as_slice()),
                dtype,
                last_use: self.now,
                state: State::Resident,
            },
        );
    }

    /// Registers a tensor made from host data (its `Init` op follows).
    pub fn register_data(&mut self, data: TensorData) -> Result<TensorIr, SwapError> {
        self.admit(bytes_of(&data.shape, data.dtype), "FromData")?;
        let ir = self.runner.register_tensor_data_desc(data);
        self.insert_resident(ir.id, ir.shape.clone(), ir.dtype);
        Ok(ir)
    }

    /// Registers a tensor arriving from another device as a backend handle; returns its id.
    pub fn register_handle(
        &mut self,
        handle: B::Handle,
        shape: Shape,
        dtype: DType,
    ) -> Result<TensorId, SwapError> {
        self.admit(bytes_of(&shape, dtype), "Arrive")?;
        let ir = self
            .runner
            .register_tensor(handle, shape.clone(), dtype, self.runner.clone())
            .into_ir();
        self.insert_resident(ir.id, shape, dtype);
        let out = TensorIr {
            status: TensorStatus::NotInit,
            ..ir
        };
        self.record_named("Arrive", &[], &[&out]);
        self.now += 1;
        self.counters.ops += 1;
        Ok(out.id)
    }

    /// Takes a tensor's handle out for a move to another device.
    pub fn take_handle(&mut self, tensor: &TensorIr) -> Result<B::Handle, SwapError> {
        self.ensure_resident(tensor)?;
        self.record_named("Depart", &[tensor], &[]);
        let handle = self.runner.get_tensor_handle(tensor);
        self.consume_if_last(tensor);
        self.now += 1;
        self.counters.ops += 1;
        Ok(handle)
    }

    fn ensure_resident(&mut self, tensor: &TensorIr) -> Result<(), SwapError> {
        if self.residency.is_offloaded(&tensor.id) {
            let bytes = bytes_of(&tensor.shape, tensor.dtype);
            self.inputs.clear();
            self.inputs.push((tensor.id, tensor.status));
            if let Some(budget) = self.budget() {
                let after = self.counters.resident + bytes;
                if after > budget {
                    self.make_room(after - budget, true)?;
                }
            }
            self.fetch(tensor.id);
        }
        Ok(())
    }

    fn consume_if_last(&mut self, tensor: &TensorIr) {
        if tensor.status == TensorStatus::ReadWrite {
            self.forget(&tensor.id);
        } else if let Some(entry) = self.residency.get_mut(&tensor.id) {
            entry.last_use = self.now;
        }
    }

    /// Reads a tensor's data. An offloaded tensor is served from the host store without
    /// coming back to the device.
    pub fn read(&mut self, tensor: TensorIr) -> DynFut<Result<TensorData, ExecutionError>> {
        self.record_named("Read", &[&tensor], &[]);
        self.now += 1;
        self.counters.ops += 1;
        if self.residency.is_offloaded(&tensor.id) {
            let data = if tensor.status == TensorStatus::ReadWrite {
                match self.forget(&tensor.id).map(|e| e.state) {
                    Some(State::Offloaded(data)) => *data,
                    _ => unreachable!("checked offloaded above"),
                }
            } else {
                self.consume_if_last(&tensor);
                match self.residency.get(&tensor.id).map(|e| &e.state) {
                    Some(State::Offloaded(data)) => TensorData::clone(data),
                    _ => unreachable!("checked offloaded above"),
                }
            };
            return Box::pin(async move { Ok(data) });
        }
        let future = self.runner.read_tensor_async(tensor.clone());
        self.consume_if_last(&tensor);
        future
    }
}
