//! The engine's figures, read at once, and the report made of them (`crate::report`): the
//! report's types are plain data; what the engine counted is turned into them here.

use crate::config::SwapConfig;
use crate::exec::counters::{Counters, Wait};
use crate::exec::residency::Books;
use crate::report::{
    CompressionReport, CompressionStat, DeviceReport, ExposedWait, LayerTime, MemoryReport,
    PeerStat, PlanReport, Report, TransferReport, WorkloadReport,
};
use crate::trace::IterationPeak;

/// Everything the report is built from (`crate::report`), read from the engine at once.
pub(crate) struct Figures {
    pub config: SwapConfig,
    /// The budget in force (`None` when unlimited or off).
    pub budget: Option<u64>,
    pub books: Books,
    pub counters: Counters,
    pub device_memory: Option<u64>,
    pub planned_offloads: usize,
    pub planned_recomputes: usize,
    pub peers: Vec<PeerStat>,
    pub peer_fallbacks: u64,
    pub period: Option<usize>,
    /// The streams burn-swap runs device work on, with the allocator's figures of each.
    pub streams: Vec<crate::report::StreamUsage>,
    /// Cleanups made because the allocator reserved more than the budget.
    pub allocator_cleanups: u64,
    /// The op after which the allocator reserved the most over the budget.
    pub reserved_over: Option<crate::report::ReservedOver>,
    /// Op shapes whose temporaries were learned, and the largest of those.
    pub temporaries: (usize, u64),
    pub iteration_peaks: Vec<IterationPeak>,
    /// Ops the trace recorded, and ops of other threads than the training thread it left
    /// out, since it began.
    pub traced_ops: u64,
    pub untraced_ops: u64,
    /// Log entries the recorder read off the per-op fast path since the trace began.
    pub trace_reads: u64,
    /// Tensors in the books, of those the ones Burn let go of that recipes still read, and
    /// the device handles held.
    pub tracked: Tracked,
}

/// How many tensors the engine keeps track of (read at report time, by a walk of the books).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tracked {
    pub tensors: u64,
    pub kept_for_recipes: u64,
    pub handles: u64,
}

/// The per-shape compression figures, largest raw bytes first, at most 32.
fn compression_by_tensor(c: &Counters) -> Vec<CompressionStat> {
    let mut stats: Vec<CompressionStat> = c
        .moves
        .iter()
        .map(|((dims, dtype), &(offloads, raw, moved))| CompressionStat {
            shape: dims.as_slice().to_vec(),
            dtype: format!("{dtype:?}"),
            offloads,
            raw_bytes: raw,
            moved_bytes: moved,
            ratio: raw as f64 / moved.max(1) as f64,
        })
        .collect();
    stats.sort_by(|a, b| b.raw_bytes.cmp(&a.raw_bytes).then(a.shape.cmp(&b.shape)));
    stats.truncate(32);
    stats
}

