//! Synthetic traces for the planners' benches: the shape of a training iteration (a forward
//! chain whose activations are read again, in reverse, by the backward chain), at any size,
//! with no model run.

use burn_swap::trace::{Access, AccessKind, End, EndKind, OpTrace, Slot, TensorTrace, Trace};

/// A training-shaped iteration of about `ops` ops: `ops / 2` layers, each making one
/// activation (sizes cycling through a few shapes) that the next layer reads and its backward
/// op reads last; every op takes `nanos`.
pub fn training_iteration(ops: usize, nanos: u64) -> Trace {
    let layers = (ops.saturating_sub(1) / 2).max(1);
    let total = 2 * layers + 1;
    let tensors = (0..layers)
        .map(|l| {
            let backward = layers + 1 + (layers - 1 - l);
            let next = if l + 1 < layers { l + 1 } else { layers };
            let elements = 1024 * (1 + l % 4);
            TensorTrace {
                id: l as u64,
                slot: Slot::Output { op: l, index: 0 },
                shape: vec![elements],
                dtype: "F32".into(),
                bytes: 4 * elements as u64,
                producer: Some(l),
                accesses: vec![
                    Access {
                        op: next,
                        kind: AccessKind::Read,
                    },
                    Access {
                        op: backward,
                        kind: AccessKind::LastUse,
                    },
                ],
                end: Some(End {
                    op: backward,
                    kind: EndKind::LastUse,
                }),
            }
        })
        .collect();
    Trace {
        period: Some(total),
        iteration: 0,
        first_op: 0,
        periodic_from: 0,
        peak_bytes: 0,
        ops: (0..total)
            .map(|i| OpTrace {
                index: i,
                kind: "Float.Matmul".into(),
                signature: i as u64,
                inputs: vec![],
                outputs: vec![],
                nanos,
                resident_bytes: 0,
            })
            .collect(),
        tensors,
    }
}
