//! The profiled iteration that planners read: per op its time and bytes,
//! and the measured copy throughput between device and host, both directions.
//!
//! Plain data: the times come from the trace (ops are timed in profiled iterations), the
//! copy samples from the executor, which measures them on the device.

use serde::{Deserialize, Serialize};

use super::reactive::LinkModel;
use crate::trace::Trace;

/// One timed copy.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CopySample {
    /// Bytes copied.
    pub bytes: u64,
    /// Seconds it took (the fastest of a few repetitions).
    pub seconds: f64,
}

/// The bandwidth of a link whose copy time does not grow with size: 1 PB/s.
pub const UNBOUNDED_BANDWIDTH: f64 = 1e15;

/// The fitted cost of copies in one direction: `seconds = latency + bytes / bandwidth`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LinkFit {
    /// Bytes per second.
    pub bandwidth: f64,
    /// Fixed seconds per copy.
    pub latency: f64,
}

impl LinkFit {
    /// Least-squares fit of `seconds = latency + bytes / bandwidth` to the samples; `None`
    /// with fewer than two distinct sizes. A negative intercept (measurement noise) is
    /// clamped to zero; a slope that is not positive gives the mean time as latency and
    /// [`UNBOUNDED_BANDWIDTH`].
    pub fn fit(samples: &[CopySample]) -> Option<Self> {
        let n = samples.len() as f64;
        let mean_x = samples.iter().map(|s| s.bytes as f64).sum::<f64>() / n;
        let mean_y = samples.iter().map(|s| s.seconds).sum::<f64>() / n;
        let sxx: f64 = samples
            .iter()
            .map(|s| (s.bytes as f64 - mean_x).powi(2))
            .sum();
        if samples.len() < 2 || sxx == 0.0 {
            return None;
        }
        let sxy: f64 = samples
            .iter()
            .map(|s| (s.bytes as f64 - mean_x) * (s.seconds - mean_y))
            .sum();
        let slope = sxy / sxx;
        if slope <= 0.0 {
            // The time does not grow with size (a copy that moves ownership, such as a CPU
            // backend taking a host buffer as it is): latency only, at a bandwidth standing
            // for "unbounded" that still serialises as a number.
            return Some(Self {
                bandwidth: UNBOUNDED_BANDWIDTH,
                latency: mean_y.max(0.0),
            });
        }
        Some(Self {
            bandwidth: 1.0 / slope,
            latency: (mean_y - slope * mean_x).max(0.0),
        })
    }

    /// Seconds to copy `bytes`.
    pub fn seconds(&self, bytes: u64) -> f64 {
        self.latency + bytes as f64 / self.bandwidth
    }
}

/// Copy throughput between the device and host memory, as measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Links {
    /// Device to host (an offload).
    pub to_host: Vec<CopySample>,
    /// Host to device (a fetch).
    pub to_device: Vec<CopySample>,
    /// What a copy costs the op thread when it hands it to a transfer worker, and what the
    /// same copy costs made on the op thread itself; `None` where not measured (planned
    /// copies then all go to the workers).
    #[serde(default)]
    pub on_thread: Option<OnThread>,
}

/// The op thread's share of copies: handing one to a transfer worker is not free (queueing
/// it and waking the worker: a system call, and on a virtual machine an interrupt to
/// another core), and for a small tensor it can cost more than making the copy on the op
/// thread outright.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OnThread {
    /// Seconds the op thread spends handing one copy to a worker (the median measured);
    /// never hidden behind compute.
    pub handover_seconds: f64,
    /// Device to host, copied on the op thread.
    pub to_host: Vec<CopySample>,
    /// Host to device, copied on the op thread.
    pub to_device: Vec<CopySample>,
}

impl OnThread {
    /// The fit of each direction of the copies made on the op thread.
    pub fn fits(&self) -> Option<(LinkFit, LinkFit)> {
        Some((LinkFit::fit(&self.to_host)?, LinkFit::fit(&self.to_device)?))
    }
}

impl Links {
    /// Links that cost nothing (1 PB/s, no latency): the stand-in when none was measured.
    pub fn instant() -> Self {
        let samples = vec![
            CopySample {
                bytes: 1 << 10,
                seconds: 1e-12,
            },
            CopySample {
                bytes: 1 << 20,
                seconds: 1e-9,
            },
        ];
        Self {
            to_host: samples.clone(),
            to_device: samples,
            on_thread: None,
        }
    }

    /// The fit of each direction.
    pub fn fits(&self) -> (Option<LinkFit>, Option<LinkFit>) {
        (LinkFit::fit(&self.to_host), LinkFit::fit(&self.to_device))
    }

    /// The round-trip cost model of these links, which the planners cost checkpoints and
    /// copies with: the slower direction's bandwidth and the sum of latencies, halved per
    /// copy. (The reactive policy keeps its fixed model: [`LinkModel`].)
    pub fn link_model(&self) -> Option<LinkModel> {
        let (out, back) = self.fits();
        let (out, back) = (out?, back?);
        Some(LinkModel {
            bandwidth: out.bandwidth.min(back.bandwidth),
            latency: (out.latency + back.latency) / 2.0,
        })
    }
}

/// The profile of one iteration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Wall time of each op of the iteration, in nanoseconds.
    pub op_nanos: Vec<u64>,
    /// Bytes each op reads and writes (its distinct inputs and outputs).
    pub op_bytes: Vec<u64>,
    /// The copy throughput, when it could be measured.
    pub links: Option<Links>,
}