impl Figures {
    /// The report of a device whose inner backend is named `backend`.
    pub(crate) fn into_report(self, backend: String) -> Report {
        let f = self;
        let c = &f.counters;
        let seconds = |nanos: u64| nanos as f64 * 1e-9;
        Report {
            backend,
            enabled: f.config.enabled,
            policy: f.config.policy,
            eviction: f.config.eviction,
            budget_bytes: f.budget,
            memory: MemoryReport {
                host_budget_bytes: f.config.host_budget(),
                resident_bytes: f.books.resident,
                peak_bytes: f.books.peak,
                host_bytes: f.books.host,
                peak_host_bytes: f.books.peak_host,
                pinned_host_bytes: f.books.pinned,
                peak_pinned_host_bytes: f.books.peak_pinned,
                budget_overshoots: c.budget_overshoots,
                tracked_tensors: f.tracked.tensors,
                kept_for_recipes: f.tracked.kept_for_recipes,
                device_handles: f.tracked.handles,
            },
            transfers: TransferReport {
                offloads: c.offloads,
                offloaded_bytes: c.offloaded_bytes,
                offload_seconds: seconds(c.offload_nanos),
                fetches: c.fetches,
                fetched_bytes: c.fetched_bytes,
                fetch_seconds: seconds(c.fetch_nanos),
                failed_offloads: c.failed_offloads,
                failed_fetches: c.failed_fetches,
                whole_buffer_offloads: c.whole_buffer_offloads,
                evictions: c.evictions,
                recomputes: c.recomputes,
                recompute_seconds: seconds(c.recompute_nanos),
                room_search_seconds: seconds(c.room_search_nanos),
                handover_seconds: seconds(c.handover_nanos),
                room_searches: c.room_searches,
                exposed_wait_seconds: seconds(c.exposed_wait_nanos()),
                exposed_wait: ExposedWait {
                    fetch_seconds: seconds(c.exposed_by_cause[Wait::Fetch as usize]),
                    prefetch_seconds: seconds(c.exposed_by_cause[Wait::Prefetch as usize]),
                    room_seconds: seconds(c.exposed_by_cause[Wait::Room as usize]),
                    offload_seconds: seconds(c.exposed_by_cause[Wait::Offload as usize]),
                },
                planned_waits: c.planned_waits,
                unawaited_prefetch_reads: c.unawaited_prefetch_reads,
            },
            compression: CompressionReport {
                mode: f.config.compression,
                raw_bytes: c.raw_bytes,
                moved_bytes: c.moved_bytes,
                ratio: if c.moved_bytes == 0 {
                    1.0
                } else {
                    c.raw_bytes as f64 / c.moved_bytes as f64
                },
                compressed_offloads: c.compressed_offloads,
                device_compressed_offloads: c.device_compressed,
                device_decompressed_fetches: c.device_decompressed,
                codec_seconds: seconds(c.codec_nanos),
                by_tensor: compression_by_tensor(c),
            },
            plan: PlanReport {
                plans: c.plans,
                planned_iterations: c.planned_iterations,
                fallback_bytes_under_plan: c.fallback_bytes_under_plan,
                fallback_rooms: c.fallback_rooms.clone(),
                planning_seconds: seconds(c.planning_nanos),
                planning_op_thread_seconds: seconds(c.planning_op_thread_nanos),
                link_probe_seconds: seconds(c.link_probe_nanos),
                link_probe_waits: c.link_probe_waits,
                link_probe_started_op: c.link_probe_op,
                plans_reused: c.plans_reused,
                plan_takeovers: c.plan_takeovers.clone(),
                declines: c.declines.clone(),
                predicted_peak_bytes: c.predicted_peak,
                predicted_pool_bytes: c.predicted_pool,
                planned_period: c.planned_period,
                plan_chosen: c
                    .plan_chosen
                    .and_then(|i| c.plan_choices.get(i))
                    .map(|choice| choice.planner.clone()),
                plan_choices: c.plan_choices.clone(),
                predicted_exposed_seconds: c.predicted_exposed_nanos.map(seconds),
                planned_offloads: f.planned_offloads,
                planned_recomputes: f.planned_recomputes,
            },
            device: DeviceReport {
                device_memory_bytes: f.device_memory,
                allocator: c.allocator,
                allocator_peak: c.allocator_peak,
                allocator_streams: f.streams.clone(),
                allocator_cleanups: f.allocator_cleanups,
                reserved_over: f.reserved_over.clone(),
                temporaries: f.temporaries,
                peers: f.peers,
                peer_fallbacks: f.peer_fallbacks,
            },
            workload: WorkloadReport {
                ops: c.ops,
                largest_op_bytes: c.largest_op,
                minimum_budget_bytes: c.minimum_budget,
                period: f.period,
                iteration_peaks: f.iteration_peaks,
                layer_time: {
                    let clock = &c.op_clock;
                    let scaled = |nanos: u64| clock.scaled(nanos, c.ops);
                    LayerTime {
                        timed_ops: clock.sampled,
                        engine_seconds: scaled(
                            clock.engine_nanos.saturating_sub(clock.inner_nanos),
                        ),
                        trace_seconds: scaled(clock.trace_nanos),
                        follow_seconds: scaled(clock.follow_nanos),
                        inner_seconds: scaled(clock.inner_nanos),
                    }
                },
                traced_ops: f.traced_ops,
                untraced_ops: f.untraced_ops,
                trace_reads: f.trace_reads,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SwapConfig;
    use crate::report::{PlanTakeover, Report};

    fn report(counters: Counters) -> Report {
        Figures {
            config: SwapConfig::default(),
            budget: Some(1 << 20),
            books: Default::default(),
            counters,
            device_memory: None,
            planned_offloads: 0,
            planned_recomputes: 0,
            peers: Vec::new(),
            peer_fallbacks: 0,
            period: Some(40),
            streams: Vec::new(),
            allocator_cleanups: 0,
            reserved_over: None,
            temporaries: (0, 0),
            iteration_peaks: Vec::new(),
            traced_ops: 0,
            untraced_ops: 0,
            trace_reads: 0,
            tracked: Default::default(),
        }
        .into_report("test".into())
    }

    #[test]
    fn the_table_says_when_each_plan_took_over_and_what_it_was() {
        let made = PlanTakeover {
            op: 240,
            period: 40,
            reused: false,
            planning_seconds: 0.0125,
            waited_iterations: 2,
        };
        let kept = PlanTakeover {
            op: 900,
            reused: true,
            planning_seconds: 0.0,
            waited_iterations: 0,
            ..made
        };
        let mut counters = Counters {
            predicted_peak: Some(1 << 19),
            ..Counters::default()
        };
        let none = report(counters.clone()).to_string();
        assert!(!none.contains("took over"), "{none}");
        counters.plan_takeovers = vec![made];
        let text = report(counters.clone()).to_string();
        assert!(
            text.contains(
                "| took over        | after op 240, made in 12.5 ms beside 2 iterations on the \
                 fallback (period 40 ops) |"
            ),
            "{text}"
        );
        counters.plan_takeovers = vec![made, kept, kept];
        let text = report(counters).to_string();
        assert!(
            text.contains(
                "3 times: first after op 240, made in 12.5 ms beside 2 iterations on the \
                 fallback (period 40 ops); latest after op 900, a kept plan (period 40 ops) |"
            ),
            "{text}"
        );
    }

    /// Rows run in their own processes hand their reports back as JSON (swap-bench): every
    /// figure comes back exactly, seconds included (serde_json's default float parsing is off
    /// by one unit in the last place for about one value in ten, such as the one below).
    #[test]
    fn a_report_comes_back_from_json_exactly() {
        let mut sent = report(Counters::default());
        sent.workload.layer_time.engine_seconds = 1.817_631_885_527_570_6;
        sent.workload.layer_time.trace_seconds = 0.181_968_741_896_112_62;
        let back: Report = serde_json::from_str(&sent.to_json()).expect("a report");
        assert_eq!(back, sent);
    }

    /// The plans declined are one value in the report (`Declines`) written under the three
    /// keys they had as fields, so that a report written before reads, the older name
    /// `plan_declined` for the schedule in force too; one without them reads as none.
    #[test]
    fn the_declined_plans_keep_their_keys_and_old_reports_read() {
        let mut sent = report(Counters::default());
        sent.plan.declines.add(
            crate::PlanDecline {
                op: 4_096,
                period: 128,
                plan_seconds: 0.25,
                measured: true,
                fallback_seconds: 0.125,
                iteration_seconds: 2.0,
            },
            32,
        );
        let json = sent.to_json();
        for key in [
            "\"plans_declined\": 1",
            "\"plan_declines\": [",
            "\"declined_in_force\": true",
        ] {
            assert!(json.contains(key), "{key} in {json}");
        }
        let back: Report = serde_json::from_str(&json).expect("a report");
        assert_eq!(back, sent);
        let old = json.replace("\"declined_in_force\"", "\"plan_declined\"");
        let back: Report = serde_json::from_str(&old).expect("a report");
        assert_eq!(back, sent);
        fn remove(value: &mut serde_json::Value, keys: &[&str]) {
            if let Some(object) = value.as_object_mut() {
                object.retain(|k, _| !keys.contains(&k.as_str()));
                object.values_mut().for_each(|v| remove(v, keys));
            }
        }
        let mut none: serde_json::Value = serde_json::from_str(&json).expect("JSON");
        remove(
            &mut none,
            &["plans_declined", "plan_declines", "declined_in_force"],
        );
        let without = none.to_string();
        assert!(!without.contains("declin"), "{without}");
        let back: Report = serde_json::from_str(&without).expect("a report");
        assert_eq!(back.plan.declines, crate::Declines::default());
    }

    /// Where the device reserved more than the budget, the table names the op and whether
    /// its temporaries were known; a report without it (an older JSON) reads as none.
    #[test]
    fn the_table_names_the_op_that_took_the_device_over_the_budget() {
        let mut r = report(Counters::default());
        r.device.temporaries = (12, 131_072);
        r.device.reserved_over = Some(crate::ReservedOver {
            op: "Module.Conv2dWeightBackward".into(),
            bytes: 21_783,
            expected: Some(131_072),
        });
        let table = r.to_string();
        assert!(
            table.contains("12 op shapes learned, the largest 128.0 KiB"),
            "{table}"
        );
        assert!(
            table.contains(
                "after Module.Conv2dWeightBackward (room made for 128.0 KiB of temporaries)"
            ),
            "{table}"
        );
        r.device.reserved_over.as_mut().unwrap().expected = None;
        assert!(r.to_string().contains("its temporaries unknown"));
        let back: Report = serde_json::from_str(&r.to_json()).expect("a report");
        assert_eq!(back, r);
        let mut json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        // Wherever the report puts the device's fields (flattened or not).
        fn strip(v: &mut serde_json::Value) {
            if let Some(o) = v.as_object_mut() {
                o.remove("reserved_over");
                o.remove("temporaries");
                o.values_mut().for_each(strip);
            }
        }
        strip(&mut json);
        assert!(!json.to_string().contains("reserved_over"));
        let old: Report = serde_json::from_value(json).expect("a report without them");
        assert_eq!(old.device.reserved_over, None);
    }

    /// The books' size is in the table and in the JSON (a count that grows with the steps is
    /// a leak of the layer's); an older JSON without it reads as zeros.
    #[test]
    fn the_table_gives_the_books_size() {
        let mut r = report(Counters::default());
        r.memory.tracked_tensors = 45;
        r.memory.kept_for_recipes = 2;
        r.memory.device_handles = 44;
        let table = r.to_string();
        assert!(
            table.contains("45 (2 kept for recipes), 44 handles"),
            "{table}"
        );
        let back: Report = serde_json::from_str(&r.to_json()).expect("a report");
        assert_eq!(back, r);
        let mut json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        fn strip(v: &mut serde_json::Value) {
            if let Some(o) = v.as_object_mut() {
                for key in ["tracked_tensors", "kept_for_recipes", "device_handles"] {
                    o.remove(key);
                }
                o.values_mut().for_each(strip);
            }
        }
        strip(&mut json);
        let old: Report = serde_json::from_value(json).expect("a report without them");
        assert_eq!(old.memory.tracked_tensors, 0);
    }
}
