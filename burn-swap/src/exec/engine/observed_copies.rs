//! The copies the transfer workers made, timed: the links learned from them where no probe
//! fits (a budget kept nearly full leaves no headroom for the probe's temporary tensors, and
//! a plan made without a link takes every copy as instant).

use crate::plan::profile::{CopySample, Links};

/// The fastest copy seen per power-of-two size class, one set per direction.
#[derive(Debug, Default)]
pub(super) struct ObservedCopies {
    to_host: SizeClasses,
    to_device: SizeClasses,
}

impl ObservedCopies {
    /// Notes an offload of `bytes` (raw, uncompressed) that took `seconds` from its queueing
    /// to the end of the worker's job.
    pub fn note_to_host(&mut self, bytes: u64, seconds: f64) {
        self.to_host.note(bytes, seconds);
    }

    /// Notes a fetch of `bytes` (raw, uncompressed) that took `seconds` from its queueing to
    /// the end of the worker's job. A fetch is not synchronised with the device (its users
    /// are ordered after it), so on an asynchronous backend this is the time to queue the
    /// copy, a lower bound.
    pub fn note_to_device(&mut self, bytes: u64, seconds: f64) {
        self.to_device.note(bytes, seconds);
    }

    /// The links as the copies seen so far show them, the fastest of each size class a
    /// sample (as the probe keeps the fastest of its three round trips); `None` until both
    /// directions have been seen. Without figures for copies made on the op thread: every
    /// planned copy then goes to the workers.
    pub fn links(&self) -> Option<Links> {
        let to_host = self.to_host.samples();
        let to_device = self.to_device.samples();
        (!to_host.is_empty() && !to_device.is_empty()).then_some(Links {
            to_host,
            to_device,
            on_thread: None,
        })
    }
}

/// The fastest copy seen in each size class: class `i` holds sizes of `2^i` to
/// `2^(i + 1) - 1` bytes, so at most 64 samples.
#[derive(Debug, Default)]
struct SizeClasses {
    fastest: Vec<Option<CopySample>>,
}

impl SizeClasses {
    fn note(&mut self, bytes: u64, seconds: f64) {
        if bytes == 0 || !seconds.is_finite() || seconds <= 0.0 {
            return;
        }
        let class = bytes.ilog2() as usize;
        if self.fastest.len() <= class {
            self.fastest.resize(class + 1, None);
        }
        let slot = &mut self.fastest[class];
        if slot.is_none_or(|fastest| seconds < fastest.seconds) {
            *slot = Some(CopySample { bytes, seconds });
        }
    }

    /// The samples to fit. With one size class seen, the time is taken not to grow with
    /// size (a second sample at twice the size and the same time: the fit's latency-only
    /// case) rather than guessed.
    fn samples(&self) -> Vec<CopySample> {
        let mut samples: Vec<CopySample> = self.fastest.iter().flatten().copied().collect();
        if let [one] = samples[..] {
            samples.push(CopySample {
                bytes: one.bytes.saturating_mul(2),
                seconds: one.seconds,
            });
        }
        samples
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::profile::LinkFit;

    #[test]
    fn the_fastest_copy_of_each_size_class_is_kept() {
        let mut seen = ObservedCopies::default();
        assert_eq!(seen.links(), None);
        seen.note_to_host(1024, 30e-6);
        seen.note_to_host(1100, 20e-6);
        seen.note_to_host(1024, 25e-6);
        seen.note_to_host(64 << 10, 40e-6);
        seen.note_to_host(0, 1e-6);
        seen.note_to_host(512, f64::NAN);
        // Only one direction seen: no links yet.
        assert_eq!(seen.links(), None);
        seen.note_to_device(4096, 10e-6);
        let links = seen.links().unwrap();
        assert_eq!(
            links.to_host,
            [
                CopySample {
                    bytes: 1100,
                    seconds: 20e-6
                },
                CopySample {
                    bytes: 64 << 10,
                    seconds: 40e-6
                }
            ]
        );
        // One size class: a latency-only link at the time seen.
        let back = LinkFit::fit(&links.to_device).unwrap();
        assert_eq!(back.latency, 10e-6);
        assert_eq!(
            back.seconds(1 << 20),
            10e-6 + (1u64 << 20) as f64 / back.bandwidth
        );
        assert!(back.bandwidth >= 1e15);
        assert_eq!(links.on_thread, None);
    }
}
