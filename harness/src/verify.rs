//! The correctness half of the GPU check, for any inner backend: training through
//! `Autodiff<Swap<I>>` against `Autodiff<I>`, bit for bit, under budgets that force offloads
//! and recomputation, with the counted and the allocator's peaks next to the unwrapped run's.
//! `swap-check` prints its table; CI runs it on burn-flex (`--quick`) so that it keeps working.

use burn::tensor::backend::Backend;
use burn::tensor::backend::DeviceOps;
use burn::tensor::{Tensor, TensorData};
use burn_ir::BackendIr;
use burn_swap::{
    AllocatorUsage, Compression, PeerSpec, PeerStat, Policy, Report, StreamRole, StreamUsage, Swap,
    SwapConfig,
};

use crate::models::{BnCnnConfig, ConvNetConfig, LstmNetConfig, MlpConfig, TransformerConfig};
use crate::table::Table;
use crate::train::Outcome;
use crate::workload::Workload;

/// The check's five models at test size (seconds on a CPU): MLP, conv net, transformer,
/// the BatchNorm CNN and the LSTM (the two whose tensors share buffers with views).
pub fn small_models() -> Vec<Workload> {
    vec![
        Workload::Mlp(MlpConfig::small()),
        Workload::ConvNet(ConvNetConfig::small()),
        Workload::Transformer(TransformerConfig::small()),
        Workload::BnCnn(BnCnnConfig::small()),
        Workload::Lstm(LstmNetConfig::small()),
    ]
}

/// The check's five models at a size where a GPU's allocator pages do not hide the budget
/// (hundreds of MiB of activations).
pub fn large_models() -> Vec<Workload> {
    vec![
        Workload::Mlp(MlpConfig {
            d_in: 4096,
            hidden: 4096,
            depth: 6,
            d_out: 16,
            batch: 2048,
            seed: 5,
        }),
        Workload::ConvNet(ConvNetConfig {
            channels: 3,
            size: 64,
            width: 64,
            depth: 8,
            classes: 10,
            batch: 64,
            seed: 11,
        }),
        Workload::Transformer(TransformerConfig {
            layers: 4,
            d_model: 512,
            heads: 8,
            seq: 256,
            d_ff: 2048,
            d_out: 16,
            batch: 32,
            seed: 13,
        }),
        Workload::BnCnn(BnCnnConfig {
            channels: 3,
            size: 64,
            width: 64,
            depth: 8,
            classes: 10,
            batch: 32,
            seed: 17,
        }),
        Workload::Lstm(LstmNetConfig {
            input: 256,
            hidden: 1024,
            seq: 128,
            d_out: 16,
            batch: 64,
            seed: 19,
        }),
    ]
}

/// Only the models named in `names` (comma-separated, as [`Workload::name`] gives them), in
/// their order in `models`; an unknown name is an error naming it.
pub fn select_models(models: Vec<Workload>, names: &str) -> Result<Vec<Workload>, String> {
    let wanted: Vec<&str> = names.split(',').map(str::trim).collect();
    for name in &wanted {
        if !models.iter().any(|m| m.name() == *name) {
            let known: Vec<&str> = models.iter().map(|m| m.name()).collect();
            return Err(format!("--models: no model {name:?} (known: {known:?})"));
        }
    }
    Ok(models
        .into_iter()
        .filter(|m| wanted.contains(&m.name()))
        .collect())
}

/// What the check runs.
#[derive(Debug, Clone)]
pub struct Check {
    /// The models.
    pub models: Vec<Workload>,
    /// The policies, each at every fraction.
    pub policies: Vec<Policy>,
    /// Budgets as fractions of the unbudgeted counted peak.
    pub fractions: Vec<f64>,
    /// Training steps per run.
    pub steps: usize,
    /// Transfer jitter in microseconds (the ordering stress test; 0: off).
    pub jitter_micros: u64,
    /// Compression of offloads.
    pub compression: Compression,
    /// Peers that take offloads (seed 000); empty: the host.
    pub peers: Vec<PeerSpec>,
    /// Judge runs by the unwrapped backend's own run-to-run spread instead of bit for bit
    /// (for backends that are not deterministic run to run, such as Burn's fused and
    /// autotuned CUDA backend): the unwrapped run is trained twice, and a run passes when its
    /// losses are within that spread of the first's.
    pub spread: bool,
}

