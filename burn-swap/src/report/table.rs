//! The report as a table: its rows, grouped as its parts are.

use core::fmt;

use super::{PlanTakeover, Report};
use crate::config::Compression;

/// Formats bytes with a binary unit, e.g. `12.0 MiB`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "burn-swap report ({})", self.backend)?;
        let mut rows = Vec::new();
        self.memory_rows(&mut rows);
        self.transfer_rows(&mut rows);
        self.plan_rows(&mut rows);
        self.device_rows(&mut rows);
        // The names as wide as the widest (at least 16 characters: a planner's name can be
        // longer); values in 32, a longer one overflowing its row only.
        let keys = rows
            .iter()
            .map(|(k, _)| k.chars().count())
            .fold(16, usize::max);
        writeln!(f, "|{:-<w$}|{:-<34}|", "", "", w = keys + 2)?;
        for (k, v) in rows {
            writeln!(f, "| {k:<keys$} | {v:>32} |")?;
        }
        Ok(())
    }
}

/// The rows of the report's table, in order.
type Rows = Vec<(String, String)>;

impl Report {
    /// Policy, budget and the counted bytes.
    fn memory_rows(&self, rows: &mut Rows) {
        let budget = self
            .budget_bytes
            .map(format_bytes)
            .unwrap_or_else(|| "unlimited".into());
        let mut row = |k: &str, v: String| rows.push((k.to_string(), v));
        row("enabled", self.enabled.to_string());
        row("policy", format!("{} / {}", self.policy, self.eviction));
        row("budget", budget);
        row("peak resident", format_bytes(self.memory.peak_bytes));
        row("resident now", format_bytes(self.memory.resident_bytes));
        row(
            "tensors tracked",
            format!(
                "{} ({} kept for recipes), {} handles",
                self.memory.tracked_tensors,
                self.memory.kept_for_recipes,
                self.memory.device_handles
            ),
        );
        let host_budget = self
            .memory
            .host_budget_bytes
            .map_or(String::new(), |b| format!(" of {}", format_bytes(b)));
        let pinned = if self.memory.peak_pinned_host_bytes > 0 {
            format!(
                " ({} pinned)",
                format_bytes(self.memory.peak_pinned_host_bytes)
            )
        } else {
            String::new()
        };
        row(
            "peak on host",
            format!(
                "{}{host_budget}{pinned}",
                format_bytes(self.memory.peak_host_bytes)
            ),
        );
    }

    /// Offloads, fetches, compression, recomputation and the time they left exposed.
    fn transfer_rows(&self, rows: &mut Rows) {
        let mut row = |k: &str, v: String| rows.push((k.to_string(), v));
        let moved = |n: u64, bytes: u64| format!("{n} ({})", format_bytes(bytes));
        row(
            "offloads",
            moved(self.transfers.offloads, self.transfers.offloaded_bytes),
        );
        row(
            "fetches",
            moved(self.transfers.fetches, self.transfers.fetched_bytes),
        );
        row(
            "transfer time",
            format!(
                "{:.3} s out, {:.3} s in",
                self.transfers.offload_seconds, self.transfers.fetch_seconds
            ),
        );
        row(
            "failed transfers",
            format!(
                "{} out, {} in",
                self.transfers.failed_offloads, self.transfers.failed_fetches
            ),
        );
        if self.memory.budget_overshoots > 0 {
            row(
                "budget overshoots",
                self.memory.budget_overshoots.to_string(),
            );
        }
        if self.compression.mode != Compression::Off {
            row(
                "compression",
                format!(
                    "{} -> {} ({:.2}x)",
                    format_bytes(self.compression.raw_bytes),
                    format_bytes(self.compression.moved_bytes),
                    self.compression.ratio
                ),
            );
            row(
                "compressed",
                format!(
                    "{} offloads, codec {:.3} s",
                    self.compression.compressed_offloads, self.compression.codec_seconds
                ),
            );
        }
        row(
            "recomputes",
            format!(
                "{} ({:.3} s), {} evicted",
                self.transfers.recomputes,
                self.transfers.recompute_seconds,
                self.transfers.evictions
            ),
        );
        if self.transfers.room_search_seconds > 0.0 {
            row(
                "room search",
                format!(
                    "{:.3} s on the op's path in {} searches (the fallback choosing what leaves)",
                    self.transfers.room_search_seconds, self.transfers.room_searches
                ),
            );
        }
        if self.transfers.handover_seconds > 0.0 {
            row(
                "hand-overs",
                format!(
                    "{:.3} s on the op's path (copies queued for the transfer workers)",
                    self.transfers.handover_seconds
                ),
            );
        }
        let w = &self.transfers.exposed_wait;
        row(
            "exposed wait",
            format!(
                "{:.3} s (fetches on the op's path {:.3} s, fetches still in flight {:.3} s, \
                 offloads in flight {:.3} s, offloads on the op's path {:.3} s)",
                self.transfers.exposed_wait_seconds,
                w.fetch_seconds,
                w.prefetch_seconds,
                w.room_seconds,
                w.offload_seconds
            ),
        );
    }

