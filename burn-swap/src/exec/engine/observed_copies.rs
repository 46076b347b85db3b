//! The copies the transfer workers made, timed: the links learned from them where no probe
//! fits (a budget kept nearly full leaves no headroom for the probe's temporary tensors, and
//! a plan made without a link takes every copy as instant), and on a host-memory backend
//! what a copy costs the ops (a copy run alone, not the time it lasted).

use crate::plan::profile::{CopySample, Links};

/// The fastest copy seen per power-of-two size class, one set per direction.
#[derive(Debug, Default)]
pub(super) struct ObservedCopies {
    to_host: SizeClasses,
    to_device: SizeClasses,
    /// The fastest copies from queueing to end, every one counted (the links' samples count
    /// only copies that landed), for [`ObservedCopies::cpu_seconds`].
    solo_to_host: SizeClasses,
    solo_to_device: SizeClasses,
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

    /// What a worker's plain copy of `bytes` (no codec) that took `seconds` from its queueing
    /// to its end costs the ops on a host-memory backend: what the fastest copy of its size
    /// class seen so far, this one included, took from queueing to end, scaled to its bytes.
    /// That is the copy run alone, waking the worker and handing it the job included (for
    /// many small copies those are most of it). A copy lasts longer when it waits in the
    /// queue behind others or when the ops hold the cores, and neither stretch is time it
    /// took from the ops.
    pub fn cpu_seconds(&mut self, to_host: bool, bytes: u64, seconds: f64) -> f64 {
        let classes = if to_host {
            &mut self.solo_to_host
        } else {
            &mut self.solo_to_device
        };
        classes.note(bytes, seconds);
        classes
            .fastest_scaled(bytes)
            .map_or(seconds, |fastest| fastest.min(seconds))
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

    /// The time of the fastest copy of `bytes`'s size class, scaled to `bytes`; `None` when
    /// none of that class was seen.
    fn fastest_scaled(&self, bytes: u64) -> Option<f64> {
        if bytes == 0 {
            return None;
        }
        let fastest = self
            .fastest
            .get(bytes.ilog2() as usize)
            .copied()
            .flatten()?;
        Some(fastest.seconds * bytes as f64 / fastest.bytes as f64)
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
    fn a_copy_is_charged_the_cpu_time_of_the_fastest_copy_of_its_size() {
        let mut seen = ObservedCopies::default();
        // The first of its class: charged as it lasted.
        assert_eq!(seen.cpu_seconds(true, 1 << 20, 400e-6), 400e-6);
        // Stretched: charged the fastest's time, scaled to its bytes.
        assert_eq!(seen.cpu_seconds(true, 1 << 20, 900e-6), 400e-6);
        let scaled = seen.cpu_seconds(true, 3 << 19, 2e-3);
        assert!((scaled - 600e-6).abs() < 1e-12, "{scaled}");
        // Faster than any before: charged as it lasted, and the new fastest.
        assert_eq!(seen.cpu_seconds(true, 1 << 20, 300e-6), 300e-6);
        assert_eq!(seen.cpu_seconds(true, 1 << 20, 350e-6), 300e-6);
        // Another size class, or the other direction: its own figures.
        assert_eq!(seen.cpu_seconds(true, 1 << 10, 5e-6), 5e-6);
        assert_eq!(seen.cpu_seconds(false, 1 << 20, 700e-6), 700e-6);
        // The queueing times the links learn from are not these.
        assert_eq!(seen.links(), None);
    }

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
