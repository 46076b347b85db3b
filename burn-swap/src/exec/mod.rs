//! Execution: the per-device engine that runs every op on the inner backend, keeps the
//! residency table and the counted bytes, and carries out offloads and fetches.
//!
//! The engine decides no policy: when an op would exceed the budget it asks
//! [`crate::plan::reactive`] which tensors to move, then moves them.

pub(crate) mod counters;
pub(crate) mod cubecl_fast_path;
mod dims;
pub(crate) mod engine;
pub mod faults;
pub(crate) mod figures;
mod host_buffer_pool;
mod interpreter;
mod link_probe;
pub(crate) use interpreter::fresh_id;
mod layout;
mod meter;
pub(crate) mod op_clock;
pub(crate) mod peers;
mod plans;
pub(crate) mod pools;
mod ports;
pub(crate) mod residency;
pub(crate) mod temporaries;
mod transfer;
mod transfer_error;

use burn_backend::{DType, Shape};

use crate::report::AllocatorUsage;

/// Bytes of a tensor of this shape and dtype, as burn-swap counts them.
#[inline]
pub(crate) fn bytes_of(shape: &Shape, dtype: DType) -> u64 {
    bytes_of_dims(shape.as_slice(), dtype)
}

/// [`bytes_of`] from the dimensions. A quantized tensor counts its stored values (packed
/// several to a word, or sub-byte values, as its scheme stores them) and its quantization
/// parameters (one per tensor or per block), which `DType::size` does not tell.
#[inline]
pub(crate) fn bytes_of_dims(dims: &[usize], dtype: DType) -> u64 {
    let elements = dims.iter().product::<usize>();
    match dtype {
        DType::QFloat(scheme) => quantized_bytes(dims, elements, &scheme),
        _ => (elements * dtype.size()) as u64,
    }
}

/// A `Shape` of `dims`. `Shape`'s own `Clone` (and its `From` a slice or a `Vec`) fills its
/// inline storage element by element through an iterator, about 60 instructions for a rank-2
/// shape, and an op's path makes a shape two or three times; this copies the words.
#[inline]
pub(crate) fn shape_of(dims: &[usize]) -> Shape {
    /// The dimensions `Shape` keeps inline (cubecl-zspace's `INLINE_DIMS`; `Shape::new_raw`
    /// takes the storage by that type, so a change there is a compile error here).
    const INLINE: usize = 5;
    let storage = if dims.len() <= INLINE {
        let mut inline = [0; INLINE];
        for (slot, dim) in inline.iter_mut().zip(dims) {
            *slot = *dim;
        }
        smallvec::SmallVec::from_buf_and_len(inline, dims.len())
    } else {
        smallvec::SmallVec::from_slice(dims)
    };
    Shape::new_raw(storage)
}

#[cold]
fn quantized_bytes(
    dims: &[usize],
    elements: usize,
    scheme: &burn_backend::quantization::QuantScheme,
) -> u64 {
    use burn_backend::quantization::{QuantLevel, QuantParam};
    let per_word = scheme.num_quants().max(1);
    let values = elements.div_ceil(per_word) * scheme.size_bits_stored().div_ceil(8);
    let params = match scheme.level {
        QuantLevel::Tensor => 1,
        QuantLevel::Block(block) => {
            let block = block.to_dim_vec(dims.len());
            dims.iter()
                .zip(block)
                .map(|(&d, b)| d.div_ceil((b as usize).max(1)))
                .product()
        }
    };
    let param_bytes = match scheme.param {
        QuantParam::F32 => 4,
        QuantParam::F16 | QuantParam::BF16 => 2,
        QuantParam::UE8M0 | QuantParam::UE4M3 => 1,
    };
    (values + params * param_bytes) as u64
}

/// Total memory of the device when the backend can tell it (CUDA). The others cannot, so a
/// budget given as a fraction of device memory is refused there with a typed error.
pub(crate) fn device_memory<B: burn_backend::Backend>(device: &B::Device) -> Option<u64> {
    cubecl_fast_path::total_memory::<B>(device)
}

