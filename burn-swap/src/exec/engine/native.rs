//! Native ops: the ops that burn-router would decompose run natively on the inner backend;
//! the engine fetches their inputs, makes room for their outputs as predicted from their
//! shapes, and books what they made.

use burn_backend::{DType, Shape};
use burn_ir::{BackendIr, TensorId, TensorIr, TensorStatus};

use super::Engine;
use crate::error::SwapError;
use crate::exec::bytes_of;
use crate::exec::residency::{Dims, Entry};
use crate::trace::signature;

impl<B: BackendIr> Engine<B> {
    /// Prepares a native op: fetches its inputs and makes room for its outputs: `expected`
    /// bytes when the caller knows them from the op's arguments, else as
    /// [`native_output_bytes`] predicts them from its inputs.
    pub fn native_prepare(
        &mut self,
        name: &'static str,
        inputs: &[TensorIr],
        expected: Option<u64>,
    ) -> Result<(), SwapError> {
        self.poll_transfers();
        let (input_bytes, absent_bytes) = self.op.gather_inputs(
            inputs.iter(),
            &self.residency,
            &mut self.history.recorder,
            false,
        );
        let output_bytes = expected.unwrap_or_else(|| native_output_bytes(name, inputs));
        let budgeted = self.budget().is_some();
        self.op.expect_temporaries(
            &self.machine,
            budgeted,
            || signature::name_key(name),
            input_bytes,
            output_bytes,
        );
        self.fit(input_bytes, absent_bytes, output_bytes)
            .map_err(|e| e.for_op(|| format!("Native.{name}")))?;
        let budget = self.budget();
        self.machine.clear_for_op::<B>(
            &self.op,
            budget,
            output_bytes,
            self.handles.device(),
            self.copies.transfers.pools(),
            &mut self.history.counters,
        );
        self.op.shared_reads.clear();
        self.op.native_base = self.resident();
        self.op.native_reserved = output_bytes;
        self.op.native_out = 0;
        self.op.out_ids.clear();
        Ok(())
    }

    /// Takes an input's handle for a native op (removing it from the books when it is the
    /// input's last use, unless a recipe still needs it). An input the op consumes that
    /// shares its buffer in the unwrapped run (see `OpScratch::read_shared_inputs`) is handed
    /// over read-only, so that the op does not write into it in place, and released when the
    /// op has finished ([`Self::native_finish`]).
    pub fn native_take(&mut self, tensor: &TensorIr) -> B::Handle {
        if tensor.status == TensorStatus::ReadWrite {
            self.residency.pin_for_views(tensor.id);
            if self.op.read_only_for_sharing(&self.residency, tensor.id) {
                self.op.shared_reads.push(tensor.id);
                let read = TensorIr {
                    status: TensorStatus::ReadOnly,
                    ..tensor.clone()
                };
                let read = read;
                return self.handles.handle(&read);
            }
        }
        self.take_for_read(tensor)
    }

    /// Registers an output of a native op; returns its id.
    pub fn native_output(&mut self, handle: B::Handle, shape: Shape, dtype: DType) -> TensorId {
        // A native op may keep its input's layout (a transpose makes a view): the backend
        // says, else it is taken as strided when an input was.
        let probe = crate::exec::layout::probe::<B>(&handle, &shape, dtype);
        let strided = match probe.map(|p| p.dense) {
            Some(dense) => !dense,
            // A quantized tensor leaves as its data (values and quantization parameters, in
            // order, as the backend's records save it) and comes back dense.
            None if matches!(dtype, DType::QFloat(_)) => false,
            None => self.op.inputs_strided,
        };
        let id = self.handles.insert_fresh(handle);
        self.op.native_out += bytes_of(&shape, dtype);
        let mut entry = Entry::new(Dims::from_slice(shape.as_slice()), dtype, self.history.now);
        entry.strided = strided;
        entry.restorable = strided
            && probe
                .is_some_and(|p| crate::exec::layout::restorable(self.settings.teller, &p, dtype));
        if strided && !entry.restorable {
            self.residency.views.strided_live.push(id);
        }
        self.residency.admit(id, entry);
        self.op.out_ids.push(id);
        id
    }