impl Profile {
    /// The profile of a traced iteration with the given copy measurements.
    pub fn new(trace: &Trace, links: Option<Links>) -> Self {
        // One lookup table, not a search of the tensors per operand (the first tensor of an
        // id, as `Trace::tensor` finds it).
        let bytes: hashbrown::HashMap<u64, u64> = trace
            .tensors
            .iter()
            .rev()
            .map(|t| (t.id, t.bytes))
            .collect();
        let bytes_of = |id: &u64| bytes.get(id).copied().unwrap_or(0);
        let op_bytes = trace
            .ops
            .iter()
            .map(|op| {
                let mut ids: Vec<u64> = op.inputs.iter().chain(&op.outputs).copied().collect();
                ids.sort_unstable();
                ids.dedup();
                ids.iter().map(bytes_of).sum()
            })
            .collect();
        Self {
            op_nanos: trace.ops.iter().map(|o| o.nanos).collect(),
            op_bytes,
            links,
        }
    }

    /// Seconds of compute between the end of op `from` and the start of op `to`: the time a
    /// copy started after `from` has before `to` needs its result (a
    /// tensor is worth swapping when this gap hides the copy).
    pub fn gap_seconds(&self, from: usize, to: usize) -> f64 {
        if to <= from + 1 {
            return 0.0;
        }
        let n = self.op_nanos.len();
        let nanos: u64 = if to <= n {
            self.op_nanos[from + 1..to].iter().sum()
        } else {
            // Across the iteration boundary: op `n + k` is op `k` of the next iteration.
            self.op_nanos[(from + 1).min(n)..].iter().sum::<u64>()
                + self.op_nanos[..(to - n).min(n)].iter().sum::<u64>()
        };
        nanos as f64 * 1e-9
    }

    /// Total compute time of the iteration, in seconds.
    pub fn iteration_seconds(&self) -> f64 {
        self.op_nanos.iter().sum::<u64>() as f64 * 1e-9
    }
}

/// The sizes of the temporary tensors that measure the links: 256 B to 8 MiB, those that
/// fit in half of `headroom` (the bytes the budget leaves free); `None` when fewer than two
/// fit (a fit needs two points). The small sizes let a budget kept nearly full still be
/// measured: its plans move small tensors, whose copies are mostly latency, which they show.
pub fn probe_sizes(headroom: u64) -> Option<Vec<u64>> {
    const SIZES: [u64; 8] = [
        256,
        1 << 10,
        4 << 10,
        16 << 10,
        64 << 10,
        256 << 10,
        2 << 20,
        8 << 20,
    ];
    let sizes: Vec<u64> = SIZES.into_iter().filter(|&s| s <= headroom / 2).collect();
    (sizes.len() >= 2).then_some(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_fit_in_half_the_headroom() {
        assert_eq!(probe_sizes((2 << 10) - 1), None);
        assert_eq!(probe_sizes(2 << 10), Some(vec![256, 1 << 10]));
        assert_eq!(
            probe_sizes(32 << 10),
            Some(vec![256, 1 << 10, 4 << 10, 16 << 10])
        );
        assert_eq!(
            probe_sizes(u64::MAX),
            Some(vec![
                256,
                1 << 10,
                4 << 10,
                16 << 10,
                64 << 10,
                256 << 10,
                2 << 20,
                8 << 20
            ])
        );
    }

    #[test]
    fn fit_recovers_bandwidth_and_latency() {
        // 10 µs + bytes / 5 GB/s.
        let samples: Vec<CopySample> = [1u64 << 16, 1 << 20, 1 << 24]
            .iter()
            .map(|&bytes| CopySample {
                bytes,
                seconds: 10e-6 + bytes as f64 / 5e9,
            })
            .collect();
        let fit = LinkFit::fit(&samples).unwrap();
        assert!((fit.bandwidth - 5e9).abs() / 5e9 < 1e-9);
        assert!((fit.latency - 10e-6).abs() < 1e-12);
        assert!((fit.seconds(1 << 20) - samples[1].seconds).abs() < 1e-12);
    }

    #[test]
    fn fit_needs_two_sizes_and_takes_a_flat_slope_as_latency() {
        let one = CopySample {
            bytes: 100,
            seconds: 1.0,
        };
        assert_eq!(LinkFit::fit(&[one]), None);
        assert_eq!(LinkFit::fit(&[one, one]), None);
        let faster_when_larger = CopySample {
            bytes: 200,
            seconds: 0.5,
        };
        assert_eq!(
            LinkFit::fit(&[one, faster_when_larger]),
            Some(LinkFit {
                bandwidth: UNBOUNDED_BANDWIDTH,
                latency: 0.75
            })
        );
    }

    #[test]
    fn link_model_takes_the_slower_direction() {
        let samples = |bw: f64| -> Vec<CopySample> {
            [1u64 << 20, 1 << 22]
                .iter()
                .map(|&b| CopySample {
                    bytes: b,
                    seconds: 2e-6 + b as f64 / bw,
                })
                .collect()
        };
        let links = Links {
            to_host: samples(4e9),
            to_device: samples(8e9),
            on_thread: None,
        };
        let model = links.link_model().unwrap();
        assert!((model.bandwidth - 4e9).abs() / 4e9 < 1e-9);
        assert!((model.latency - 2e-6).abs() < 1e-12);
    }
}