/// The CUDA ordinal of `device`, when the inner backend is Burn's CUDA backend.
#[cfg(feature = "cuda")]
pub(crate) fn cuda_ordinal<B: burn_backend::Backend>(device: &B::Device) -> Option<usize> {
    cubecl_fast_path::cuda_ordinal::<B>(device)
}

/// The bandwidth of the link from `device` to CUDA device `peer` (a 64 MiB peer copy) and
/// the peer's free memory, when `device` is a CUDA device.
pub(crate) fn measure_peer<B: burn_backend::Backend>(
    device: &B::Device,
    peer: usize,
) -> Option<(f64, u64)> {
    #[cfg(feature = "cuda")]
    if let Some(home) = cuda_ordinal::<B>(device) {
        let bandwidth = crate::gpu::cuda::peer::measure(home, peer, 64 << 20).ok()?;
        let free = crate::gpu::cuda::peer::free_memory(peer).ok()?;
        return Some((bandwidth, free));
    }
    let _ = (device, peer);
    None
}

/// Asks the inner allocator to give its free pages back (CubeCL backends; nothing
/// elsewhere).
pub(crate) fn allocator_cleanup<B: burn_backend::Backend>(device: &B::Device) {
    let _ = cubecl_fast_path::allocator_cleanup::<B>(device);
}

/// The inner allocator's figures for the calling thread's stream on `device`, when the
/// backend is a CubeCL one (see [`cubecl_fast_path`]); `None` otherwise.
pub(crate) fn allocator_usage<B: burn_backend::Backend>(
    device: &B::Device,
) -> Option<AllocatorUsage> {
    cubecl_fast_path::allocator_usage::<B>(device)
}