/// One run of the check.
#[derive(Debug, Clone)]
pub struct Row {
    /// The model.
    pub model: &'static str,
    /// `unwrapped`, or the policy's name.
    pub run: String,
    /// The budget as a fraction of the unbudgeted counted peak (1 for the unwrapped run).
    pub fraction: f64,
    /// Losses and parameters equal to the unwrapped run's, bit for bit.
    pub identical: bool,
    /// The largest difference of a step's loss from the unwrapped run's (`NaN`: the run
    /// failed).
    pub loss_gap: f64,
    /// Under [`Check::spread`], the largest difference between the unwrapped backend's two
    /// runs of the model (0 otherwise).
    pub spread: f64,
    /// Whether the run passes: bit-identical, or under [`Check::spread`] within the spread.
    pub pass: bool,
    /// The budget in bytes (`None` for the unwrapped run).
    pub budget: Option<u64>,
    /// The counted peak (burn-swap's books; the unbudgeted swap run's for the unwrapped row).
    pub counted_peak: u64,
    /// The allocator's highest figures (for the unwrapped run: what its pools reserved by
    /// the end of the run, after a cleanup before it; `in_use` is not sampled there).
    pub allocator: Option<AllocatorUsage>,
    /// Offloads, fetches, recomputations.
    pub moves: (u64, u64, u64),
    /// Offloads compressed on the device.
    pub device_compressed: u64,
    /// Milliseconds per step that compute waited on transfers.
    pub exposed_wait_ms: f64,
    /// Per peer: bytes sent and the achieved bandwidth (empty without peers).
    pub peers: Vec<PeerStat>,
    /// The largest op's working set (`report.workload.largest_op_bytes`).
    pub largest_op: u64,
    /// The streams burn-swap ran device work on, as the report lists them (each with the
    /// most its pools reserved). Empty for the unwrapped run and on Flex.
    pub streams: Vec<StreamUsage>,
}

/// The most the allocator may reserve under `budget` in the suite's checks (the bound the
/// wgpu tests assert, `tests/budget/cube.rs`): the budget, 2% of it and 64 KiB, for what
/// burn-swap cannot hold (the first run of an op shape, whose temporaries are not known
/// yet, and the transfer workers' codec buffers while a copy runs; the book's *Device
/// memory as the allocator sees it*).
pub fn reserved_bound(budget: u64) -> u64 {
    budget + budget / 50 + (64 << 10)
}

impl Row {
    /// Where the backend reports its allocator and this run had a budget: the reserved peak
    /// and its bound, when the peak is over it.
    pub fn reserved_breach(&self) -> Option<(u64, u64)> {
        let (budget, allocator) = (self.budget?, self.allocator?);
        let bound = reserved_bound(budget);
        (allocator.reserved > bound).then_some((allocator.reserved, bound))
    }
}

