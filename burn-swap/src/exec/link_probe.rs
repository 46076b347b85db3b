//! The copy throughput between the device and host memory, measured with temporary tensors
//! along the inner backend's own data path. (Copies out go through `transfer::copy_out` and
//! back through `transfer::write` on every thread.)

use burn_backend::{ExecutionError, TensorData};
use burn_ir::{BackendIr, TensorIr, TensorStatus};
use burn_std::reader::try_read_sync;

use super::interpreter::Handles;

/// Measures copy throughput to and from the device with temporary tensors of each size
/// (the fastest of three runs each) along the paths offload and fetch take, outside the books:
/// the caller makes sure they fit.
pub(crate) fn measure_links<B: BackendIr>(
    handles: &mut Handles<B>,
    sizes: &[u64],
) -> Result<crate::plan::profile::Links, ExecutionError> {
    use crate::plan::profile::{CopySample, Links};
    use std::time::Instant;

    let _span = tracing::debug_span!("burn_swap::measure_links", sizes = sizes.len()).entered();
    let mut links = Links {
        to_host: Vec::new(),
        to_device: Vec::new(),
        on_thread: None,
    };
    for &bytes in sizes {
        let elements = (bytes / 4) as usize;
        let data = TensorData::new(vec![0f32; elements], [elements]);
        let (mut up, mut down) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..3 {
            let input = data.clone();
            let start = Instant::now();
            let ir = handles.upload(input);
            B::sync(handles.device())?;
            up = up.min(start.elapsed().as_secs_f64());

            // The same path as an offload: a read-only read, then the device copy dropped.
            let start = Instant::now();
            let read = TensorIr {
                status: TensorStatus::ReadOnly,
                ..ir
            };
            let back = try_read_sync(handles.read(&read)).ok_or_else(|| {
                ExecutionError::WithContext {
                    reason: "burn-swap: this platform cannot block on a read".into(),
                }
            })??;
            handles.remove(&read.id);
            down = down.min(start.elapsed().as_secs_f64());
            drop(back);
        }
        let bytes = 4 * elements as u64;
        links.to_device.push(CopySample { bytes, seconds: up });
        links.to_host.push(CopySample {
            bytes,
            seconds: down,
        });
    }
    Ok(links)
}
