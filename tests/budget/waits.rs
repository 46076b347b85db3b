//! Seed 003's cross-queue waits over the programs of real training iterations: the waits the
//! analysis inserts order every conflicting pair of touches, and taking away any kind of
//! them (compute waiting for a fetch, a release waiting for its offload, an offload waiting
//! for its producer) leaves a hazard that the checker names. And the executor on a jittered
//! run: every op that reads a planned prefetch is preceded by the analysis' wait for it.

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn_swap::trace::Trace;
use burn_swap::unstable::plan::program::Program;
use burn_swap::unstable::plan::waits::{self, Hazard, Queue, Touch, Wait, What};
use burn_swap::{Policy, Swap, SwapConfig};
use burn_swap_harness::models::{MlpConfig, TransformerConfig};
use burn_swap_harness::verify::{assert_budgeted_run, run_configured};
use burn_swap_harness::workload::Workload;
use burn_swap_harness::workload::{train_mlp, train_transformer};

type B = Autodiff<Swap<Flex>>;

/// The trace and profile of an unbudgeted run, and the program of `policy` at `fraction` of
/// its counted peak. The profile's links are taken as instant (offloads always hidden), so
/// that which tensors the plan offloads does not depend on how fast this machine copied.
fn program_of(train: impl Fn(), policy: Policy, fraction: f64) -> (Trace, Program) {
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);
    train();
    let trace = burn_swap::trace(&device).expect("the iteration repeats");
    let mut profile = burn_swap::unstable::profile(&device).unwrap();
    profile.links = Some(burn_swap::unstable::plan::profile::Links::instant());
    let peak = burn_swap::report(&device).unwrap().memory.peak_bytes;
    let program = burn_swap::unstable::plan::build(
        &trace,
        &profile,
        (peak as f64 * fraction) as u64,
        (policy, Default::default()),
    );
    (trace, program)
}

/// Every wait of `all` whose waiting and awaited nodes satisfy `pick`, left out.
fn without(
    nodes: &[waits::Node],
    all: &[Wait],
    pick: impl Fn(&waits::Node, &waits::Node) -> bool,
) -> (Vec<Wait>, usize) {
    let kept: Vec<Wait> = all
        .iter()
        .copied()
        .filter(|w| !pick(&nodes[w.before], &nodes[w.after]))
        .collect();
    let removed = all.len() - kept.len();
    (kept, removed)
}

fn check_program(name: &str, trace: &Trace, program: &Program) {
    assert!(program.offloads > 0, "{name}: the plan offloads nothing");
    let nodes = waits::timeline(trace, program);
    let all = waits::waits(&nodes);
    assert_eq!(waits::check(&nodes, &all), Ok(()), "{name}");
    assert!(
        nodes.iter().any(|n| n.queue == Queue::Send)
            && nodes.iter().any(|n| n.queue == Queue::Receive),
        "{name}: no copies in the timeline"
    );

    // The executor's three kinds of waits; without any one kind, a hazard.
    type Pick = fn(&waits::Node, &waits::Node) -> bool;
    let kinds: [(&str, Pick, Queue, Touch); 3] = [
        (
            "compute waits for fetches",
            |b, a| matches!(b.what, What::Op(_)) && matches!(a.what, What::Prefetch(_)),
            Queue::Compute,
            Touch::Read,
        ),
        (
            "releases wait for offloads",
            |b, a| b.what == What::Release && matches!(a.what, What::Offload(_)),
            Queue::Compute,
            Touch::Free,
        ),
        (
            "offloads wait for producers",
            |b, a| matches!(b.what, What::Offload(_)) && a.queue == Queue::Compute,
            Queue::Send,
            Touch::Read,
        ),
    ];
    for (kind, pick, queue, touch) in kinds {
        let (fewer, removed) = without(&nodes, &all, pick);
        assert!(removed > 0, "{name}: no wait of the kind '{kind}'");
        match waits::check(&nodes, &fewer) {
            Err(Hazard::Unordered {
                later_queue,
                later_touch,
                ..
            }) => {
                assert_eq!((later_queue, later_touch), (queue, touch), "{name}: {kind}");
            }
            other => panic!("{name}: without '{kind}': {other:?}"),
        }
    }

    // The program carries the compute side's waits: one per planned fetch that an op reads.
    let planned: usize = program.fetch_waits.iter().map(Vec::len).sum();
    assert!(planned > 0, "{name}: no fetch waits in the program");
    for (pos, tags) in program.fetch_waits.iter().enumerate() {
        for tag in tags {
            let tensor = &trace.tensors[program.tagged[*tag as usize]];
            let reads = trace.ops[pos].inputs.contains(&tensor.id);
            assert!(
                reads || tensor.wraps_to.is_some(),
                "{name}: op {pos} waits for fetch {tag} that it does not read"
            );
        }
    }
}

