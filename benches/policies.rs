//! Step time of each policy against plain `Autodiff<Flex>`, at 50% and 25% of the
//! unbudgeted counted peak, on the benches' MLP (width 1024, batch 256, Adam), in one
//! process; and the time each step waited on transfers (exposed), from the report.
//!
//! Each configuration first trains warm-up steps (the trace finds the loop, one iteration is
//! profiled, and the planned policies plan), then criterion times steps. A table of the step
//! time ratio and the exposed wait per step is printed last.

use std::cell::Cell;

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::backend::AutodiffBackend;
use burn_swap::{Policy, Swap, SwapConfig};
use burn_swap_harness::models::{Mlp, MlpConfig};
use burn_swap_harness::train::init_mlp;
use criterion::{Criterion, criterion_group, criterion_main};

/// Steps before timing: two to find the period, one profiled, one planned and followed.
const WARM_UP: usize = 6;

struct Row {
    name: String,
    seconds: f64,
    exposed_ms: f64,
    peak: u64,
    budget: Option<u64>,
}

fn bench_backend<B: AutodiffBackend>(c: &mut Criterion, name: &str, swap: Option<SwapConfig>) -> Row
where
    Mlp<B>: AutodiffModule<B>,
{
    let config = MlpConfig::bench();
    let device = Default::default();
    if let Some(swap) = swap.clone() {
        burn_swap::configure(&FlexDevice, swap).unwrap();
        burn_swap::restart_trace(&FlexDevice);
    }
    let mut model = Some(init_mlp::<B>(&config, &device, 1));
    let mut optimizer = AdamConfig::new().init::<B, Mlp<B>>();
    let steps = Cell::new(0usize);
    let mut train = |model: &mut Option<Mlp<B>>| {
        let m = model.take().unwrap();
        let loss = m.loss(&config, steps.get(), &device);
        let grads = GradientsParams::from_grads(loss.backward(), &m);
        *model = Some(optimizer.step(1e-4, m, grads));
        steps.set(steps.get() + 1);
    };
    for _ in 0..WARM_UP {
        train(&mut model);
    }
    burn_swap::reset_counters(&FlexDevice);
    let timed_from = steps.get();
    let start = std::time::Instant::now();
    c.bench_function(name, |b| b.iter(|| train(&mut model)));
    let timed = (steps.get() - timed_from).max(1);
    let seconds = start.elapsed().as_secs_f64() / timed as f64;
    let report = swap.and_then(|_| burn_swap::report(&FlexDevice));
    Row {
        name: name.to_string(),
        seconds,
        exposed_ms: report.as_ref().map_or(0.0, |r| {
            r.transfers.exposed_wait_seconds * 1e3 / timed as f64
        }),
        peak: report.as_ref().map_or(0, |r| r.memory.peak_bytes),
        budget: report.as_ref().and_then(|r| r.budget_bytes),
    }
}

fn policies(c: &mut Criterion) {
    // The unbudgeted counted peak.
    let _ = bench_backend::<Autodiff<Swap<Flex>>>(
        c,
        "policies/unbudgeted",
        Some(SwapConfig::default()),
    );
    let peak = burn_swap::report(&FlexDevice).unwrap().memory.peak_bytes;
    let mut rows = vec![bench_backend::<Autodiff<Flex>>(c, "policies/flex", None)];
    for fraction in [0.5, 0.25] {
        let budget = (peak as f64 * fraction) as u64;
        for policy in Policy::ALL {
            let name = format!("policies/{}_{}", policy.name(), (fraction * 100.0) as u32);
            let config = SwapConfig::budget_bytes(budget).with_policy(policy);
            rows.push(bench_backend::<Autodiff<Swap<Flex>>>(
                c,
                &name,
                Some(config),
            ));
        }
    }
    burn_swap::configure(&FlexDevice, SwapConfig::default()).unwrap();
    let base = rows[0].seconds;
    eprintln!("\nunbudgeted counted peak: {peak} bytes");
    eprintln!(
        "{:<32} {:>10} {:>7} {:>12} {:>10}",
        "configuration", "step ms", "ratio", "exposed ms", "peak/budget"
    );
    for row in &rows {
        let fit = row.budget.map_or("-".to_string(), |b| {
            format!("{:.3}", row.peak as f64 / b as f64)
        });
        eprintln!(
            "{:<32} {:>10.1} {:>7.2} {:>12.2} {:>10}",
            row.name,
            row.seconds * 1e3,
            row.seconds / base,
            row.exposed_ms,
            fit
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = policies
}
criterion_main!(benches);
