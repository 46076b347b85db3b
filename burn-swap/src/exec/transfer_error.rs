//! Why a transfer failed: the error of every copy between the device, the host and peers.

use burn_backend::DType;

use crate::codec;

/// Why a transfer failed. The tensor it concerned is intact where it was.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum TransferError {
    /// The inner backend refused a read, a write or a sync.
    #[error("the inner backend failed: {0}")]
    Backend(String),
    /// The inner backend panicked during the copy.
    #[error("the inner backend panicked: {0}")]
    Panicked(String),
    /// A dtype the data path cannot carry.
    #[error("dtype {0:?} cannot be moved")]
    Dtype(DType),
    /// This platform cannot block on a read.
    #[error("this platform cannot block on a read")]
    CannotBlock,
    /// The codec refused the bytes.
    #[error(transparent)]
    Codec(#[from] codec::CodecError),
    /// The device's codec kernels failed.
    #[cfg_attr(not(any(feature = "cuda", feature = "wgpu")), allow(dead_code))]
    #[error("the device codec failed: {0}")]
    Kernel(String),
    /// A copy to or from a peer failed.
    #[error("a peer copy failed: {0}")]
    Peer(String),
    /// A failure injected by a test.
    #[error("injected {0} failure")]
    Injected(&'static str),
}

impl From<burn_backend::ExecutionError> for TransferError {
    fn from(error: burn_backend::ExecutionError) -> Self {
        TransferError::Backend(error.to_string())
    }
}

pub(crate) fn panic_message(panic: Box<dyn std::any::Any + Send>) -> TransferError {
    TransferError::Panicked(
        panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "without a message".into()),
    )
}
