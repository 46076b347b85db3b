//! `swap-check`: the GPU check's correctness and transfer half, in one run.
//!
//! ```text
//! swap-check [--device flex|wgpu|cuda] [--quick] [--models mlp,lstm] [--steps 8] [--jitter 300]
//!            [--compress] [--spread] [--sizes 16,64,256] [--peers cuda:0@8GiB]
//!            [--policies planned,reactive] [--fractions 0.5,0.25] [--markdown check.md]
//! ```
//!
//! 1. **Correctness**: MLP, conv net, transformer, BatchNorm CNN and LSTM (or the ones
//!    `--models` names) trained through `Autodiff<Swap<I>>` and `Autodiff<I>`, bit for bit,
//!    under every policy at 50% and 25% of the counted peak (with transfer jitter, the
//!    ordering stress test), with the counted and the allocator's peaks next to the unwrapped
//!    run's ([`burn_swap_harness::verify`]). With `--spread` (for a backend that is not
//!    deterministic run to run: built with the `cuda-default` feature, `cuda` is Burn's
//!    default fused and autotuned CUDA backend), the unwrapped run is trained twice and a run
//!    passes when its losses are within that run-to-run spread.
//! 2. **Transfers**: burn-swap's offload and fetch of `f32` tensors of each size (MiB) through
//!    its workers (their own streams), against a plain pinned copy with cudarc in the same
//!    run (CUDA only).
//! 3. **Peers** (with `--peers`, as `BURN_SWAP_PEERS` reads them): the MLP under the
//!    offload-only policy at 25% with its offloads split across those peers, bit for bit,
//!    with each peer's bytes and achieved link bandwidth (on one GPU, `cuda:0@8GiB` runs the
//!    peer-copy path from device 0 to itself).
//!
//! Prints the tables last; exits non-zero when a run does not pass (not bit-identical, or
//! with `--spread` outside the spread), its counted peak exceeds its budget, or, where the
//! backend reports its allocator (wgpu, CUDA), its reserved peak exceeds the budget plus 2%
//! of it and 64 KiB (`verify::reserved_bound`, the wgpu tests' bound). `--quick`: the models
//! at test size (what CI runs on burn-flex).

use std::process::ExitCode;

use burn_swap::Policy;
use burn_swap_harness::cli::Args;
use burn_swap_harness::devices;
use burn_swap_harness::verify::{self, Check};

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("swap-check: {error}");
            ExitCode::FAILURE
        }
    }
}

/// One size's transfer figures: burn-swap's and the plain pinned copy's, bytes per second.
struct Link {
    bytes: u64,
    swap: (f64, f64),
    pinned: Option<(f64, f64)>,
}