    /// Records a native op once it ran, with its time when it was timed. Outputs larger
    /// than the room made for them are an overshoot: counted, and room is made right away
    /// (an error when none can be).
    pub fn native_finish(
        &mut self,
        name: &'static str,
        inputs: &[TensorIr],
        outputs: &[TensorIr],
        clock: Option<std::time::Instant>,
    ) -> Result<(), SwapError> {
        let nanos = self.stop_op_clock(clock);
        let during = self.op.native_base + self.op.native_out;
        // Outputs larger than the room made for them broke the budget while the op ran (its
        // inputs and outputs at once), even when what it consumed has gone since.
        let overshoot = self.op.native_out > self.op.native_reserved
            && self.budget().is_some_and(|budget| during > budget);
        if overshoot {
            self.history.counters.budget_overshoots += 1;
            tracing::warn!(
                op = name,
                reserved = self.op.native_reserved,
                made = self.op.native_out,
                "burn-swap: a native op made more than the room made for it"
            );
        }
        // The peak says what was on the device, budget or not.
        self.residency.note_peak(during);
        self.record_named(name, inputs, outputs, Some(during));
        if let (Some(nanos), true) = (nanos, self.op.traced) {
            self.history.recorder.set_last_nanos(nanos);
        }
        let room = if overshoot {
            // Nothing of the op is in use any more: its outputs may leave too.
            self.op.inputs.clear();
            let budget = self.budget().unwrap_or(u64::MAX);
            self.make_room(self.resident().saturating_sub(budget), false)
        } else {
            Ok(())
        };
        self.op.budget_broken = room.is_err();
        // Inputs handed over read-only because they share a buffer in the unwrapped run: the
        // op is done with them.
        self.release_shared_reads();
        self.finish_op();
        self.machine
            .name_reserved_over(self.op.shape, || format!("Native.{name}"));
        room.map_err(|e| e.for_op(|| format!("Native.{name}")))
    }
}

/// The bytes a native op's outputs will take, from its name and inputs: the shapes of the ops
/// whose outputs outgrow their inputs (an embedding's rows, a sort's indices, a grid sample's
/// grid) are computed; every other native op (activations, norms, sorts, transposes) makes
/// one output no larger than its largest input. Ops without tensor inputs (`int_arange`,
/// `int_full`) and `unfold4d` have their outputs' size given by the caller, from the op's
/// arguments (see `backend::native::NativeOp::with_output_bytes`).
fn native_output_bytes(name: &str, inputs: &[TensorIr]) -> u64 {
    let largest = inputs
        .iter()
        .map(|t| bytes_of(&t.shape, t.dtype))
        .max()
        .unwrap_or(0);
    let dims = |i: usize| inputs.get(i).map(|t| t.shape.as_slice());
    match name {
        // embedding(weights [V, D], indices [..]) -> [.., D]
        "embedding" => match (dims(0), dims(1)) {
            (Some([_, d]), Some(idx)) => {
                (idx.iter().product::<usize>() * d * inputs[0].dtype.size()) as u64
            }
            _ => largest,
        },
        // Indices, as wide as i64 at most (the CPU backend's are i64 whatever the input's).
        "float_argsort" | "int_argsort" => inputs
            .first()
            .map_or(largest, |t| 8 * t.shape.num_elements() as u64),
        // Values and their i64 indices.
        "float_sort_with_indices" | "int_sort_with_indices" => {
            inputs.first().map_or(largest, |t| {
                bytes_of(&t.shape, t.dtype) + 8 * t.shape.num_elements() as u64
            })
        }
        // grid_sample_2d(tensor [N, C, H, W], grid [N, Ho, Wo, 2]) -> [N, C, Ho, Wo]
        "float_grid_sample_2d" => match (dims(0), dims(1)) {
            (Some([n, c, _, _]), Some([_, ho, wo, _])) => {
                (n * c * ho * wo * inputs[0].dtype.size()) as u64
            }
            _ => largest,
        },
        _ => largest,
    }
}

#[cfg(test)]
mod tests {
    use super::native_output_bytes;
    use burn_backend::{DType, Shape};
    use burn_ir::{TensorId, TensorIr, TensorStatus};

    fn ir(dims: &[usize], dtype: DType) -> TensorIr {
        TensorIr {
            id: TensorId::new(0),
            shape: Shape::from(dims.to_vec()),
            status: TensorStatus::ReadOnly,
            dtype,
        }
    }

    #[test]
    fn native_outputs_are_predicted_from_their_shapes() {
        // An embedding of 32 rows of 64 floats looked up for 8 × 32 indices: 8·32·64 floats,
        // more than either input.
        let weights = ir(&[32, 64], DType::F32);
        let indices = ir(&[8, 32], DType::I64);
        assert_eq!(
            native_output_bytes("embedding", &[weights, indices]),
            8 * 32 * 64 * 4
        );
        // A sort with indices makes the values and i64 indices.
        let x = ir(&[100], DType::F32);
        assert_eq!(
            native_output_bytes("float_sort_with_indices", std::slice::from_ref(&x)),
            400 + 800
        );
        // A grid sample makes [N, C, Ho, Wo] from the grid's size.
        let t = ir(&[2, 3, 8, 8], DType::F32);
        let grid = ir(&[2, 16, 16, 2], DType::F32);
        assert_eq!(
            native_output_bytes("float_grid_sample_2d", &[t, grid]),
            2 * 3 * 16 * 16 * 4
        );
        // An argsort makes indices, as wide as i64 at most, whatever its input's width.
        let ints = ir(&[60], DType::I32);
        assert_eq!(native_output_bytes("int_argsort", &[ints]), 480);
        // Anything else: the largest input.
        assert_eq!(native_output_bytes("relu", &[x]), 400);
        assert_eq!(native_output_bytes("int_arange", &[]), 0);
    }
}
