//! The genetic segment planner (seed 001) on a real iteration: a plan within the budget whose
//! objects all fit their segments, better than the best random assignment. Figures printed.

use std::time::Instant;

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn_swap::Swap;
use burn_swap::unstable::plan::segments::{self, GaConfig};
use burn_swap_suite::models::ConvNetConfig;
use burn_swap_suite::train::{last_iteration, train_convnet};

#[test]
fn segment_plan_of_a_conv_net_iteration() {
    let device = FlexDevice;
    let _guard = burn_swap_suite::swap_device_lock();
    let trace = last_iteration(&device, || {
        train_convnet::<Autodiff<Swap<Flex>>>(&ConvNetConfig::small(), &device, 6);
    });

    let config = GaConfig::default();
    let objects = segments::objects(&trace, config.small_object_bytes);
    let budget = trace.peak_bytes / 2;
    let start = Instant::now();
    let plan = segments::plan(&objects, budget, &config).expect("the largest object fits");
    let elapsed = start.elapsed();
    let random = segments::plan(
        &objects,
        budget,
        &GaConfig {
            rounds: 0,
            ..config.clone()
        },
    )
    .unwrap();
    println!(
        "conv net: {} ops, {} tensors -> {} objects; budget {} B in {} segments; migrated {} B \
         after {} rounds in {:.1} ms (best random start: {} B)",
        trace.ops.len(),
        trace.tensors.len(),
        objects.len(),
        budget,
        plan.segments.len(),
        plan.migrated_bytes,
        plan.rounds,
        elapsed.as_secs_f64() * 1e3,
        random.migrated_bytes
    );
    assert!(plan.segments.iter().sum::<u64>() <= budget);
    for (o, &s) in plan.assignment.iter().enumerate() {
        assert!(objects[o].bytes <= plan.segments[s]);
    }
    assert_eq!(
        segments::migrated_bytes(&objects, &plan.assignment, plan.segments.len()),
        plan.migrated_bytes
    );
    assert!(plan.migrated_bytes <= random.migrated_bytes);
}
