//! The compression choice: whether a tensor is zero-value compressed before it leaves the
//! device. A pure function of an estimate of the tensor (its zero fraction) and the measured
//! rates of the link and the codec; the codec itself is `crate::codec` (CPU) and the
//! device kernels, which carry the decision out.

use crate::config::Compression;
use crate::plan::profile::Links;

/// The inputs of the per-tensor decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    /// Elements.
    pub elements: usize,
    /// Bytes per element.
    pub width: usize,
    /// Estimated fraction of zero elements.
    pub zero_fraction: f64,
    /// Link bandwidth in bytes per second (one direction), if measured.
    pub link_bandwidth: Option<f64>,
    /// Codec throughput in raw bytes per second (compress plus decompress), if measured.
    pub codec_bandwidth: Option<f64>,
}

impl Decision {
    /// Raw bytes.
    pub fn raw(&self) -> f64 {
        (self.elements * self.width) as f64
    }

    /// Predicted compressed bytes.
    pub fn predicted(&self) -> f64 {
        let nonzeros = (1.0 - self.zero_fraction) * self.elements as f64;
        4.0 * self.elements.div_ceil(32) as f64 + nonzeros * self.width as f64
    }

    /// Whether to compress under `policy`: a pure function of the estimate.
    pub fn pays(&self, policy: Compression) -> bool {
        let ratio = self.predicted() / self.raw().max(1.0);
        match policy {
            Compression::Off => false,
            Compression::On { max_ratio } => self.elements > 0 && ratio <= max_ratio,
            Compression::Auto { max_ratio } => {
                if self.elements == 0 || ratio > max_ratio {
                    return false;
                }
                match (self.link_bandwidth, self.codec_bandwidth) {
                    (Some(link), Some(codec)) => {
                        // Both ways: raw over the link, against codec time plus the smaller
                        // transfer.
                        let raw = self.raw();
                        2.0 * raw / link >= raw / codec + 2.0 * self.predicted() / link
                    }
                    _ => true,
                }
            }
        }
    }
}

/// What the offload path needs to decide per tensor: the mode and the measured rates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompressionPolicy {
    /// The configured mode.
    pub mode: Compression,
    /// Link bandwidth, bytes per second (the slower direction).
    pub link_bandwidth: Option<f64>,
    /// Codec throughput in raw bytes per second (compress plus decompress).
    pub codec_bandwidth: Option<f64>,
}

/// Elements sampled to estimate a tensor's zero fraction.
pub const SAMPLES: usize = 4096;

impl CompressionPolicy {
    /// The decision's inputs for `mode`: under [`Compression::Auto`], the slower direction of
    /// the measured links and the codec's throughput; nothing is needed for the others.
    pub fn new(mode: Compression, links: Option<&Links>, codec_bandwidth: Option<f64>) -> Self {
        let link_bandwidth = links.and_then(|l| match l.fits() {
            (Some(out), Some(back)) => Some(out.bandwidth.min(back.bandwidth)),
            _ => None,
        });
        Self {
            mode,
            link_bandwidth,
            codec_bandwidth,
        }
    }

    /// The policy of moves that must not be compressed (link measurements).
    pub fn off() -> Self {
        Self {
            mode: Compression::Off,
            link_bandwidth: None,
            codec_bandwidth: None,
        }
    }

    /// Whether deciding needs the measured rates (the link's and the codec's).
    pub fn needs_rates(mode: Compression) -> bool {
        matches!(mode, Compression::Auto { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_decision_compresses_only_where_it_pays() {
        let at = |zero_fraction: f64| Decision {
            elements: 1 << 20,
            width: 4,
            zero_fraction,
            link_bandwidth: Some(10e9),
            codec_bandwidth: Some(5e9),
        };
        let on = Compression::On { max_ratio: 0.8 };
        // Dense data expands (by 1/32 for f32): never.
        assert!(!at(0.0).pays(on));
        // Half zeros: 0.5 + 1/32 of the bytes.
        assert!(at(0.5).pays(on));
        assert!((at(0.5).predicted() / at(0.5).raw() - (0.5 + 1.0 / 32.0)).abs() < 1e-9);
        // A quarter zeros: 0.78 of the bytes, just under the threshold; 0.2 is over it.
        assert!(at(0.25).pays(on));
        assert!(!at(0.2).pays(on));
        assert!(!at(0.9).pays(Compression::Off));
        // Auto: with a codec slower than the link, compressing costs more time than it saves at
        // half zeros (raw/5 + 2*0.53*raw/10 > 2*raw/10), and saves time at 95% zeros only if the
        // codec is fast enough: 2/10 >= 1/5 + 2*0.08/10 fails; with a 50 GB/s codec it pays.
        let auto = Compression::Auto { max_ratio: 0.8 };
        assert!(!at(0.5).pays(auto));
        assert!(!at(0.95).pays(auto));
        let fast = Decision {
            codec_bandwidth: Some(50e9),
            ..at(0.95)
        };
        assert!(fast.pays(auto));
        // Nothing measured: the size rule alone.
        let unmeasured = Decision {
            link_bandwidth: None,
            ..at(0.5)
        };
        assert!(unmeasured.pays(auto));
        // An empty tensor is never compressed.
        assert!(
            !Decision {
                elements: 0,
                ..at(1.0)
            }
            .pays(on)
        );
    }
}