/// Runs the check on `device` of the inner backend `I`: per model the unwrapped run, then
/// the unbudgeted swap run (its counted peak sets the budgets), then every policy at every
/// fraction. Returns the rows; a row that is not identical is a failure.
pub fn run<I>(check: &Check, device: &I::Device) -> Vec<Row>
where
    I: BackendIr + Backend,
{
    type Plain<I> = burn::backend::Autodiff<I>;
    type Swapped<I> = burn::backend::Autodiff<Swap<I>>;
    let _guard = crate::swap_device_lock();
    let mut rows = Vec::new();
    for model in &check.models {
        burn_swap::unstable::allocator_cleanup::<I>(device);
        let plain = model.train::<Plain<I>>(device, check.steps);
        let plain_allocator = burn_swap::unstable::allocator_usage::<I>(device);
        let spread = if check.spread {
            loss_gap(&plain, &model.train::<Plain<I>>(device, check.steps))
        } else {
            0.0
        };
        let judge = |outcome: &Outcome| {
            let gap = loss_gap(outcome, &plain);
            let identical = *outcome == plain;
            (identical, gap, identical || (check.spread && gap <= spread))
        };

        burn_swap::configure(device, SwapConfig::default()).expect("the default configuration");
        burn_swap::restart_trace(device);
        burn_swap::reset_counters(device);
        let unbudgeted = model.train::<Swapped<I>>(device, check.steps);
        let peak = burn_swap::report(device).map_or(0, |r| r.memory.peak_bytes);
        let (identical, loss_gap, pass) = judge(&unbudgeted);
        rows.push(Row {
            model: model.name(),
            run: "unwrapped".into(),
            fraction: 1.0,
            identical,
            loss_gap,
            spread,
            pass,
            budget: None,
            counted_peak: peak,
            allocator: plain_allocator,
            moves: (0, 0, 0),
            device_compressed: 0,
            exposed_wait_ms: 0.0,
            peers: Vec::new(),
            largest_op: 0,
            streams: Vec::new(),
        });
        for &policy in &check.policies {
            for &fraction in &check.fractions {
                let budget = (peak as f64 * fraction) as u64;
                let config = SwapConfig::budget_bytes(budget.max(1))
                    .with_policy(policy)
                    .with_compression(check.compression)
                    .with_transfer_jitter(check.jitter_micros)
                    .with_peers(check.peers.clone());
                burn_swap::configure(device, config).expect("a valid configuration");
                // Every stream's pools, the transfer workers' included.
                <Swap<I> as Backend>::memory_cleanup(device);
                burn_swap::restart_trace(device);
                burn_swap::reset_counters(device);
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    model.train::<Swapped<I>>(device, check.steps)
                }));
                let report = burn_swap::report(device);
                let Some(report) = report else { continue };
                let (identical, loss_gap, pass) =
                    outcome.as_ref().map_or((false, f64::NAN, false), judge);
                rows.push(Row {
                    model: model.name(),
                    run: policy.name().to_string(),
                    fraction,
                    identical,
                    loss_gap,
                    spread,
                    pass,
                    budget: Some(budget),
                    counted_peak: report.memory.peak_bytes,
                    allocator: report.device.allocator_peak,
                    moves: (
                        report.transfers.offloads,
                        report.transfers.fetches,
                        report.transfers.recomputes,
                    ),
                    device_compressed: report.compression.device_compressed_offloads,
                    exposed_wait_ms: report.transfers.exposed_wait_seconds * 1e3
                        / check.steps as f64,
                    peers: report.device.peers.clone(),
                    largest_op: report.workload.largest_op_bytes,
                    streams: report.device.allocator_streams.clone(),
                });
            }
        }
        burn_swap::configure(device, SwapConfig::default()).expect("the default configuration");
    }
    rows
}

/// The largest difference between two runs' losses, step by step (`NaN` when they differ
/// in length or a loss is not a number).
fn loss_gap(a: &Outcome, b: &Outcome) -> f64 {
    if a.losses.len() != b.losses.len() {
        return f64::NAN;
    }
    a.losses
        .iter()
        .zip(&b.losses)
        .map(|(x, y)| (f64::from(*x) - f64::from(*y)).abs())
        .fold(0.0, f64::max)
}

/// One configured run: `config` set on `device`, its trace and counters restarted, `train`
/// run; its outcome and the report. (The caller holds [`crate::swap_device_lock`].)
pub fn run_configured<D: DeviceOps>(
    device: &D,
    config: SwapConfig,
    train: impl FnOnce() -> Outcome,
) -> (Outcome, Report) {
    burn_swap::configure(device, config).expect("a valid configuration");
    burn_swap::restart_trace(device);
    burn_swap::reset_counters(device);
    let outcome = train();
    let report = burn_swap::report(device).expect("the device ran under Swap");
    (outcome, report)
}

/// Copy times of `latency` seconds plus the bytes at `bytes_per_second`, at 4 KiB, 64 KiB and
/// 1 MiB: samples for links pinned with `burn_swap::unstable::set_links` or handed to a
/// planner's profile.
pub fn copy_samples(
    latency: f64,
    bytes_per_second: f64,
) -> Vec<burn_swap::unstable::plan::profile::CopySample> {
    [1u64 << 12, 1 << 16, 1 << 20]
        .into_iter()
        .map(|bytes| burn_swap::unstable::plan::profile::CopySample {
            bytes,
            seconds: latency + bytes as f64 / bytes_per_second,
        })
        .collect()
}

/// Links of `latency` seconds and `bytes_per_second` both ways ([`copy_samples`]), without
/// the op thread's figures: every planned copy goes to a transfer worker.
pub fn links_at(latency: f64, bytes_per_second: f64) -> burn_swap::unstable::plan::profile::Links {
    burn_swap::unstable::plan::profile::Links {
        to_host: copy_samples(latency, bytes_per_second),
        to_device: copy_samples(latency, bytes_per_second),
        on_thread: None,
    }
}

/// Quiets the panics that fault injection raises on purpose (their message starts with
/// "injected"; each is caught and survived); any other panic prints as usual.
pub fn quiet_injected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let injected = info
                .payload()
                .downcast_ref::<&str>()
                .is_some_and(|m| m.starts_with("injected"));
            if !injected {
                default(info);
            }
        }));
    });
}

