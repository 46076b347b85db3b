//! Peer offload on a simulated topology (seed 000): tensors split across 2 to 4 peers in
//! proportion to their links' bandwidth within their free memory, brought back by the
//! reverse route, full peers falling back to the host without loss; training bit-identical
//! to plain `Autodiff<Flex>` with the counted peak within the budget.

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn_swap::{Compression, PeerSpec, Policy, Report, Swap, SwapConfig};
use burn_swap_harness::models::{ConvNetConfig, MlpConfig, TransformerConfig};
use burn_swap_harness::train::Outcome;
use burn_swap_harness::verify::{assert_budgeted_run, run_configured};
use burn_swap_harness::workload::{train_convnet, train_mlp, train_transformer};

type Plain = Autodiff<Flex>;
type Swapped = Autodiff<Swap<Flex>>;

const STEPS: usize = 8;
const GB: f64 = 1e9;

/// Trains unbudgeted for the peak, then at `fraction` of it under `policy` with `peers`;
/// checks bit-identity and the budget, and returns the report.
fn run_with_peers(
    name: &str,
    plain: &Outcome,
    train: impl Fn() -> Outcome,
    policy: Policy,
    fraction: f64,
    peers: Vec<PeerSpec>,
    compression: Compression,
) -> Report {
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);
    assert_eq!(&train(), plain, "{name} unbudgeted");
    let peak = burn_swap::report(&device).unwrap().memory.peak_bytes;
    let budget = (peak as f64 * fraction) as u64;
    let config = SwapConfig::budget_bytes(budget)
        .with_policy(policy)
        .with_compression(compression)
        .with_peers(peers);
    let (swapped, report) = run_configured(&device, config, train);
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    let what = format!("{name}, {} at {fraction}", policy.name());
    assert_budgeted_run(&what, plain, &swapped, &report, budget);
    report
}

fn ample(bandwidths: &[f64]) -> Vec<PeerSpec> {
    bandwidths
        .iter()
        .enumerate()
        .map(|(i, &b)| PeerSpec::simulated(format!("peer{i}"), 1 << 30, b * GB))
        .collect()
}

/// The bytes each peer received, as fractions of all sent to peers.
fn shares(report: &Report) -> Vec<f64> {
    let total: u64 = report.device.peers.iter().map(|p| p.sent_bytes).sum();
    assert!(total > 0, "nothing went to the peers\n{report}");
    report
        .device
        .peers
        .iter()
        .map(|p| p.sent_bytes as f64 / total as f64)
        .collect()
}

#[test]
fn mlp_splits_across_two_three_and_four_peers_by_bandwidth() {
    let device = FlexDevice;
    let config = MlpConfig::small();
    let plain = train_mlp::<Plain>(&config, &device, STEPS);
    for bandwidths in [
        vec![40.0, 20.0],
        vec![50.0, 25.0, 25.0],
        vec![40.0, 30.0, 20.0, 10.0],
    ] {
        let report = run_with_peers(
            &format!("mlp over {} peers", bandwidths.len()),
            &plain,
            || train_mlp::<Swapped>(&config, &device, STEPS),
            Policy::OffloadOnly,
            0.25,
            ample(&bandwidths),
            Compression::Off,
        );
        let total: f64 = bandwidths.iter().sum();
        for (got, b) in shares(&report).iter().zip(&bandwidths) {
            // Shares are whole elements per tensor: within a percent of the bandwidth's.
            assert!(
                (got - b / total).abs() < 0.01,
                "{bandwidths:?}: share {got:.4} for {b} GB/s\n{report}"
            );
        }
        assert_eq!(report.device.peer_fallbacks, 0, "{report}");
        // Everything sent came back or is still held (the peers' books add up).
        for p in &report.device.peers {
            assert!(
                p.bandwidth > 0.0 && p.bandwidth <= 1.05 * total * GB,
                "{report}"
            );
        }
    }
}

#[test]
fn full_peers_fall_back_to_the_host_without_loss() {
    let device = FlexDevice;
    let config = ConvNetConfig::small();
    let plain = train_convnet::<Plain>(&config, &device, STEPS);
    // Two peers with room for a few activations only.
    let peers = vec![
        PeerSpec::simulated("small", 48 << 10, 50.0 * GB),
        PeerSpec::simulated("smaller", 24 << 10, 25.0 * GB),
    ];
    let report = run_with_peers(
        "convnet over full peers",
        &plain,
        || train_convnet::<Swapped>(&config, &device, STEPS),
        Policy::Planned,
        0.25,
        peers,
        Compression::Off,
    );
    assert!(report.device.peer_fallbacks > 0, "{report}");
    assert!(report.memory.peak_host_bytes > 0, "{report}");
    for p in &report.device.peers {
        assert!(p.peak_held_bytes <= p.capacity_bytes, "{report}");
        assert!(p.sent_bytes > 0, "{report}");
    }
}