/// The Flex device is one per process: unit tests that run ops on it through `Swap` take
/// turns (the ones here, and `backend/build.rs`'s).
#[cfg(test)]
pub(crate) fn device_lock() -> std::sync::MutexGuard<'static, ()> {
    static DEVICE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    DEVICE.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::device_lock;
    use super::faults::{self, Hook};
    use crate::{Swap, SwapConfig};
    use burn::backend::Flex;
    use burn::backend::flex::FlexDevice;
    use burn::tensor::{Tensor, TensorData};

    type S = Swap<Flex>;

    fn tensor(seed: f32, device: &FlexDevice) -> Tensor<S, 1> {
        let values: Vec<f32> = (0..256).map(|i| seed + i as f32 * 0.5).collect();
        Tensor::from_data(TensorData::new(values, [256]), device)
    }

    fn values(t: &Tensor<S, 1>) -> Vec<f32> {
        t.clone().into_data().to_vec().unwrap()
    }

    /// Two linear layers with ReLU trained with Adam; returns every step's loss bits and the
    /// final parameters' bytes.
    fn train<B: burn::tensor::backend::AutodiffBackend>(steps: usize) -> (Vec<u32>, Vec<u8>) {
        use burn::module::Module;
        use burn::nn::{Linear, LinearConfig, Relu};
        use burn::optim::{AdamConfig, GradientsParams, Optimizer};

        #[derive(burn::module::Module, Debug)]
        struct Net<B: burn::tensor::backend::Backend> {
            a: Linear<B>,
            b: Linear<B>,
            relu: Relu,
        }
        let device = Default::default();
        let mut net = Net::<B> {
            a: LinearConfig::new(256, 512).init(&device),
            b: LinearConfig::new(512, 8).init(&device),
            relu: Relu::new(),
        };
        // Deterministic weights without the backend's RNG: overwrite with fixed values.
        net = net.map(&mut Fill(0));
        let mut optimizer = AdamConfig::new().init::<B, Net<B>>();
        let mut losses = Vec::new();
        for step in 0..steps {
            let x: Vec<f32> = (0..256 * 128)
                .map(|i| (((i * 37 + step * 11) % 101) as f32 / 50.0) - 1.0)
                .collect();
            let x = Tensor::<B, 2>::from_data(TensorData::new(x, [128, 256]), &device);
            let y = net.b.forward(net.relu.forward(net.a.forward(x)));
            let loss = y.clone().mul(y).mean();
            losses.push(loss.clone().into_data().to_vec::<f32>().unwrap()[0].to_bits());
            let grads = GradientsParams::from_grads(loss.backward(), &net);
            net = optimizer.step(1e-2, net, grads);
        }
        let mut bytes = net.a.weight.val().into_data().bytes.to_vec();
        bytes.extend_from_slice(&net.b.weight.val().into_data().bytes);
        (losses, bytes)
    }

    struct Fill(u32);

    impl<B: burn::tensor::backend::Backend> burn::module::ModuleMapper<B> for Fill {
        fn map_float<const D: usize>(
            &mut self,
            param: burn::module::Param<Tensor<B, D>>,
        ) -> burn::module::Param<Tensor<B, D>> {
            let (id, tensor, mapper) = param.consume();
            let n = tensor.shape().num_elements();
            let shape = tensor.shape();
            self.0 += 1;
            let seed = self.0;
            let values: Vec<f32> = (0..n)
                .map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ seed) % 1000)
                .map(|v| v as f32 / 10_000.0 - 0.05)
                .collect();
            let filled = Tensor::from_data(TensorData::new(values, shape), &tensor.device());
            burn::module::Param::from_mapped_value(id, filled, mapper)
        }
    }

    /// Training under a planned policy with randomised delays on the copy side (transfers
    /// report up to 300 µs late): no value changes, the budget holds. (On this small net the
    /// plan's offloads cannot be hidden, so most moves are the reactive fallback's; the
    /// workers' own ordering is stressed by the next test.)
    #[test]
    fn randomised_transfer_delays_change_no_value() {
        use burn::backend::Autodiff;
        let _guard = device_lock();
        let device = FlexDevice;
        let plain = train::<Autodiff<Flex>>(12);
        crate::configure(&device, SwapConfig::default()).unwrap();
        crate::restart_trace(&device);
        crate::reset_counters(&device);
        assert_eq!(train::<Autodiff<S>>(12), plain);
        let report = crate::report(&device).unwrap();
        let (peak, largest) = (report.memory.peak_bytes, report.workload.largest_op_bytes);

        // Budgets between the largest op and the peak (this small net's peak is mostly its
        // largest op).
        for (max_micros, fraction) in [(0, 0.9), (300, 0.9), (300, 0.7)] {
            let budget = largest + ((peak - largest) as f64 * fraction) as u64;
            crate::configure(
                &device,
                SwapConfig::budget_bytes(budget)
                    .with_policy(crate::Policy::OffloadOnly)
                    .with_transfer_jitter(max_micros)
                    // Planned on the op thread: a planner thread slowed by a loaded machine
                    // delivered no plan within the 12 steps.
                    .with_background_planning(false),
            )
            .unwrap();
            crate::restart_trace(&device);
            crate::reset_counters(&device);
            let swapped = train::<Autodiff<S>>(12);
            let report = crate::report(&device).unwrap();
            assert_eq!(swapped, plain, "delays up to {max_micros} µs at {fraction}");
            assert!(report.memory.peak_bytes <= budget, "{report}");
            assert!(report.plan.plans > 0, "{report}");
            assert!(
                report.transfers.offloads > 0 && report.transfers.fetches > 0,
                "{report}"
            );
        }
        crate::configure(&device, SwapConfig::default()).unwrap();
    }

    /// Offloads and prefetches in flight on the workers, reporting in random order and late,
    /// interleaved with reads that must wait for them: every value comes back, and the books
    /// (resident plus host bytes) always add up.
    #[test]
    fn transfers_in_flight_under_random_delays_keep_every_value() {
        use burn_ir::TensorIr;
        let mut engine = super::engine::Engine::<Flex>::new(
            FlexDevice,
            SwapConfig::default().with_transfer_jitter(200),
            None,
        );
        let tensors: Vec<(TensorIr, Vec<f32>)> = (0..12)
            .map(|k| {
                let values: Vec<f32> = (0..1000 + 64 * k).map(|i| (i * 7 + k) as f32).collect();
                let data = TensorData::new(values.clone(), [values.len()]);
                (engine.register_data(data).unwrap(), values)
            })
            .collect();
        let total: u64 = tensors
            .iter()
            .map(|(t, _)| 4 * t.shape.num_elements() as u64)
            .sum();
        for round in 0..6 {
            for (i, (t, _)) in tensors.iter().enumerate() {
                match (i + round) % 3 {
                    0 => engine.seams().start_offload(t.id),
                    1 => engine.seams().start_prefetch(t.id),
                    _ => {}
                }
            }
            let books = engine.books();
            assert_eq!(books.resident + books.host, total, "round {round}");
            for (i, (t, values)) in tensors.iter().enumerate() {
                if (i + round) % 4 == 0 {
                    assert_eq!(&read(&mut engine, t), values, "round {round}");
                }
            }
        }
        engine.seams().set_jitter(0);
        engine.seams().settle_all();
        let books = engine.books();
        assert_eq!(books.resident + books.host, total);
        for (t, values) in &tensors {
            assert_eq!(&read(&mut engine, t), values);
        }
    }

    /// A budget with a few KiB free is measured by the probe's small sizes: its plans move
    /// small tensors, whose copies are mostly hand-over and latency, and a plan made without
    /// links would take them as instant.
    #[test]
    fn a_budget_with_a_few_kib_free_has_its_links_measured() {
        let (mut engine, tensors) = budgeted_engine(2 * 4000 + 3000, 2, 1000);
        let links = engine
            .link_meter()
            .links()
            .expect("probed in 3,000 bytes of headroom");
        let sizes: Vec<u64> = links.to_host.iter().map(|s| s.bytes).collect();
        assert_eq!(sizes, [256, 1024]);
        assert!(links.to_host.iter().all(|s| s.seconds > 0.0));
        assert!(
            links.on_thread.is_some(),
            "the op thread's copies measured too"
        );
        assert_eq!(
            engine.seams().resident(),
            8000,
            "the probe's tensors are gone"
        );
        assert_eq!(read(&mut engine, &tensors[1]), vec![1.0; 1000]);
    }

    /// The link probe runs on the send worker, beside the ops: the op's thread queues it and
    /// goes on, the probe's largest temporary tensor counted in the books until its copies
    /// are made (polled before each op, or waited for).
    #[test]
    fn the_link_probe_runs_beside_the_ops_its_temporaries_counted() {
        let (mut engine, tensors) = budgeted_engine(2 * 4000 + 3000, 2, 1000);
        assert!(!engine.seams().links_known(), "queued, not measured here");
        assert_eq!(
            engine.seams().resident(),
            8000 + 1024,
            "the largest probe size lent"
        );
        assert_eq!(read(&mut engine, &tensors[0]), vec![0.0; 1000]);
        let links = engine.link_meter().links().expect("the probe reported");
        assert_eq!(links.to_host.len(), 2);
        assert!(
            links.on_thread.is_some(),
            "the hand-over measured on the worker"
        );
        assert_eq!(engine.seams().resident(), 8000, "taken back");
        assert!(engine.seams().links_known(), "kept");
    }

    /// An op that needs the room the link probe's temporaries hold waits for the probe's
    /// report rather than failing: every other tensor is held on the device here, so only
    /// the probe's bytes can make the room.
    #[test]
    fn room_the_link_probe_holds_is_waited_for_not_refused() {
        let (mut engine, tensors) = budgeted_engine(2 * 4000 + 3000, 2, 1000);
        engine.hold_resident();
        assert!(!engine.seams().links_known());
        assert_eq!(engine.seams().resident(), 8000 + 1024);
        let values: Vec<f32> = (0..725).map(|i| i as f32).collect();
        let late = engine
            .register_data(TensorData::new(values.clone(), [725]))
            .expect("room made once the probe reported");
        assert_eq!(engine.seams().resident(), 8000 + 2900);
        assert_eq!(read(&mut engine, &late), values);
        assert_eq!(read(&mut engine, &tensors[1]), vec![1.0; 1000]);
    }

    /// A budget kept full leaves no headroom for the link probe's temporary tensors: the
    /// links are then those the workers' own copies showed, the fastest copy per size class
    /// and direction (none before a copy each way; a plan would take copies as instant).
    #[test]
    fn links_are_learned_from_the_copies_made_when_no_probe_fits() {
        // Four tensors of 1,800 bytes: 100 bytes of headroom, 1,900 with one offloaded, where
        // the probe needs 2 KiB.
        let (mut engine, tensors) = budgeted_engine(4 * 1800 + 100, 4, 450);
        assert_eq!(engine.link_meter().links(), None, "no copy made yet");
        engine.seams().start_offload(tensors[0].id);
        engine.seams().settle_all();
        assert_eq!(engine.link_meter().links(), None, "no copy back yet");
        engine.seams().start_prefetch(tensors[0].id);
        engine.seams().settle_all();
        let links = engine
            .link_meter()
            .links()
            .expect("learned from the two copies");
        assert_eq!(links.to_host[0].bytes, 1800);
        assert_eq!(links.to_device[0].bytes, 1800);
        assert!(links.to_host[0].seconds > 0.0 && links.to_device[0].seconds > 0.0);
        assert_eq!(links.on_thread, None);
        assert_eq!(read(&mut engine, &tensors[0]), vec![0.0; 450]);
    }

    /// The reactive policy chooses what leaves by the same scores whether or not links were
    /// measured (the planned policy measures them for its first plan, then falls back on the
    /// reactive policy wherever no plan is followed). Two engines under the reactive policy,
    /// one keeping links as a measurement keeps them: 100 µs a copy at 10 GB/s, a
    /// latency-to-bandwidth ratio ten times the default model's (as a worker's hand-over
    /// makes on a host-memory backend: 54 µs at 26 GB/s measured on `swap-bench`'s LSTM). A
    /// 4 KiB tensor last used many ops ago against a 4 MiB one used by the last op, and room
    /// for 4 KiB more: their staleness ratio is set between the ratios at which each model
    /// ranks the small one first. On both engines the small one leaves, as the default model
    /// says; with the links' model scoring, the other engine sent the 4 MiB one (checked).
    #[test]
    fn the_reactive_choice_does_not_depend_on_the_links_measured() {
        use crate::config::Policy;
        use crate::plan::profile::{CopySample, Links};
        use crate::plan::reactive::LinkModel;
        let (small, large, tiny) = (1usize << 10, 1usize << 20, 16usize);
        let budget = 4 * (small + large + tiny) as u64 + 4 * small as u64 - 1;
        let engine = || {
            super::engine::Engine::<Flex>::new(
                FlexDevice,
                SwapConfig::budget_bytes(budget).with_policy(Policy::Reactive),
                Some(budget),
            )
        };
        let (mut measured, mut unmeasured) = (engine(), engine());
        let samples: Vec<CopySample> = [1u64 << 10, 1 << 20]
            .into_iter()
            .map(|bytes| CopySample {
                bytes,
                seconds: 100e-6 + bytes as f64 / 10e9,
            })
            .collect();
        let links = Links {
            to_host: samples.clone(),
            to_device: samples,
            on_thread: None,
        };
        let model = links.link_model().expect("two sizes fit a line");
        measured.seams().keep_links(links);
        // The ratio of the large tensor's DTR score to the small one's at equal staleness
        // (bytes over a round trip's cost): the small one leaves first once it is that many
        // times staler.
        let ratio = |m: &LinkModel| {
            let score = |floats: usize| (4 * floats) as f64 / m.round_trip(4 * floats as u64);
            score(large) / score(small)
        };
        let (default, kept) = (ratio(&LinkModel::default()), ratio(&model));
        assert!(kept > 2.0 * default, "ratios {kept:.1} and {default:.1}");
        // Staleness when room is made: the small tensor's `m + 3` ops against the large
        // one's 2 (the tiny one is read in between to move the op clock on).
        let m = (2.0 * (kept * default).sqrt() - 3.0).round() as usize;
        let mut resident = Vec::new();
        for engine in [&mut measured, &mut unmeasured] {
            let filler = |e: &mut super::engine::Engine<Flex>, floats: usize| {
                e.register_data(TensorData::new(vec![1f32; floats], [floats]))
                    .unwrap()
            };
            let stale = filler(engine, small);
            let ticker = filler(engine, tiny);
            read(engine, &stale);
            let fresh = filler(engine, large);
            for _ in 0..m {
                read(engine, &ticker);
            }
            read(engine, &fresh);
            filler(engine, small);
            resident.push(engine.seams().resident());
        }
        let small_left = 4 * (small + large + tiny) as u64;
        assert_eq!(
            resident,
            [small_left, small_left],
            "the small tensor leaves on both engines ({m} reads between, score ratios: \
             default {default:.1}, the links' model {kept:.1})"
        );
    }

    /// An engine on Flex under `budget` bytes with `count` tensors of `floats` f32 each
    /// registered, tensor `k` filled with `k`.
    fn budgeted_engine(
        budget: u64,
        count: usize,
        floats: usize,
    ) -> (super::engine::Engine<Flex>, Vec<burn_ir::TensorIr>) {
        let mut engine = super::engine::Engine::<Flex>::new(
            FlexDevice,
            SwapConfig::budget_bytes(budget),
            Some(budget),
        );
        let tensors = (0..count)
            .map(|k| {
                let data = TensorData::new(vec![k as f32; floats], [floats]);
                engine.register_data(data).unwrap()
            })
            .collect();
        (engine, tensors)
    }

    /// A read-only read of `t` through the engine.
    fn read(engine: &mut super::engine::Engine<Flex>, t: &burn_ir::TensorIr) -> Vec<f32> {
        let read = burn_ir::TensorIr {
            status: burn_ir::TensorStatus::ReadOnly,
            ..t.clone()
        };
        let data = burn_std::reader::try_read_sync(engine.read(read))
            .unwrap()
            .unwrap();
        data.to_vec::<f32>().unwrap()
    }

    /// An engine on Flex whose transfers are held by a jitter of up to 4 ms, with `n` tensors
    /// of 64 floats registered: their ids, and the nanoseconds their offloads are held in
    /// all (more than none).
    fn jittered_tensors(n: usize) -> (super::engine::Engine<Flex>, Vec<burn_ir::TensorId>, u64) {
        let max = 4_000;
        let mut engine = super::engine::Engine::<Flex>::new(
            FlexDevice,
            SwapConfig::default().with_transfer_jitter(max),
            None,
        );
        let ids: Vec<_> = (0..n)
            .map(|k| {
                let data = TensorData::new(vec![k as f32; 64], [64]);
                engine.register_data(data).unwrap().id
            })
            .collect();
        let expected: u64 = ids
            .iter()
            .map(|id| super::transfer::jitter_micros(id.value(), max) * 1_000)
            .sum();
        assert!(expected > 0);
        (engine, ids, expected)
    }

    /// On a backend whose tensors live in host memory (Flex), a transfer worker's copies
    /// take the CPU the ops run on: their time is charged to the clock iterations are
    /// measured by (`exec::meter`), so that a plan moving more bytes than the fallback is
    /// judged by it though no op waits. Each copy is charged the CPU time of the fastest copy
    /// of its size seen, not the time it lasted: here the jitter stretches copies of the
    /// same size, the fastest first, by its delays. The stretch is not charged: the old
    /// charge, the time each lasted, was at least the sum of the delays. (Not half of it: on
    /// a loaded machine the fastest copy's own wake-up can stretch it by milliseconds, and
    /// every later copy is charged at most that; 18.1 ms of 20.9 ms once in a full run.)
    #[test]
    fn worker_copies_on_a_host_memory_backend_are_charged_their_cpu_time() {
        let (mut engine, mut ids, _) = jittered_tensors(16);
        let delay = |id: &burn_ir::TensorId| super::transfer::jitter_micros(id.value(), 4_000);
        ids.sort_by_key(delay);
        // The fastest, then the seven slowest.
        ids.drain(1..9);
        let fastest = delay(&ids[0]) * 1_000;
        let lasted: u64 = ids.iter().map(|id| delay(id) * 1_000).sum();
        assert!(
            lasted > 2 * 8 * (fastest + 500_000),
            "the jitter's delays are too even to tell the charges apart: {lasted} ns"
        );
        let before = engine.seams().spent_nanos();
        for &id in &ids {
            engine.seams().start_offload(id);
        }
        engine.seams().settle_all();
        let charged = engine.seams().spent_nanos() - before;
        assert!(
            charged >= 8 * fastest,
            "{charged} ns charged: each copy at least the fastest's {fastest} ns"
        );
        assert!(
            charged < lasted,
            "{charged} ns charged for copies that lasted {lasted} ns: the stretch was charged"
        );
    }

    /// The jitter is really applied: each offload reports no sooner than its own delay.
    #[test]
    fn transfer_jitter_holds_each_transfer_its_own_delay() {
        let (mut engine, ids, expected) = jittered_tensors(6);
        for &id in &ids {
            engine.seams().start_offload(id);
        }
        engine.seams().settle_all();
        assert!(
            engine.seams().offload_nanos() >= expected,
            "{} ns reported, {expected} ns of jitter",
            engine.seams().offload_nanos()
        );
        let books = engine.books();
        assert_eq!((books.resident, books.host), (0, 6 * 64 * 4));
    }

    /// The window burn-router's holder count leaves open, made on one thread: an op has read
    /// the count of its input (two holders: the input is read, not consumed), then the last
    /// other holder goes, as when another thread lets go of its clone at that moment. The
    /// drop, inside the op, is held back until the op has ended: the op finds its input, and
    /// the tensor goes after it. A value the op makes and drops itself goes at once.
    #[test]
    fn a_drop_inside_an_op_of_a_tensor_from_before_it_waits_for_the_op() {
        use crate::backend::in_flight::Op;
        let _guard = device_lock();
        let device = FlexDevice;
        crate::configure(&device, SwapConfig::default()).unwrap();
        let t = tensor(3.0, &device);
        let expected = values(&t);
        let client = t.clone().into_primitive().tensor().client.clone();
        let resident = || crate::memory(&device).unwrap().resident_bytes;
        let before = resident();
        let read = {
            let _op = Op::enter();
            // Counted with another holder there: read-only.
            let ir = t.clone().into_primitive().tensor().into_ir();
            assert_eq!(ir.status, burn_ir::TensorStatus::ReadOnly);
            // The other holder goes inside the op: held back.
            drop(t);
            assert_eq!(resident(), before, "the tensor stayed for the op");
            // A value made inside the op and let go of there goes at once.
            let made = tensor(5.0, &device);
            let with_made = resident();
            drop(made);
            assert_eq!(resident(), before, "the op's own value went at once");
            assert!(with_made > before);
            burn_std::reader::try_read_sync(burn_router::RunnerClient::read_tensor_async(
                &client, ir,
            ))
            .unwrap()
            .unwrap()
        };
        assert_eq!(read.to_vec::<f32>().unwrap(), expected);
        assert_eq!(resident(), before - 256 * 4, "gone once the op ended");
    }

    #[test]
    fn failed_offloads_never_lose_data() {
        let _guard = device_lock();
        let device = FlexDevice;
        // Four tensors of 1 KiB fit; the fifth needs one offloaded.
        crate::configure(&device, SwapConfig::budget_bytes(4 * 1024)).unwrap();
        let kept: Vec<Tensor<S, 1>> = (0..4).map(|i| tensor(i as f32, &device)).collect();
        let expected: Vec<Vec<f32>> = kept.iter().map(values).collect();
        crate::reset_counters(&device);

        // The first choice fails: it stays resident and the next candidate goes instead.
        faults::force(Hook::OffloadRead, 1);
        let fifth = tensor(10.0, &device);
        let report = crate::report(&device).unwrap();
        assert_eq!(report.transfers.failed_offloads, 1);
        assert_eq!(report.transfers.offloads, 1);
        assert!(report.memory.peak_bytes <= 4 * 1024);

        // Every offload fails: the op cannot get room and fails with the transfer error,
        // and no tensor loses a value.
        faults::force(Hook::OffloadRead, u64::MAX);
        let failed = std::panic::catch_unwind(|| tensor(20.0, &FlexDevice));
        faults::force(Hook::OffloadRead, 0);
        let payload = failed.expect_err("no room without offloads");
        let error = payload
            .downcast_ref::<crate::SwapError>()
            .expect("the panic carries the SwapError");
        assert!(
            matches!(error, crate::SwapError::OffloadFailed { bytes: 1024, .. }),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(message.contains("offload of tensor"), "{message}");
        assert!(
            message.contains("injected offload read failure"),
            "{message}"
        );

        crate::configure(&device, SwapConfig::default()).unwrap();
        for (t, want) in kept.iter().zip(&expected) {
            assert_eq!(&values(t), want);
        }
        assert_eq!(values(&fifth)[0], 10.0);
    }
}