/// What a run of `steps` steps under the defaults must show where a plan pays: a plan took
/// over with at least a quarter of the run left (it is made on the planner thread while the
/// fallback runs: a few iterations on an idle machine, up to ten on a loaded one), none was
/// declined, and the plan was followed in every iteration after its takeover but the one it
/// took over in. Prints the takeover and returns it. Panics naming `what`.
pub fn assert_plan_followed_to_the_end(
    what: &str,
    report: &Report,
    steps: usize,
) -> burn_swap::PlanTakeover {
    let plan = &report.plan;
    let first = *plan
        .plan_takeovers
        .first()
        .unwrap_or_else(|| panic!("{what}: no plan took over\n{report}"));
    // Iterations of the step from the first takeover to the run's end.
    let after = steps as u64 - first.op.div_ceil(first.period as u64);
    println!(
        "{what}: took over after op {} (period {}, {} iterations waited), {} of the {after} \
         iterations after it planned, {} declined",
        first.op,
        first.period,
        first.waited_iterations,
        plan.planned_iterations,
        plan.declines.count
    );
    assert!(
        after >= steps as u64 / 4,
        "{what}: the plan took over late\n{report}"
    );
    assert_eq!(plan.declines.count, 0, "{what}: declined\n{report}");
    assert!(
        plan.planned_iterations + 1 >= after,
        "{what}: not followed to the end\n{report}"
    );
    first
}

/// What every budgeted run of the tests must show: losses and parameters bit-identical to
/// `plain`, the counted peak within `budget`, tensors moved both ways. Panics naming `what`.
pub fn assert_budgeted_run(
    what: &str,
    plain: &Outcome,
    swapped: &Outcome,
    report: &Report,
    budget: u64,
) {
    assert_eq!(
        swapped.loss_bits(),
        plain.loss_bits(),
        "{what}: losses\n{report}"
    );
    assert_eq!(swapped, plain, "{what}: parameters");
    assert!(report.memory.peak_bytes <= budget, "{what}\n{report}");
    assert!(
        report.transfers.offloads > 0 && report.transfers.fetches > 0,
        "{what}\n{report}"
    );
}

/// Each stream's reserved peak with its role, e.g. `compute 1.2, send 0.3, receive 0.3`
/// (a stream whose pools another listed one shares is marked `(shared)`); `-` for none.
fn per_stream(streams: &[StreamUsage]) -> String {
    if streams.is_empty() {
        return "-".into();
    }
    streams
        .iter()
        .map(|s| {
            let role = match s.role {
                StreamRole::Compute => "compute",
                StreamRole::Send => "send",
                StreamRole::Receive => "receive",
            };
            let shared = if s.shared { " (shared)" } else { "" };
            format!("{role} {}{shared}", mib(s.peak_reserved))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1 << 20) as f64)
}

/// The rows as Markdown tables: one row per run, then one per peer of the runs with peers.
pub fn table(rows: &[Row]) -> String {
    let mut runs = Table::new(&[
        "model",
        "run",
        "budget",
        "bit-identical",
        "max |Δloss|",
        "counted peak MiB",
        "allocator peak MiB (in use / reserved)",
        "reserved peak per stream MiB",
        "off / fetch / recompute",
        "device-compressed",
        "wait ms/step",
    ]);
    let mut peers = Table::new(&[
        "model",
        "run",
        "budget",
        "peer",
        "sent MiB",
        "fetched MiB",
        "link GB/s",
    ]);
    for r in rows {
        let budget = r.budget.map_or("-".to_string(), |b| {
            format!("{:.0}% ({} MiB)", r.fraction * 100.0, mib(b))
        });
        let allocator = r.allocator.map_or("-".to_string(), |a| {
            if r.run == "unwrapped" {
                format!("- / {}", mib(a.reserved))
            } else {
                format!("{} / {}", mib(a.in_use), mib(a.reserved))
            }
        });
        let run = if r.run == "unwrapped" && r.spread > 0.0 {
            format!("unwrapped (its spread {:.3e})", r.spread)
        } else {
            r.run.clone()
        };
        runs.row(vec![
            r.model.to_string(),
            run,
            budget,
            match (r.identical, r.pass) {
                (true, _) => "yes",
                (false, true) => "no (within spread)",
                (false, false) => "NO",
            }
            .to_string(),
            format!("{:.3e}", r.loss_gap),
            mib(r.counted_peak),
            allocator,
            per_stream(&r.streams),
            format!("{} / {} / {}", r.moves.0, r.moves.1, r.moves.2),
            r.device_compressed.to_string(),
            format!("{:.2}", r.exposed_wait_ms),
        ]);
        for p in &r.peers {
            peers.row(vec![
                r.model.to_string(),
                r.run.clone(),
                format!("{:.0}%", r.fraction * 100.0),
                p.name.clone(),
                mib(p.sent_bytes),
                mib(p.fetched_bytes),
                format!("{:.2}", p.bandwidth / 1e9),
            ]);
        }
    }
    let mut out = runs.markdown();
    if !peers.is_empty() {
        out.push('\n');
        out.push_str(&peers.markdown());
    }
    out
}

