//! Synthetic traces with the shape of a training iteration, for the planners' tests and
//! benches: no model has to run.

use super::{Access, AccessKind, End, EndKind, OpTrace, Slot, TensorTrace, Trace};

/// A chain network of `layers` layers: forward op `l` makes activation `l` (of
/// `bytes(l)` bytes), which forward op `l + 1` reads (the last one is read by the loss op,
/// `layers`), and whose backward op, `layers + 1 + (layers - 1 - l)`, reads it for the last
/// time. Op `i` takes `nanos(i)`; every op is a `Float.Matmul`.
pub fn chain(layers: usize, bytes: impl Fn(usize) -> u64, nanos: impl Fn(usize) -> u64) -> Trace {
    let layers = layers.max(1);
    let ops = 2 * layers + 1;
    let tensors = (0..layers)
        .map(|l| {
            let backward = layers + 1 + (layers - 1 - l);
            let next = if l + 1 < layers { l + 1 } else { layers };
            let bytes = bytes(l);
            TensorTrace {
                id: l as u64,
                slot: Slot::Output { op: l, index: 0 },
                shape: vec![(bytes / 4) as usize],
                dtype: "F32".into(),
                bytes,
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
                wraps_to: None,
                shares_buffer: false,
                view_of: None,
            }
        })
        .collect();
    Trace {
        period: Some(ops),
        iteration: 0,
        first_op: 0,
        periodic_from: 0,
        peak_bytes: 0,
        ops: (0..ops)
            .map(|i| OpTrace {
                index: i,
                kind: "Float.Matmul".into(),
                signature: i as u64,
                inputs: match i {
                    0 => vec![],
                    i if i <= layers => vec![i as u64 - 1],
                    i => vec![(2 * layers - i) as u64],
                },
                outputs: if i < layers { vec![i as u64] } else { vec![] },
                nanos: nanos(i),
                resident_bytes: 0,
                temporaries: 0,
                events: Default::default(),
            })
            .collect(),
        tensors,
    }
}