#[test]
fn transformer_over_peers_is_bit_identical() {
    let device = FlexDevice;
    let config = TransformerConfig::small();
    let plain = train_transformer::<Plain>(&config, &device, STEPS);
    let report = run_with_peers(
        "transformer over three peers",
        &plain,
        || train_transformer::<Swapped>(&config, &device, STEPS),
        Policy::Planned,
        0.5,
        ample(&[50.0, 25.0, 25.0]),
        Compression::Off,
    );
    assert!(
        report.device.peers.iter().all(|p| p.sent_bytes > 0),
        "{report}"
    );
}

/// The codec chosen before the split: ReLU activations travel to the peers compressed, and
/// come back bit for bit.
#[test]
fn convnet_over_peers_with_compression_moves_fewer_bytes() {
    let device = FlexDevice;
    let config = ConvNetConfig::small();
    let plain = train_convnet::<Plain>(&config, &device, STEPS);
    let report = run_with_peers(
        "convnet over two peers, compressed",
        &plain,
        || train_convnet::<Swapped>(&config, &device, STEPS),
        Policy::OffloadOnly,
        0.25,
        ample(&[40.0, 20.0]),
        Compression::On { max_ratio: 0.9 },
    );
    assert!(report.compression.compressed_offloads > 0, "{report}");
    assert!(
        report.compression.moved_bytes < report.compression.raw_bytes,
        "{report}"
    );
    // The peers took compressed bytes: fewer than the raw bytes offloaded (their count also
    // has the link measurement's and undone offloads' pieces, which the offload counts lack).
    let sent: u64 = report.device.peers.iter().map(|p| p.sent_bytes).sum();
    assert!(sent > 0 && sent < report.compression.raw_bytes, "{report}");
}

/// Device peers on a backend without cudarc take the generic route: the tensor sliced on
/// its device and moved with `to_device` (burn-flex has one device, so the peers are that
/// device, as device 0 to itself on one GPU): bit-identical, split evenly (equal links).
#[test]
fn device_peers_take_the_to_device_route_on_other_backends() {
    let device = FlexDevice;
    let config = MlpConfig::small();
    let plain = train_mlp::<Plain>(&config, &device, STEPS);
    let report = run_with_peers(
        "mlp over two device peers",
        &plain,
        || train_mlp::<Swapped>(&config, &device, STEPS),
        Policy::OffloadOnly,
        0.25,
        vec![PeerSpec::device(0, 1 << 30), PeerSpec::device(1, 1 << 30)],
        Compression::Off,
    );
    let s = shares(&report);
    assert!((s[0] - 0.5).abs() < 0.01, "{s:?}\n{report}");
    assert!(
        report.device.peers.iter().all(|p| p.fetched_bytes > 0),
        "{report}"
    );
}

#[test]
fn bad_peer_configurations_are_typed_errors() {
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    // The device must be in use for backend-dependent checks to run at configure time.
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    let _ = train_mlp::<Swapped>(&MlpConfig::small(), &device, 1);
    let err = burn_swap::configure(
        &device,
        SwapConfig::default().with_peers(vec![
            PeerSpec::device(1, 1 << 30),
            PeerSpec::simulated("sim", 1 << 20, 1e9),
        ]),
    )
    .unwrap_err();
    assert!(
        matches!(
            &err,
            burn_swap::SwapError::Config(burn_swap::ConfigError::MixedPeers)
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("all simulated"), "{err}");
    for bad in [
        PeerSpec::simulated("no link", 1 << 20, 0.0),
        PeerSpec::simulated("nan", 1 << 20, f64::NAN),
        PeerSpec::simulated("no room", 0, 1e9),
    ] {
        let err =
            burn_swap::configure(&device, SwapConfig::default().with_peers(vec![bad])).unwrap_err();
        assert!(
            matches!(
                &err,
                burn_swap::SwapError::Config(burn_swap::ConfigError::BadPeer { .. })
            ),
            "{err:?}"
        );
    }
    // The refused configurations left the one in force.
    assert!(burn_swap::report(&device).unwrap().device.peers.is_empty());
}
