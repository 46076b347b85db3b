//! Planning time on a synthetic, training-shaped iteration of 20,000 ops (target: ≤ 100 ms
//! for a whole plan): the memory simulation, checkpoint selection, the genetic segment plan
//! and the combiner, each at half of the keep-everything peak; then the combined plan's
//! compilation into per-op steps, which includes seed 003's wait analysis over two
//! iterations of the program's timeline, and that analysis alone.

use std::hint::black_box;

use burn_swap::unstable::plan::profile::{CopySample, Links, Profile};
use burn_swap::unstable::plan::{self, checkpoint, combine, segments, simulate, waits};
use criterion::{Criterion, criterion_group, criterion_main};

fn plan(c: &mut Criterion) {
    // 10,000 layers (20,001 ops), activations in four sizes, 20 µs per op.
    let trace =
        burn_swap::unstable::synthetic::chain(10_000, |l| 4096 * (1 + l as u64 % 4), |_| 20_000);
    let samples: Vec<CopySample> = [1u64 << 16, 1 << 20]
        .iter()
        .map(|&bytes| CopySample {
            bytes,
            seconds: 10e-6 + bytes as f64 / 20e9,
        })
        .collect();
    let profile = Profile::new(
        &trace,
        Some(Links {
            to_host: samples.clone(),
            to_device: samples,
            on_thread: None,
        }),
    );
    let keep_all = simulate::simulate_trace(&trace);
    let budget = keep_all.peak_pool_bytes / 2;
    let candidates = checkpoint::candidates(&trace, &profile, 8);

    let mut group = c.benchmark_group("plan_20k_ops");
    group.sample_size(10);
    group.bench_function("simulate_best", |b| {
        b.iter(|| black_box(simulate::simulate_trace(&trace)))
    });
    group.bench_function("checkpoint_select_8_rounds", |b| {
        b.iter(|| black_box(checkpoint::select(&trace, &candidates, 8)))
    });
    group.bench_function("combine_half_peak", |b| {
        b.iter(|| black_box(combine::combine(&trace, &profile, &candidates, budget)))
    });
    let chosen = combine::combine(&trace, &profile, &candidates, budget);
    group.bench_function("compile_with_waits", |b| {
        b.iter(|| black_box(plan::compile(&trace, &chosen)))
    });
    let compiled = plan::compile(&trace, &chosen);
    group.bench_function("waits_over_two_iterations", |b| {
        b.iter(|| {
            let nodes = waits::timeline(&trace, &compiled);
            black_box(waits::waits(&nodes))
        })
    });
    let config = segments::GaConfig {
        work: u64::MAX,
        rounds: 50,
        ..segments::GaConfig::default()
    };
    let objects = segments::objects(&trace, config.small_object_bytes);
    group.bench_function("segments_ga_50_rounds", |b| {
        b.iter(|| black_box(segments::plan(&objects, budget, &config)))
    });
    group.finish();
}

criterion_group!(benches, plan);
criterion_main!(benches);