fn run() -> Result<bool, Box<dyn std::error::Error>> {
    let args = Args::parse(
        std::env::args().skip(1),
        &["quick", "compress", "spread"],
        &[
            "device",
            "models",
            "steps",
            "jitter",
            "sizes",
            "markdown",
            "peers",
            "policies",
            "fractions",
        ],
    )?;
    let quick = args.flag("quick");
    let models = if quick {
        verify::small_models()
    } else {
        verify::large_models()
    };
    let check = Check {
        models: match args.value("models") {
            Some(names) => verify::select_models(models, names)?,
            None => models,
        },
        policies: match args.value("policies") {
            Some(names) => names
                .split(',')
                .map(|name| {
                    Policy::ALL
                        .into_iter()
                        .find(|p| p.name() == name.trim())
                        .ok_or_else(|| format!("--policies: no policy {name:?}"))
                })
                .collect::<Result<_, _>>()?,
            None => Policy::ALL.to_vec(),
        },
        fractions: match args.value("fractions") {
            Some(list) => list
                .split(',')
                .map(|f| match f.trim().parse::<f64>() {
                    Ok(f) if f > 0.0 && f <= 1.0 => Ok(f),
                    _ => Err(format!("--fractions: {f:?} is not a fraction in (0, 1]")),
                })
                .collect::<Result<_, _>>()?,
            None => vec![0.5, 0.25],
        },
        steps: args.get("steps", 8)?,
        jitter_micros: args.get("jitter", 300)?,
        compression: if args.flag("compress") {
            burn_swap::Compression::On { max_ratio: 0.9 }
        } else {
            burn_swap::Compression::Off
        },
        peers: Vec::new(),
        spread: args.flag("spread"),
    };
    let peers = match args.value("peers") {
        Some(text) => burn_swap::PeerSpec::parse_list(text).map_err(|e| format!("--peers: {e}"))?,
        None => Vec::new(),
    };
    // The peer check: the MLP, offload-only at 25%, split across the peers.
    let peer_check = (!peers.is_empty()).then(|| Check {
        models: check.models[..1].to_vec(),
        policies: vec![Policy::OffloadOnly],
        fractions: vec![0.25],
        compression: burn_swap::Compression::Off,
        peers,
        ..check.clone()
    });
    let sizes: Vec<u64> = args
        .value("sizes")
        .unwrap_or(if quick { "1,4" } else { "16,64,256" })
        .split(',')
        .map(|s| {
            s.trim()
                .parse::<u64>()
                .map(|mib| mib << 20)
                .map_err(|_| format!("--sizes: {s:?} is not a number of MiB"))
        })
        .collect::<Result<_, _>>()?;
    let device = args.value("device").unwrap_or("flex").to_string();
    eprintln!(
        "swap-check on {device}: {} models, {} policies x {:?}, {} steps, jitter {} us",
        check.models.len(),
        check.policies.len(),
        check.fractions,
        check.steps,
        check.jitter_micros
    );
    let checks: Vec<&Check> = std::iter::once(&check).chain(&peer_check).collect();
    let (rows, links, name) = match device.as_str() {
        "flex" => {
            let device = burn::backend::flex::FlexDevice;
            let rows = devices::verify("flex", &checks)?;
            let links = measure(&device, &sizes, |_| None);
            (rows, links, "burn-flex (CPU)".to_string())
        }
        #[cfg(feature = "wgpu")]
        "wgpu" => {
            // CubeCL's wgpu runtime (Vulkan, Metal, DirectX; a software Vulkan driver where
            // there is no GPU): the same memory management as CUDA, its reserved bytes in
            // the table.
            let device = cubecl::wgpu::WgpuDevice::DefaultDevice;
            if !burn_swap_harness::wgpu_adapter(&device) {
                return Err("no wgpu adapter".into());
            }
            let rows = devices::verify("wgpu", &checks)?;
            let links = measure(&device, &sizes, |_| None);
            (rows, links, "CubeCL wgpu".to_string())
        }
        #[cfg(feature = "cuda")]
        "cuda" => {
            // The topology first: devices, free memory, the pairs with peer access (enabled
            // on the way).
            match burn_swap::unstable::gpu::cuda::peer::discover() {
                Ok(topology) => {
                    for d in &topology.devices {
                        println!(
                            "cuda:{} {:.1} GiB free of {:.1} GiB",
                            d.ordinal,
                            d.free_bytes as f64 / (1u64 << 30) as f64,
                            d.total_bytes as f64 / (1u64 << 30) as f64
                        );
                    }
                    println!("direct peer pairs: {:?}", topology.direct);
                }
                Err(error) => eprintln!("swap-check: topology: {error}"),
            }
            let device: burn::backend::cuda::CudaDevice = Default::default();
            let rows = devices::verify("cuda", &checks)?;
            let index = device.index;
            let links = measure(&device, &sizes, |bytes| {
                burn_swap::unstable::gpu::cuda::pinned::pinned_copy(index, bytes as usize, 5)
                    .ok()
                    .map(|b| (b.to_host, b.to_device))
            });
            let kind = if cfg!(feature = "cuda-default") {
                "Burn's default fused and autotuned backend"
            } else if cfg!(feature = "cuda-fusion") {
                "fused"
            } else {
                "unfused, no autotune"
            };
            (rows, links, format!("CUDA device {index} ({kind})"))
        }
        other => {
            return Err(burn_swap_harness::cli::unknown_device(other).into());
        }
    };

    let mut ok = true;
    for r in &rows {
        if !r.pass {
            let why = if check.spread {
                format!(
                    "losses {:.3e} from the unwrapped run's, outside its spread {:.3e}",
                    r.loss_gap, r.spread
                )
            } else {
                "not bit-identical".to_string()
            };
            eprintln!("FAIL: {} {} at {}: {why}", r.model, r.run, r.fraction);
            ok = false;
        }
        if r.budget.is_some_and(|b| r.counted_peak > b) {
            eprintln!(
                "FAIL: {} {} at {}: counted peak over budget",
                r.model, r.run, r.fraction
            );
            ok = false;
        }
        if let Some((reserved, bound)) = r.reserved_breach() {
            eprintln!(
                "FAIL: {} {} at {}: the allocator reserved {reserved} bytes, over the bound \
                 {bound} (the budget, 2% of it and 64 KiB)",
                r.model, r.run, r.fraction
            );
            ok = false;
        }
    }
    let mut out = format!("## swap-check on {name}\n\n{}\n", verify::table(&rows));
    out.push_str(&links_table(&links));
    if let Some(path) = args.value("markdown") {
        std::fs::write(path, &out)?;
    }
    println!("{out}");
    println!(
        "{}",
        if !ok {
            "FAILURES ABOVE"
        } else if check.spread {
            "ALL WITHIN THE SPREAD"
        } else {
            "ALL IDENTICAL"
        }
    );
    Ok(ok)
}

/// burn-swap's transfers at each size on `device` (used under `Swap` by the check), and the
/// plain copy `pinned` measures.
fn measure<D: burn::tensor::backend::DeviceOps>(
    device: &D,
    sizes: &[u64],
    pinned: impl Fn(u64) -> Option<(f64, f64)>,
) -> Vec<Link> {
    let Some(links) = burn_swap::unstable::measure_transfers(device, sizes) else {
        eprintln!("swap-check: burn-swap's transfers could not be measured");
        return Vec::new();
    };
    links
        .to_host
        .iter()
        .zip(&links.to_device)
        .map(|(down, up)| Link {
            bytes: down.bytes,
            swap: (
                down.bytes as f64 / down.seconds,
                up.bytes as f64 / up.seconds,
            ),
            pinned: pinned(down.bytes),
        })
        .collect()
}

fn links_table(links: &[Link]) -> String {
    let gb = |b: f64| format!("{:.2}", b / 1e9);
    let mut table = burn_swap_harness::table::Table::new(&[
        "size MiB",
        "burn-swap D2H GB/s",
        "plain pinned D2H GB/s",
        "D2H ratio",
        "burn-swap H2D GB/s",
        "plain pinned H2D GB/s",
        "H2D ratio",
    ]);
    for l in links {
        let (pd, pu) = l
            .pinned
            .map_or(("-".to_string(), "-".to_string()), |(d, u)| (gb(d), gb(u)));
        let (rd, ru) = l
            .pinned
            .map_or(("-".to_string(), "-".to_string()), |(d, u)| {
                (
                    format!("{:.0}%", 100.0 * l.swap.0 / d),
                    format!("{:.0}%", 100.0 * l.swap.1 / u),
                )
            });
        table.row(vec![
            (l.bytes >> 20).to_string(),
            gb(l.swap.0),
            pd,
            rd,
            gb(l.swap.1),
            pu,
            ru,
        ]);
    }
    table.markdown()
}
