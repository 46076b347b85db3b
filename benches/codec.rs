//! The zero-value codec on the CPU: compress and decompress throughput against a plain copy
//! of the same bytes, at several zero fractions; and the compression ratio on real ReLU
//! activations (the benches' MLP and the tests' conv net) against the ideal
//! `w / (1/8 + (1 - z) · w)` for zero fraction `z` and `w` bytes per element.

use burn::backend::Flex;
use burn::backend::flex::FlexDevice;
use burn::tensor::{Tensor, TensorData, activation::relu};
use burn_swap::unstable::codec::{compress, decompress};
use burn_swap_harness::data::XorShift;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const ELEMENTS: usize = 4 << 20; // 16 MiB of f32

fn tensor_with_zeros(zeros: f64) -> TensorData {
    let mut rng = XorShift::new(9);
    let values: Vec<f32> = (0..ELEMENTS)
        .map(|_| {
            let v = rng.next_f32();
            if (rng.next_u64() % 1000) as f64 / 1000.0 < zeros {
                0.0
            } else {
                v + 0.5
            }
        })
        .collect();
    TensorData::new(values, [ELEMENTS])
}

fn throughput(c: &mut Criterion) {
    let mut group = c.benchmark_group("codec");
    group.throughput(Throughput::Bytes((4 * ELEMENTS) as u64));
    group.sample_size(20);
    let dense = tensor_with_zeros(0.0);
    group.bench_function("memcpy", |b| {
        let mut out = vec![0u8; dense.bytes.len()];
        b.iter(|| out.copy_from_slice(&dense.bytes))
    });
    for zeros in [0.0, 0.5, 0.9] {
        let data = tensor_with_zeros(zeros);
        let compressed = compress(&data).unwrap();
        group.bench_with_input(BenchmarkId::new("compress", zeros), &data, |b, d| {
            b.iter(|| compress(d).unwrap())
        });
        group.bench_with_input(
            BenchmarkId::new("decompress", zeros),
            &compressed,
            |b, c| b.iter(|| decompress(c).unwrap()),
        );
    }
    group.finish();
}

/// The ratio on ReLU activations of a forward pass: measured against ideal, printed.
fn relu_ratio(_c: &mut Criterion) {
    let device = FlexDevice;
    let mut rows = Vec::new();
    // The benches' MLP widths: x [256, 1024] through four 1024-wide layers with ReLU.
    let mut rng = XorShift::new(5);
    let mut x = Tensor::<Flex, 2>::from_data(
        TensorData::new(rng.vec_f32(256 * 1024, 1.0), [256, 1024]),
        &device,
    );
    for layer in 0..4 {
        let w = Tensor::<Flex, 2>::from_data(
            TensorData::new(rng.vec_f32(1024 * 1024, 0.05), [1024, 1024]),
            &device,
        );
        x = relu(x.matmul(w));
        rows.push((format!("mlp relu {layer}"), x.clone().into_data()));
    }
    // A conv layer's ReLU on image-like input.
    let images = Tensor::<Flex, 4>::from_data(
        TensorData::new(rng.vec_f32(8 * 8 * 32 * 32, 1.0), [8, 8, 32, 32]),
        &device,
    );
    rows.push(("images relu".into(), relu(images).into_data()));

    eprintln!(
        "\n{:<16} {:>10} {:>8} {:>8} {:>8}",
        "activation", "bytes", "zeros", "ratio", "ideal"
    );
    for (name, data) in rows {
        let c = compress(&data).unwrap();
        let zeros = data
            .bytes
            .chunks_exact(4)
            .filter(|e| e.iter().all(|&b| b == 0))
            .count() as f64
            / (data.bytes.len() / 4) as f64;
        let ratio = data.bytes.len() as f64 / c.bytes() as f64;
        let ideal = 4.0 / (0.125 + (1.0 - zeros) * 4.0);
        eprintln!(
            "{name:<16} {:>10} {:>7.1}% {:>8.3} {:>8.3}",
            data.bytes.len(),
            zeros * 100.0,
            ratio,
            ideal
        );
    }
}

criterion_group!(benches, throughput, relu_ratio, kernels);
criterion_main!(benches);

/// The kernels against a device-to-device copy of the same bytes, on `client`.
fn kernels_on<R: burn_swap::unstable::gpu::cubecl::Runtime>(
    c: &mut Criterion,
    name: &str,
    client: burn_swap::unstable::gpu::cubecl::prelude::ComputeClient<R>,
) {
    use burn_swap::unstable::kernels as zvc;
    let n = 4 << 20;
    let data = tensor_with_zeros(0.5);
    let input = client.create_from_slice(&data.bytes);
    let mut group = c.benchmark_group(format!("kernels_{name}"));
    group.throughput(Throughput::Bytes((4 * n) as u64));
    group.sample_size(10);
    group.bench_function("device_copy", |b| {
        b.iter(|| {
            let out = zvc::copy(&client, &input, n).unwrap();
            zvc::sync(&client).unwrap();
            out
        })
    });
    group.bench_function("compress_0.5", |b| {
        b.iter(|| {
            let c = zvc::compress(&client, &input, n, 4).unwrap();
            zvc::sync(&client).unwrap();
            c
        })
    });
    let compressed = zvc::compress(&client, &input, n, 4).unwrap();
    group.bench_function("decompress_0.5", |b| {
        b.iter(|| {
            let out = zvc::decompress(&client, &compressed).unwrap();
            zvc::sync(&client).unwrap();
            out
        })
    });
    group.finish();
}

fn kernels(c: &mut Criterion) {
    #[cfg(feature = "cuda")]
    {
        use burn_swap::unstable::gpu::cubecl::cuda::{CudaDevice, CudaRuntime};
        use burn_swap::unstable::gpu::cubecl::prelude::Runtime;
        let client = CudaRuntime::client(&CudaDevice::default());
        kernels_on::<CudaRuntime>(c, "cuda", client);
    }
    use cubecl::Runtime;
    use cubecl::wgpu::{WgpuDevice, WgpuRuntime};
    match std::panic::catch_unwind(|| WgpuRuntime::client(&WgpuDevice::DefaultDevice)) {
        Ok(client) => kernels_on::<WgpuRuntime>(c, "wgpu", client),
        Err(_) => eprintln!("no wgpu adapter: kernel benches skipped"),
    }
}
