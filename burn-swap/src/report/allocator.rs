//! The inner allocator's figures (CubeCL backends), per stream and in total, and the op
//! after which it reserved the most over the budget.

use serde::{Deserialize, Serialize};

/// The inner allocator's own figures for a device, in bytes (CubeCL backends).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocatorUsage {
    /// What its pools hand out to live buffers.
    pub in_use: u64,
    /// What its pools hold from the driver (in use, padding, and idle buffers or free
    /// pages).
    pub reserved: u64,
    /// Of what is in use, the bytes buffers were rounded up by (alignment).
    #[serde(default)]
    pub padding: u64,
}

impl AllocatorUsage {
    /// What the pools hold that no live buffer uses: idle buffers and free pages, which a
    /// cleanup gives back.
    pub fn idle(self) -> u64 {
        self.reserved.saturating_sub(self.in_use + self.padding)
    }

    /// The larger of each figure.
    pub fn max(self, other: Self) -> Self {
        Self {
            in_use: self.in_use.max(other.in_use),
            reserved: self.reserved.max(other.reserved),
            padding: self.padding.max(other.padding),
        }
    }
}

impl core::ops::Add for AllocatorUsage {
    type Output = Self;

    /// Both figures added up (the pools of several streams).
    fn add(self, other: Self) -> Self {
        Self {
            in_use: self.in_use + other.in_use,
            reserved: self.reserved + other.reserved,
            padding: self.padding + other.padding,
        }
    }
}

/// The allocator's figures of one stream that burn-swap runs device work on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamUsage {
    /// Whose stream it is.
    pub role: StreamRole,
    /// The stream's id (CubeCL's `StreamId` value).
    pub stream: u64,
    /// Whether its pools are another listed stream's (CubeCL maps both ids to one pool set),
    /// and so are not added again to the total.
    pub shared: bool,
    /// Its pools' figures, as last read.
    pub usage: AllocatorUsage,
    /// The most its pools reserved when read since the counters were last reset (each read
    /// after an op or a job, before any cleanup it led to).
    pub peak_reserved: u64,
}

/// Whose work runs on a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StreamRole {
    /// A thread that runs the model's ops.
    Compute,
    /// The send worker (offloads: reads, compression kernels).
    Send,
    /// The receive worker (fetches: the buffers written back, decompression kernels).
    Receive,
}

/// The op after which the allocator reserved the most over the budget (CubeCL backends),
/// and why it could: its temporaries were not known yet, or room for them could not be made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReservedOver {
    /// The op's kind, as the trace names it.
    pub op: String,
    /// Bytes reserved over the budget after it (every stream, before any cleanup).
    pub bytes: u64,
    /// The temporaries room was made for (`None`: an op of its shape ran for the first
    /// time, and its temporaries were unknown).
    pub expected: Option<u64>,
}
