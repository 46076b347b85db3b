//! Test seams: the engine's unit tests start a transfer, settle everything in flight and read
//! the books through [`TestSeams`], a view of the engine that only tests have, so that the
//! engine's own methods stay its behaviour.

use burn_ir::{BackendIr, TensorId};

use super::Engine;

/// The engine seen by a unit test ([`Engine::seams`]).
pub(crate) struct TestSeams<'a, B: BackendIr>(&'a mut Engine<B>);

impl<B: BackendIr> Engine<B> {
    /// The test seams of this engine.
    pub fn seams(&mut self) -> TestSeams<'_, B> {
        TestSeams(self)
    }
}

impl<B: BackendIr> TestSeams<'_, B> {
    pub fn start_offload(&mut self, id: TensorId) {
        self.0.start_offload(id);
    }

    pub fn start_prefetch(&mut self, id: TensorId) {
        self.0.start_prefetch(id);
    }

    pub fn set_jitter(&mut self, max_micros: u64) {
        self.0.copies.transfers.set_jitter(max_micros);
    }

    pub fn settle_all(&mut self) {
        self.0.settle_everything();
    }

    /// The clock `exec::meter` measures iterations by (waits, recomputation, and on a
    /// host-memory backend the workers' copies).
    pub fn spent_nanos(&self) -> u64 {
        self.0.history.counters.spent_nanos
    }

    pub fn offload_nanos(&self) -> u64 {
        self.0.history.counters.offload_nanos
    }

    pub fn resident(&self) -> u64 {
        self.0.resident()
    }

    /// Whether the links are known without waiting (the probe is queued on first call).
    pub fn links_known(&mut self) -> bool {
        matches!(
            self.0.link_meter().links_beside(),
            super::measured_links::LinksNow::Known(_)
        )
    }

    /// Keeps `links` as a measurement keeps the links it measured (a measurement's figures
    /// depend on the machine and its load).
    pub fn keep_links(&mut self, links: crate::plan::profile::Links) {
        self.0.machine.links = Some(links);
    }
}
