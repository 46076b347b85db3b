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
use crate::harness::{self, Row};
use crate::lockstep::{self, Spawn};
use crate::plan::Plan;
use crate::verify::{self, Check};

/// What the max-batch search found: the cap in bytes, the largest batch without burn-swap
/// and the largest with it.
pub type Batches = (u64, usize, usize);

/// The processes of its own that `swap-bench` runs, and which of them this one is.
pub struct Processes<'a> {
    /// This process is one probe of the max-batch search (batch and cap): it runs the probe
    /// and exits with its verdict (0 when it trained).
    pub probe: Option<(usize, u64)>,
    /// Runs one probe of the max-batch search in a fresh process: whether it trained.
    pub probe_in_child: &'a mut dyn FnMut(usize, u64) -> bool,
    /// This process is one row of a lockstep run (policy and budget in bytes): it runs the
    /// row (`lockstep::row`) and exits.
    pub lockstep_row: Option<(burn_swap::Policy, u64)>,
    /// Starts a lockstep row's process: the rows run in lockstep (`--lockstep`). `None`:
    /// they run in this process.
    pub spawn_row: Option<&'a mut Spawn<'a>>,
}

/// `swap-bench` on the backend `device` names: the max-batch search first, on a fresh
/// device (a configuration that fails under its budget can leave tensors of the unwound step
/// counted), then every row of `plan`. As one of `processes`' children it runs that child's
/// part only (a probe, a lockstep row) and exits.
pub fn bench(
    device: &str,
    plan: &Plan,
    limit: usize,
    processes: Processes<'_>,
) -> Result<(Vec<Row>, Batches), String> {
    match device {
        "flex" => Ok(bench_on::<burn::backend::Flex>(
            &Default::default(),
            plan,
            limit,
            processes,
        )),
        #[cfg(feature = "wgpu")]
        "wgpu" => {
            let device = cubecl::wgpu::WgpuDevice::DefaultDevice;
            if !crate::wgpu_adapter(&device) {
                return Err("no wgpu adapter".into());
            }
            Ok(bench_on::<burn_swap::unstable::CubeWgpu>(
                &device, plan, limit, processes,
            ))
        }
        #[cfg(feature = "cuda")]
        "cuda" => Ok(bench_on::<burn::backend::Cuda>(
            &Default::default(),
            plan,
            limit,
            processes,
        )),
        other => Err(unknown_device(other).to_string()),
    }
}

fn bench_on<I: BackendIr>(
    device: &I::Device,
    plan: &Plan,
    limit: usize,
    processes: Processes<'_>,
) -> (Vec<Row>, Batches) {
    if let Some((batch, cap)) = processes.probe {
        let ok = harness::probe::<I>(device, &plan.workload.with_batch(batch), cap);
        std::process::exit(if ok { 0 } else { 1 });
    }
    if let Some((policy, budget)) = processes.lockstep_row {
        lockstep::row::<I>(device, plan, policy, budget);
        std::process::exit(0);
    }
    let batches = harness::max_batches::<I>(
        device,
        &plan.workload,
        plan.cap_fraction,
        limit,
        processes.probe_in_child,
    );
    (
        harness::run::<I>(plan, device, processes.spawn_row),
        batches,
    )
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