/// Views made before any budget was set, of matrices they consumed (a transpose, and a
/// flipped permutation, doubled), and two views sharing the buffer of a third matrix that is
/// gone (its transpose and its flip): they keep no op to be replayed. Then `budget()` runs,
/// and matmuls read them, each beside a new matrix and a dense one made before: with every
/// matrix 4 KiB, under [`VIEWS_BUDGET`] the tensors an op does not read must leave (the
/// shared buffer whole, its views coming back as views of it). Returns the bits of what it
/// computed.
pub fn views_made_before_a_budget<B: Backend>(device: &B::Device, budget: impl Fn()) -> Vec<u32> {
    let matrix = |k: usize| -> Tensor<B, 2> {
        let values: Vec<f32> = (0..32 * 32)
            .map(|i| ((i * 37 + k * 11) % 101) as f32 / 7.0 - 5.0)
            .collect();
        Tensor::from_data(TensorData::new(values, [32, 32]), device)
    };
    let x = matrix(0);
    let transposed = matrix(5).swap_dims(0, 1);
    let flipped = matrix(1).permute([1, 0]).flip([0]) * 2.0;
    let shared = matrix(6);
    let left = shared.clone().swap_dims(0, 1);
    let right = shared.flip([1]);
    budget();
    let mut out = Vec::new();
    for k in 0..3 {
        let w = matrix(k + 2);
        let y =
            transposed.clone().matmul(w.clone()) + flipped.clone().matmul(w.clone()) - x.clone();
        let y = y + left.clone().matmul(w.clone()) - right.clone().matmul(w);
        let values = y.into_data().to_vec::<f32>().expect("f32 values");
        out.extend(values.iter().map(|v| v.to_bits()));
    }
    out
}

/// The budget [`views_made_before_a_budget`] runs under: one op's inputs and output, and
/// 1 KiB.
pub const VIEWS_BUDGET: u64 = 3 * 4096 + 1024;

/// Runs [`views_made_before_a_budget`] on `I` and through `Swap<I>` under [`VIEWS_BUDGET`]
/// set after the views were made (with `config` on top of it): bit for bit, the counted
/// peak from the budget on within it, the views moved by offload only. (The caller holds
/// [`crate::swap_device_lock`].)
pub fn check_views_made_before_a_budget<I>(device: &I::Device, config: SwapConfig)
where
    I: BackendIr + Backend,
{
    let plain = views_made_before_a_budget::<I>(device, || ());
    burn_swap::configure(device, SwapConfig::default()).expect("the default configuration");
    burn_swap::reset_counters(device);
    let swapped = views_made_before_a_budget::<Swap<I>>(device, || {
        burn_swap::configure(device, config.clone()).expect("a valid configuration");
        // The peak from here on: the budget's.
        burn_swap::reset_counters(device);
    });
    let report = burn_swap::report(device).expect("the device ran under Swap");
    burn_swap::configure(device, SwapConfig::default()).expect("the default configuration");
    assert_eq!(swapped, plain);
    assert!(report.memory.peak_bytes <= VIEWS_BUDGET, "{report}");
    assert!(
        report.transfers.offloads > 0 && report.transfers.recomputes == 0,
        "{report}"
    );
    assert!(
        report.transfers.whole_buffer_offloads > 0,
        "the shared buffer of two views left whole: {report:?}"
    );
}

