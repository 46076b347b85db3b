//! The counted bytes of a device and their peaks.

use super::HostCopy;

/// The counted bytes of a device.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Books {
    /// Bytes on the device: resident, offloading (until the copy completes) and fetching
    /// (from the moment the fetch starts).
    pub resident: u64,
    /// Bytes off the device, in host memory (raw or compressed).
    pub host: u64,
    /// Bytes of the tensors whose offload is in flight (part of `resident`).
    pub offloading: u64,
    /// Bytes lent to device work outside the tensors: the link probe's temporary tensors
    /// while it runs beside the ops (part of `resident`).
    pub lent: u64,
    /// Highest `resident` (or bytes noted during an op) since the last reset.
    pub peak: u64,
    /// Highest `host` since the last reset.
    pub peak_host: u64,
    /// Of `host`, the bytes in pinned host memory ([`HostCopy::pinned_bytes`]).
    pub pinned: u64,
    /// Highest `pinned` since the last reset.
    pub peak_pinned: u64,
}

impl Books {
    /// Notes `bytes` resident at once (an op's inputs and outputs while it runs).
    #[inline]
    pub fn note_peak(&mut self, bytes: u64) {
        self.peak = self.peak.max(bytes);
    }

    #[inline]
    pub(super) fn add_resident(&mut self, bytes: u64) {
        self.resident += bytes;
        self.note_peak(self.resident);
    }

    pub(super) fn add_host(&mut self, copy: &HostCopy) {
        self.host += copy.bytes();
        self.peak_host = self.peak_host.max(self.host);
        self.pinned += copy.pinned_bytes();
        self.peak_pinned = self.peak_pinned.max(self.pinned);
    }

    pub(super) fn remove_host(&mut self, copy: &HostCopy) {
        self.host -= copy.bytes();
        self.pinned -= copy.pinned_bytes();
    }

    /// Starts a new measurement: the peaks from the current values.
    pub fn reset_peaks(&mut self) {
        self.peak = self.resident;
        self.peak_host = self.host;
        self.peak_pinned = self.pinned;
    }
}