    /// The plan followed and the candidates it was chosen from: the predicted time of each
    /// that fits (the chosen one marked), the smallest budget of each that does not.
    fn plan_rows(&self, rows: &mut Rows) {
        if let Some(last) = self.plan.declines.latest.last() {
            rows.push((
                "declined".into(),
                format!(
                    "{} plans; the latest {:.2} ms {} vs the fallback's {:.2} ms per \
                     iteration",
                    self.plan.declines.count,
                    last.plan_seconds * 1e3,
                    if last.measured {
                        "measured"
                    } else {
                        "predicted"
                    },
                    last.fallback_seconds * 1e3
                ),
            ));
        }
        let Some(predicted) = self.plan.predicted_peak_bytes else {
            return;
        };
        let mut row = |k: &str, v: String| rows.push((k.to_string(), v));
        row(
            "plan",
            format!(
                "{} off + {} rec, {:.1} ms planning ({:.1} ms of it on the op thread); \
                 links probed in {:.1} ms, waited for {} times",
                self.plan.planned_offloads,
                self.plan.planned_recomputes,
                self.plan.planning_seconds * 1e3,
                self.plan.planning_op_thread_seconds * 1e3,
                self.plan.link_probe_seconds * 1e3,
                self.plan.link_probe_waits
            ),
        );
        row(
            "followed",
            format!(
                "{} iterations of {} plans made, {} kept plans reused; the fallback made room \
                 of {} under them",
                self.plan.planned_iterations,
                self.plan.plans,
                self.plan.plans_reused,
                format_bytes(self.plan.fallback_bytes_under_plan)
            ),
        );
        if let Some(first) = self.plan.plan_takeovers.first() {
            row("took over", takeovers(&self.plan.plan_takeovers, first));
        }
        if let Some(first) = self.plan.fallback_rooms.first() {
            row(
                "first fallback",
                format!(
                    "at op {} of its iteration: {} needed, {} planned, {} moved",
                    first.position,
                    format_bytes(first.needed_bytes),
                    format_bytes(first.predicted_bytes),
                    format_bytes(first.freed_bytes)
                ),
            );
        }
        let pool = self
            .plan
            .predicted_pool_bytes
            .map_or(String::new(), |p| format!(" (pool {})", format_bytes(p)));
        row(
            "predicted peak",
            format!("{}{pool}", format_bytes(predicted)),
        );
        for choice in &self.plan.plan_choices {
            let chosen = self.plan.plan_chosen.as_deref() == Some(choice.planner.as_str());
            let verdict = if choice.fits {
                format!("{:.2} ms/iter", choice.seconds() * 1e3)
            } else {
                format!("needs {}", format_bytes(choice.smallest_budget_bytes))
            };
            let mark = if chosen { "chosen, " } else { "" };
            row(&format!("  {}", choice.planner), format!("{mark}{verdict}"));
        }
    }

