//! Unit tests of the parent module.

use super::*;
use crate::codec::{self as compress, Compressed};
use burn_backend::{DType, TensorData};
use cubecl::wgpu::{WgpuDevice, WgpuRuntime};

fn client() -> Option<ComputeClient<WgpuRuntime>> {
    let found = std::panic::catch_unwind(|| WgpuRuntime::client(&WgpuDevice::DefaultDevice));
    match found {
        Ok(client) => Some(client),
        Err(_) if std::env::var("BURN_SWAP_REQUIRE_KERNELS").as_deref() == Ok("1") => {
            panic!("no wgpu adapter, and BURN_SWAP_REQUIRE_KERNELS=1")
        }
        Err(_) => {
            eprintln!(
                "SKIPPED: no wgpu adapter for the kernel tests \
                 (install mesa-vulkan-drivers, or set BURN_SWAP_REQUIRE_KERNELS=1 to fail)"
            );
            None
        }
    }
}

use crate::rng::{SplitMix64 as Rng, random_tensor};

/// A random tensor with about `zeros` percent of zeros.
fn tensor(rng: &mut Rng, dtype: DType, n: usize, zeros: u64) -> TensorData {
    random_tensor(rng, dtype, n, zeros as f64 / 100.0)
}

fn upload(client: &ComputeClient<WgpuRuntime>, data: &TensorData) -> Handle {
    let mut bytes = data.bytes.to_vec();
    bytes.resize(4 * words(bytes.len()).max(1), 0);
    client.create_from_slice(&bytes)
}

#[test]
fn kernels_match_the_cpu_codec_and_round_trip() {
    let Some(client) = client() else {
        return;
    };
    let mut rng = Rng::new(5);
    let dtypes = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I64,
        DType::I8,
        DType::U16,
    ];
    for dtype in dtypes {
        for n in [0usize, 1, 31, 33, 1000, 8191, 8193, 70_001] {
            for zeros in [0, 10, 50, 90, 100] {
                let data = tensor(&mut rng, dtype, n, zeros);
                let what = format!("{dtype:?} n={n} zeros={zeros}%");
                let cpu = compress::compress(&data).unwrap();
                let input = upload(&client, &data);
                let device = compress(&client, &input, n, dtype.size()).unwrap();
                let host = to_host(&client, &device, vec![n], dtype).unwrap();
                // The same format, byte for byte.
                assert_eq!(host, cpu, "{what}: kernel and CPU outputs differ");
                // The kernel's decompression gives the bytes back.
                let out = decompress(&client, &device).unwrap();
                let out = read(&client, vec![out]).unwrap().remove(0);
                assert_eq!(&out[..n * dtype.size()], &data.bytes[..], "{what}");
                // The CPU's compressed form decompresses on the device, and back.
                let uploaded = from_host(&client, &cpu).unwrap();
                let out = decompress(&client, &uploaded).unwrap();
                let out = read(&client, vec![out]).unwrap().remove(0);
                assert_eq!(&out[..n * dtype.size()], &data.bytes[..], "{what}");
                let back: Compressed = to_host(&client, &uploaded, vec![n], dtype).unwrap();
                assert_eq!(compress::decompress(&back).unwrap().bytes, data.bytes);
            }
        }
    }
}

#[test]
fn unsupported_widths_are_errors() {
    let Some(client) = client() else {
        return;
    };
    let input = client.create_from_slice(&[0u8; 12]);
    assert_eq!(
        compress(&client, &input, 4, 3).err(),
        Some(KernelError::Width(3))
    );
}
