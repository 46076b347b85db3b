//! The inner backends a command line names with `--device` (`flex`; `wgpu` and `cuda` with
//! their features), and the runs of `swap-bench` and `swap-check` on each, compiled here.
//!
//! The runs are generic over the backend, and Rust compiles a generic function in the crate
//! that names its types. Named in the two binaries, each compiled its own copy of the
//! training code of every model on every backend: the two largest units of a CI build.
//! Named here, the harness compiles them once; the binaries link that copy, and so do the
//! tests and examples that train the same models on the same backends (in the dev profile,
//! at opt-level 1, rustc shares generic instances between crates).

use burn_ir::BackendIr;

use crate::cli::unknown_device;
use crate::harness::{self, Plan, Row};
use crate::verify::{self, Check};

/// What the max-batch search found: the cap in bytes, the largest batch without burn-swap
/// and the largest with it.
pub type Batches = (u64, usize, usize);

/// `swap-bench` on the backend `device` names: the max-batch search first, on a fresh
/// device (a configuration that fails under its budget can leave tensors of the unwound step
/// counted), then every row of `plan`. As a probe of that search (`probe`: batch and cap),
/// it runs one probe and exits the process with its verdict (0 when it trained).
pub fn bench(
    device: &str,
    plan: &Plan,
    probe: Option<(usize, u64)>,
    limit: usize,
    probe_in_child: &mut dyn FnMut(usize, u64) -> bool,
) -> Result<(Vec<Row>, Batches), String> {
    match device {
        "flex" => Ok(bench_on::<burn::backend::Flex>(
            &Default::default(),
            plan,
            probe,
            limit,
            probe_in_child,
        )),
        #[cfg(feature = "wgpu")]
        "wgpu" => {
            let device = cubecl::wgpu::WgpuDevice::DefaultDevice;
            if !crate::wgpu_adapter(&device) {
                return Err("no wgpu adapter".into());
            }
            Ok(bench_on::<burn_swap::unstable::CubeWgpu>(
                &device,
                plan,
                probe,
                limit,
                probe_in_child,
            ))
        }
        #[cfg(feature = "cuda")]
        "cuda" => Ok(bench_on::<burn::backend::Cuda>(
            &Default::default(),
            plan,
            probe,
            limit,
            probe_in_child,
        )),
        other => Err(unknown_device(other).to_string()),
    }
}

fn bench_on<I: BackendIr>(
    device: &I::Device,
    plan: &Plan,
    probe: Option<(usize, u64)>,
    limit: usize,
    probe_in_child: &mut dyn FnMut(usize, u64) -> bool,
) -> (Vec<Row>, Batches) {
    if let Some((batch, cap)) = probe {
        let ok = harness::probe::<I>(device, &plan.workload.with_batch(batch), cap);
        std::process::exit(if ok { 0 } else { 1 });
    }
    let batches = harness::max_batches::<I>(
        device,
        &plan.workload,
        plan.cap_fraction,
        limit,
        probe_in_child,
    );
    (harness::run::<I>(plan, device), batches)
}

/// `swap-check`'s correctness half on the backend `device` names: [`verify::run`] of each
/// check in turn, their rows together. The caller makes sure the device is there (a wgpu
/// adapter: [`crate::wgpu_adapter`]).
pub fn verify(device: &str, checks: &[&Check]) -> Result<Vec<verify::Row>, String> {
    fn each<I: BackendIr>(device: &I::Device, checks: &[&Check]) -> Vec<verify::Row> {
        checks
            .iter()
            .flat_map(|check| verify::run::<I>(check, device))
            .collect()
    }
    match device {
        "flex" => Ok(each::<burn::backend::Flex>(&Default::default(), checks)),
        #[cfg(feature = "wgpu")]
        "wgpu" => Ok(each::<burn_swap::unstable::CubeWgpu>(
            &cubecl::wgpu::WgpuDevice::DefaultDevice,
            checks,
        )),
        #[cfg(feature = "cuda")]
        "cuda" => Ok(each::<burn::backend::Cuda>(&Default::default(), checks)),
        other => Err(unknown_device(other).to_string()),
    }
}