/// Trains unbudgeted to find the counted peak, then under every policy at a half and a
/// quarter of it, with and without compression: bit for bit against the plain backend, the
/// counted peak within the budget; and at the minimum budget the unbudgeted run's report
/// named, under every policy (`planned` and `recompute-only` included since 2026-12-07:
/// they passed there on every model of the suite, three runs in three). On burn-flex's
/// device; `plain` is the unwrapped run's outcome, `swapped` trains through
/// `Autodiff<Swap<Flex>>`. Returns the unbudgeted run's report.
pub fn every_policy(
    name: &str,
    plain: Outcome,
    swapped: impl Fn() -> Outcome,
) -> burn_swap::Report {
    let device = burn::backend::flex::FlexDevice;
    let _guard = crate::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);
    plain.assert_same(&swapped(), &format!("{name} unbudgeted"));
    let unbudgeted = burn_swap::report(&device).unwrap();
    let peak = unbudgeted.memory.peak_bytes;
    let minimum = unbudgeted.workload.minimum_budget_bytes;
    eprintln!(
        "{name}: peak {peak}, largest op {}, minimum budget {minimum} ({:.1}% of the peak)",
        unbudgeted.workload.largest_op_bytes,
        100.0 * minimum as f64 / peak as f64
    );
    assert!(peak > 0 && minimum >= unbudgeted.workload.largest_op_bytes && minimum <= peak);
    for policy in Policy::ALL {
        let budgets = [
            ("half", peak / 2),
            ("a quarter", peak / 4),
            ("the minimum", minimum),
        ];
        for (label, budget) in budgets {
            for compression in [Compression::Off, Compression::On { max_ratio: 1.0 }] {
                let what = format!(
                    "{name}, {} at {label} of its peak ({budget} of {peak} bytes), compression {compression:?}",
                    policy.name()
                );
                let config = SwapConfig::budget_bytes(budget)
                    .with_policy(policy)
                    .with_compression(compression);
                eprintln!("{what}");
                burn_swap::configure(&device, config).unwrap();
                burn_swap::restart_trace(&device);
                burn_swap::reset_counters(&device);
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(&swapped));
                let report = burn_swap::report(&device).unwrap();
                let outcome = outcome.unwrap_or_else(|_| panic!("{what}: failed\n{report}"));
                plain.assert_same(&outcome, &what);
                assert!(
                    report.memory.peak_bytes <= budget,
                    "{what}: counted peak {} over the budget\n{report}",
                    report.memory.peak_bytes
                );
                assert!(
                    report.transfers.offloads + report.transfers.recomputes > 0,
                    "{what}: nothing left the device\n{report}"
                );
            }
        }
    }
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    unbudgeted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budgeted_row(reserved: Option<u64>) -> Row {
        Row {
            model: "mlp",
            run: "planned".into(),
            fraction: 0.5,
            identical: true,
            loss_gap: 0.0,
            spread: 0.0,
            pass: true,
            budget: Some(1_000_000),
            counted_peak: 900_000,
            allocator: reserved.map(|reserved| AllocatorUsage {
                in_use: 900_000,
                reserved,
                padding: 0,
            }),
            moves: (1, 1, 0),
            device_compressed: 0,
            exposed_wait_ms: 0.0,
            peers: Vec::new(),
            largest_op: 200_000,
            streams: Vec::new(),
        }
    }

    /// swap-check fails a run whose allocator reserved more than the budget, 2% of it and
    /// 64 KiB; a backend with no allocator figures (Flex) is not judged.
    #[test]
    fn a_reserved_peak_over_the_bound_is_a_breach() {
        assert_eq!(reserved_bound(1_000_000), 1_085_536);
        assert_eq!(budgeted_row(Some(1_085_536)).reserved_breach(), None);
        assert_eq!(
            budgeted_row(Some(1_085_537)).reserved_breach(),
            Some((1_085_537, 1_085_536))
        );
        assert_eq!(budgeted_row(None).reserved_breach(), None);
    }

    #[test]
    fn models_are_selected_by_name_in_their_order() {
        let picked = select_models(small_models(), "lstm, mlp").unwrap();
        let names: Vec<&str> = picked.iter().map(|m| m.name()).collect();
        assert_eq!(names, ["mlp", "lstm"]);
        let error = select_models(small_models(), "mlp,gru").unwrap_err();
        assert!(error.contains("\"gru\""), "{error}");
    }

    #[test]
    fn the_loss_gap_is_the_largest_step_difference() {
        let outcome = |losses: Vec<f32>| Outcome {
            losses,
            params: Vec::new(),
        };
        let a = outcome(vec![1.0, 2.0, 3.0]);
        assert_eq!(loss_gap(&a, &a), 0.0);
        assert_eq!(loss_gap(&a, &outcome(vec![1.0, 2.5, 2.75])), 0.5);
        assert!(loss_gap(&a, &outcome(vec![1.0])).is_nan());
    }
}