#[test]
fn waits_over_the_mlp_program() {
    let device = FlexDevice;
    let (trace, program) = program_of(
        || {
            train_mlp::<B>(&MlpConfig::small(), &device, 6);
        },
        Policy::OffloadOnly,
        0.25,
    );
    check_program("mlp offload-only at 25%", &trace, &program);
}

#[test]
fn waits_over_the_transformer_program() {
    let device = FlexDevice;
    let (trace, program) = program_of(
        || {
            train_transformer::<B>(&TransformerConfig::small(), &device, 6);
        },
        Policy::Planned,
        0.5,
    );
    check_program("transformer planned at 50%", &trace, &program);
}

/// The executor waits where the analysis says: under a plan whose prefetches run on the
/// receive worker, with every transfer's completion held back up to 500 µs at random (so
/// that fetches land early, late, and in any order), no op reads a planned prefetch before
/// the wait the analysis placed for it (`report.transfers.unawaited_prefetch_reads`), some of those
/// waits find the fetch still in flight, and training stays bit-identical. The positive
/// control runs each case again with the analysis' waits skipped
/// (`unstable::skip_fetch_waits`): planned prefetches are then read unawaited, and the
/// counter must say so (the op's own wait keeps the values right).
#[test]
fn the_executor_waits_where_the_analysis_says() {
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    let steps = 14;
    for (workload, policy, fraction) in [
        (Workload::Mlp(MlpConfig::small()), Policy::OffloadOnly, 0.25),
        (
            Workload::Transformer(TransformerConfig::small()),
            Policy::Planned,
            0.5,
        ),
    ] {
        let name = workload.name();
        let plain = workload.train::<Autodiff<Flex>>(&device, steps);
        let (_, unbudgeted) = run_configured(&device, SwapConfig::default(), || {
            workload.train::<B>(&device, steps)
        });
        let budget = (unbudgeted.memory.peak_bytes as f64 * fraction) as u64;
        // Every plan followed: the jitter makes the planned copies late, so that a judged
        // plan is declined for what its waits cost (`plan::payoff`).
        let config = SwapConfig::budget_bytes(budget)
            .with_policy(policy)
            .with_transfer_jitter(500)
            .with_background_planning(false)
            .with_plans_judged(false);
        // Planned copies on the workers (a free hand-over), not on the op's thread: links
        // pinned without on-thread figures (which copies the plan puts on the workers would
        // otherwise depend on how fast this process measured its links).
        burn_swap::unstable::set_handover_seconds(Some(0.0));
        // Copy links of 5 us and 5 GB/s each way, every planned copy on a transfer worker.
        burn_swap::unstable::set_links(Some(burn_swap_harness::verify::links_at(5e-6, 5e9)));
        let (swapped, report) = run_configured(&device, config.clone(), || {
            workload.train::<B>(&device, steps)
        });
        // The positive control: the analysis' waits skipped (a planted defect), the same
        // run reads planned prefetches unawaited, and its values stay right (each op waits
        // for its own inputs).
        burn_swap::unstable::skip_fetch_waits(true);
        let (unwaited, control) =
            run_configured(&device, config, || workload.train::<B>(&device, steps));
        burn_swap::unstable::skip_fetch_waits(false);
        burn_swap::unstable::set_links(None);
        burn_swap::unstable::set_handover_seconds(None);
        burn_swap::configure(&device, SwapConfig::default()).unwrap();
        let what = format!("{name} {} at {fraction}", policy.name());
        println!(
            "{what}: {} planned offloads, {} planned iterations, {} waits found the fetch in \
             flight, {} unawaited reads",
            report.plan.planned_offloads,
            report.plan.planned_iterations,
            report.transfers.planned_waits,
            report.transfers.unawaited_prefetch_reads
        );
        assert_budgeted_run(&what, &plain, &swapped, &report, budget);
        assert!(
            report.plan.planned_iterations > 0 && report.plan.planned_offloads > 0,
            "{what}: no plan with offloads followed\n{report}"
        );
        assert!(
            report.transfers.planned_waits > 0,
            "{what}: no planned fetch was still in flight at its wait\n{report}"
        );
        assert_eq!(
            report.transfers.unawaited_prefetch_reads, 0,
            "{what}: ops read planned prefetches before the analysis' wait\n{report}"
        );
        assert_budgeted_run(&what, &plain, &unwaited, &control, budget);
        println!(
            "{what}, the waits skipped: {} unawaited reads",
            control.transfers.unawaited_prefetch_reads
        );
        assert!(
            control.transfers.unawaited_prefetch_reads > 0,
            "{what}: the counter missed the reads of a run whose waits were skipped\n{control}"
        );
    }
}