    /// The allocator, the device, the peers, and the workload's figures.
    fn device_rows(&self, rows: &mut Rows) {
        let mut row = |k: &str, v: String| rows.push((k.to_string(), v));
        if let Some(peak) = self.device.allocator_peak {
            row(
                "allocator peak",
                format!(
                    "{} in use, {} reserved",
                    format_bytes(peak.in_use),
                    format_bytes(peak.reserved)
                ),
            );
        }
        for s in &self.device.allocator_streams {
            row(
                &format!("  {:?} stream {}", s.role, s.stream),
                format!(
                    "{} in use, {} reserved ({} padding, {} idle), peak {} reserved{}",
                    format_bytes(s.usage.in_use),
                    format_bytes(s.usage.reserved),
                    format_bytes(s.usage.padding),
                    format_bytes(s.usage.idle()),
                    format_bytes(s.peak_reserved),
                    if s.shared {
                        "; pools shared, counted once"
                    } else {
                        ""
                    }
                ),
            );
        }
        if self.device.allocator_cleanups > 0 {
            row(
                "allocator cleanups",
                self.device.allocator_cleanups.to_string(),
            );
        }
        if self.device.temporaries.0 > 0 {
            row(
                "op temporaries",
                format!(
                    "{} op shapes learned, the largest {}",
                    self.device.temporaries.0,
                    format_bytes(self.device.temporaries.1)
                ),
            );
        }
        if let Some(over) = &self.device.reserved_over {
            row(
                "reserved over budget",
                format!(
                    "{} at most, after {} ({})",
                    format_bytes(over.bytes),
                    over.op,
                    match over.expected {
                        None => "its temporaries unknown: the first op of its shape".to_string(),
                        Some(t) => format!("room made for {} of temporaries", format_bytes(t)),
                    }
                ),
            );
        }
        if let Some(total) = self.device.device_memory_bytes {
            row("device memory", format_bytes(total));
        }
        for peer in &self.device.peers {
            row(
                &peer.name,
                format!(
                    "{} out, {:.2} GB/s",
                    format_bytes(peer.sent_bytes),
                    peer.bandwidth / 1e9
                ),
            );
        }
        if !self.device.peers.is_empty() {
            row("peer fallbacks", self.device.peer_fallbacks.to_string());
        }
        row("ops", self.workload.ops.to_string());
        row("largest op", format_bytes(self.workload.largest_op_bytes));
        row(
            "minimum budget",
            format_bytes(self.workload.minimum_budget_bytes),
        );
        let w = &self.workload;
        row(
            "period",
            w.period.map(|p| format!("{p} ops")).unwrap_or_else(|| {
                format!(
                    "not detected: no repeat in {} traced ops (`planned` runs on the fallback)",
                    w.traced_ops
                )
            }),
        );
        row(
            "trace",
            format!(
                "{} ops, {} of other threads left out; {:.1} log reads per op",
                w.traced_ops,
                w.untraced_ops,
                w.trace_reads as f64 / w.traced_ops.max(1) as f64
            ),
        );
        let t = &w.layer_time;
        if t.timed_ops > 0 {
            let x = &self.transfers;
            let rest = t.engine_seconds
                - t.trace_seconds
                - t.follow_seconds
                - x.room_search_seconds
                - x.exposed_wait_seconds;
            row(
                "engine time",
                format!(
                    "{:.3} s on the op's thread (trace {:.3}, following the plan {:.3}, room \
                     search {:.3}, waits {:.3}, books and the rest {:.3}); the inner ops {:.3} \
                     s; from {} ops timed; burn-router's route to the engine not counted",
                    t.engine_seconds,
                    t.trace_seconds,
                    t.follow_seconds,
                    x.room_search_seconds,
                    x.exposed_wait_seconds,
                    rest.max(0.0),
                    t.inner_seconds,
                    t.timed_ops
                ),
            );
        }
        if let Some(last) = self.workload.iteration_peaks.last() {
            row(
                "last iter. peak",
                format!("#{}: {}", last.iteration, format_bytes(last.peak_bytes)),
            );
        }
    }
}

/// The plans' takeovers in words: where the first and the latest took over (the end of an
/// iteration of their schedule, by op counted from the device's first), and what each was: a
/// new plan with the time it took and the iterations the fallback ran meanwhile, or a kept
/// one.
fn takeovers(all: &[PlanTakeover], first: &PlanTakeover) -> String {
    let one = |t: &PlanTakeover| {
        if t.reused {
            format!("after op {}, a kept plan (period {} ops)", t.op, t.period)
        } else {
            format!(
                "after op {}, made in {:.1} ms beside {} iterations on the fallback (period {} \
                 ops)",
                t.op,
                t.planning_seconds * 1e3,
                t.waited_iterations,
                t.period
            )
        }
    };
    match all.last() {
        Some(latest) if all.len() > 1 => format!(
            "{} times{}: first {}; latest {}",
            all.len(),
            if all.len() >= super::TAKEOVERS_KEPT {
                " (the latest kept)"
            } else {
                ""
            },
            one(first),
            one(latest)
        ),
        _ => one(first),
    }
}
