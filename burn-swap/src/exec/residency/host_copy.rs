//! A tensor's bytes while it is off the device.

use burn_backend::TensorData;

/// A tensor's bytes off the device: in host memory, or split across peers.
pub(crate) enum HostCopy {
    /// As read.
    Raw(TensorData),
    /// Zero-value compressed (`crate::codec`).
    Compressed(crate::codec::Compressed),
    /// Split across peers, the rest on the host (`crate::exec::peers`).
    Peers(Box<crate::exec::peers::PeerCopy>),
}

impl HostCopy {
    /// Bytes it occupies in host memory (peers' pieces are counted by their peers).
    pub fn bytes(&self) -> u64 {
        match self {
            HostCopy::Raw(data) => data.bytes.len() as u64,
            HostCopy::Compressed(c) => c.bytes(),
            HostCopy::Peers(p) => p.host_bytes(),
        }
    }

    /// The tensor's data, decompressed or brought back from its peers when needed.
    pub fn into_data(self) -> Result<TensorData, crate::exec::peers::ReceiveError> {
        match self {
            HostCopy::Raw(data) => Ok(data),
            HostCopy::Compressed(c) => Ok(crate::codec::decompress(&c)?),
            HostCopy::Peers(p) => p.receive(),
        }
    }

    /// Bytes it moved off the device (to the host and to peers), compressed or not.
    pub fn stored_bytes(&self) -> u64 {
        match self {
            HostCopy::Peers(p) => p.stored_bytes(),
            other => other.bytes(),
        }
    }

    /// Of [`Self::bytes`], those in pinned (page-locked) host memory: a raw copy that the
    /// backend read into its pinned pool (CubeCL's CUDA staging pool, wgpu's mapped buffers);
    /// the codec's and the peers' host bytes are ordinary pageable memory.
    pub fn pinned_bytes(&self) -> u64 {
        match self {
            HostCopy::Raw(data)
                if data.bytes.property() == burn_std::AllocationProperty::Pinned =>
            {
                data.bytes.len() as u64
            }
            _ => 0,
        }
    }

    /// Whether it is zero-value compressed.
    pub fn compressed(&self) -> bool {
        match self {
            HostCopy::Raw(_) => false,
            HostCopy::Compressed(_) => true,
            HostCopy::Peers(p) => p.compressed(),
        }
    }

    /// A copy of the tensor's data.
    pub fn to_data(&self) -> Result<TensorData, crate::exec::peers::ReceiveError> {
        match self {
            HostCopy::Raw(data) => Ok(data.clone()),
            HostCopy::Compressed(c) => Ok(crate::codec::decompress(c)?),
            HostCopy::Peers(p) => p.receive(),
        }
    }
}
