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
    /// The fastest copy jobs (the worker's copy itself, from its start to its end), every
    /// one counted (the links' samples count only copies that landed), for
    /// [`ObservedCopies::cpu_seconds`].
    solo_to_host: SizeClasses,
    solo_to_device: SizeClasses,
    /// The least time seen from a copy's queueing to its job's start, per direction: the
    /// worker's wake-up and the hand-over of the job (a copy queued behind others waits
    /// longer, and that wait is not its cost).
    wake_up: [Option<f64>; 2],
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

    /// What a worker's plain copy of `bytes` (no codec) costs the ops on a host-memory
    /// backend: the copy run alone, its worker woken. `job_seconds` is the worker's copy job
    /// from its start to its end; `queued_seconds` from the copy's queueing to the job's end.
    /// Charged the fastest job of its size class seen so far, this one included, scaled to
    /// its bytes, plus the least wake-up seen in its direction (for many small copies the
    /// wake-up is most of the cost). A copy lasts longer when it waits in the queue behind
    /// others or when the ops hold the cores, and neither stretch is time it took from the
    /// ops. Both figures are learned from the copies' own jobs, not from how they were
    /// queued: a plan that queues its copies in bursts was charged the bursts' waits until a
    /// copy of each size class came alone, and so was charged four times as much in a
    /// process that had copied nothing of those sizes before as in one that had (the
    /// BatchNorm CNN's plan at half its peak: 0.25 ms per iteration against 0.05 ms).
    pub fn cpu_seconds(
        &mut self,
        to_host: bool,
        bytes: u64,
        job_seconds: f64,
        queued_seconds: f64,
    ) -> f64 {
        let (classes, wake_up) = if to_host {
            (&mut self.solo_to_host, &mut self.wake_up[0])
        } else {
            (&mut self.solo_to_device, &mut self.wake_up[1])
        };
        classes.note(bytes, job_seconds);
        let waited = queued_seconds - job_seconds;
        if waited.is_finite() && waited >= 0.0 && wake_up.is_none_or(|least| waited < least) {
            *wake_up = Some(waited);
        }
        let job = classes
            .fastest_scaled(bytes)
            .map_or(job_seconds, |fastest| fastest.min(job_seconds));
        job + wake_up.unwrap_or(0.0)
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
        let near = |a: f64, b: f64| (a - b).abs() < 1e-12;
        // The first of its class: its job and its wake-up, as they lasted.
        assert!(near(
            seen.cpu_seconds(true, 1 << 20, 400e-6, 420e-6),
            420e-6
        ));
        // Stretched: the fastest job, scaled to its bytes, and the least wake-up.
        assert!(near(
            seen.cpu_seconds(true, 1 << 20, 900e-6, 950e-6),
            420e-6
        ));
        let scaled = seen.cpu_seconds(true, 3 << 19, 2e-3, 2.1e-3);
        assert!(near(scaled, 620e-6), "{scaled}");
        // Faster than any before: charged as it lasted, and the new fastest.
        assert!(near(
            seen.cpu_seconds(true, 1 << 20, 300e-6, 310e-6),
            310e-6
        ));
        assert!(near(
            seen.cpu_seconds(true, 1 << 20, 350e-6, 400e-6),
            310e-6
        ));
        // Queued behind others (a burst): the wait in the queue is not charged.
        assert!(near(seen.cpu_seconds(true, 1 << 20, 300e-6, 5e-3), 310e-6));
        // Another size class: its own job, the direction's wake-up; the other direction:
        // its own figures.
        assert!(near(seen.cpu_seconds(true, 1 << 10, 5e-6, 100e-6), 15e-6));
        assert!(near(
            seen.cpu_seconds(false, 1 << 20, 700e-6, 730e-6),
            730e-6
        ));
        // The queueing times the links learn from are not these.
        assert_eq!(seen.links(), None);
    }

    /// The charge does not depend on what was copied before: copies queued in a burst from
    /// the first (each waiting for the ones before it) are charged their jobs and one
    /// wake-up, as they are once a copy of their class came alone.
    #[test]
    fn a_burst_is_charged_its_jobs_whatever_came_before() {
        let burst = |seen: &mut ObservedCopies| -> f64 {
            (1..=8)
                .map(|k| seen.cpu_seconds(true, 64 << 10, 10e-6, 5e-6 + 10e-6 * k as f64))
                .sum()
        };
        let mut cold = ObservedCopies::default();
        let mut warm = ObservedCopies::default();
        // A copy of the class made alone before.
        warm.cpu_seconds(true, 64 << 10, 10e-6, 15e-6);
        let (cold, warm) = (burst(&mut cold), burst(&mut warm));
        assert!(
            (cold - warm).abs() < 1e-12 && (warm - 8.0 * 15e-6).abs() < 1e-12,
            "{cold} {warm}"
        );
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
