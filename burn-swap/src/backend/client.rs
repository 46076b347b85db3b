//! The swap client: receives every op of one device from the router and hands it to the
//! engine.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use burn_backend::{DType, DTypeUsageSet, ExecutionError, Shape, TensorData, backend::DeviceOps};
use burn_ir::{BackendIr, OperationIr, TensorId, TensorIr};
use burn_router::{RouterTensor, Runner, RunnerClient};
use burn_std::future::DynFut;

use super::registry::{self, DeviceControl};
use crate::config::SwapConfig;
use crate::error::{ConfigError, SwapError};
use crate::exec::engine::Engine;
use crate::report::Report;
use crate::trace::Trace;

/// The router client of one device under [`crate::Swap`]. Cheap to clone; all clones share
/// one engine.
pub struct SwapClient<B: BackendIr> {
    shared: Arc<Shared<B>>,
}

pub(crate) struct Shared<B: BackendIr> {
    device: B::Device,
    runner: Runner<B>,
    engine: Mutex<Engine<B>>,
}

impl<B: BackendIr> Clone for SwapClient<B> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

/// Stops the current op with the error's message: Burn's ops cannot return errors.
#[cold]
#[track_caller]
pub(crate) fn fail(error: SwapError) -> ! {
    tracing::error!(%error, "burn-swap: cannot run the operation");
    panic!("{error}")
}

impl<B: BackendIr> SwapClient<B> {
    /// Creates the client of `device`, with the configuration given to [`crate::configure`]
    /// before, else the one from the environment.
    ///
    /// # Panics
    /// When no configuration was given and a `BURN_SWAP*` environment variable is malformed,
    /// or asks for a budget the backend cannot resolve: the first op on the device panics
    /// with the [`ConfigError`]'s message. Call [`SwapConfig::from_env`] first to get it as a
    /// value instead.
    pub(crate) fn new(device: &B::Device) -> Self {
        let runner = Runner::new(device.clone());
        let config = match registry::take_pending(device.id()) {
            Some(config) => Ok(config),
            None => SwapConfig::from_env(),
        };
        let resolved = config.and_then(|config| {
            let budget = resolve_budget::<B>(&config, device)?;
            Ok((config, budget))
        });
        let (config, budget) = match resolved {
            Ok(pair) => pair,
            Err(error) => fail(SwapError::Config(error)),
        };
        let client = Self {
            shared: Arc::new(Shared {
                device: device.clone(),
                runner: runner.clone(),
                engine: Mutex::new(Engine::new(runner, config, budget)),
            }),
        };
        registry::register(device.id(), Arc::new(client.clone()));
        client
    }

    pub(crate) fn engine(&self) -> MutexGuard<'_, Engine<B>> {
        // A panic inside the inner backend poisons the lock; the engine's state is updated
        // only after an op succeeds, so it stays consistent.
        self.shared
            .engine
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn take_handle(&self, tensor: &TensorIr) -> B::Handle {
        let result = self.engine().take_handle(tensor);
        result.unwrap_or_else(|e| fail(e))
    }

    pub(crate) fn register_handle(
        &self,
        handle: B::Handle,
        shape: Shape,
        dtype: DType,
    ) -> TensorId {
        let result = self.engine().register_handle(handle, shape, dtype);
        result.unwrap_or_else(|e| fail(e))
    }
}

fn resolve_budget<B: BackendIr>(
    config: &SwapConfig,
    device: &B::Device,
) -> Result<Option<u64>, ConfigError> {
    config.validate()?;
    config
        .budget
        .resolve(crate::exec::device_memory::<B>(device), &B::name(device))
}

impl<B: BackendIr> RunnerClient for SwapClient<B> {
    type Device = B::Device;

    /// Builds the output tensors in the engine's own pass over the op's outputs (Burn's
    /// default walks them once more).
    fn register(&self, op: OperationIr) -> Vec<RouterTensor<Self>> {
        let mut outputs = Vec::new();
        let result = {
            let mut engine = self.engine();
            let result = engine.run_op_with(op, |t| {
                outputs.push(RouterTensor::new(
                    t.id,
                    t.shape.clone(),
                    t.dtype,
                    self.clone(),
                ))
            });
            if result.is_err() {
                engine.abandon_op();
            }
            result
        };
        if let Err(error) = result {
            fail(error)
        }
        outputs
    }

    #[inline]
    fn register_op(&self, op: OperationIr) {
        let result = {
            let mut engine = self.engine();
            let result = engine.run_op(op);
            if result.is_err() {
                engine.abandon_op();
            }
            result
        };
        if let Err(error) = result {
            fail(error)
        }
    }

    fn read_tensor_async(&self, tensor: TensorIr) -> DynFut<Result<TensorData, ExecutionError>> {
        self.engine().read(tensor)
    }

    fn sync(&self) -> Result<(), ExecutionError> {
        self.shared.runner.sync()
    }

    fn create_empty_handle(&self) -> TensorId {
        self.shared.runner.create_empty_handle()
    }

    fn register_tensor_data(&self, data: TensorData) -> RouterTensor<Self> {
        let result = self.engine().register_data(data);
        let ir = result.unwrap_or_else(|e| fail(e));
        RouterTensor::new(ir.id, ir.shape, ir.dtype, self.clone())
    }

    fn device(&self) -> Self::Device {
        self.shared.device.clone()
    }

    fn seed(&self, seed: u64) {
        self.shared.runner.seed(seed)
    }

    fn dtype_usage(&self, dtype: DType) -> DTypeUsageSet {
        self.shared.runner.dtype_usage(dtype)
    }
}

impl<B: BackendIr> DeviceControl for SwapClient<B> {
    fn configure(&self, config: SwapConfig) -> Result<(), SwapError> {
        let budget = resolve_budget::<B>(&config, &self.shared.device)?;
        self.engine().reconfigure(config, budget)
    }

    fn report(&self) -> Report {
        let mut engine = self.engine();
        let period = engine.recorder.period();
        let iteration_peaks = engine.recorder.iteration_peaks();
        let c = engine.counters.clone();
        Report {
            backend: B::name(&self.shared.device),
            enabled: engine.config.enabled,
            policy: engine.config.policy.name().to_string(),
            eviction: format!("{:?}", engine.config.eviction).to_lowercase(),
            budget_bytes: if engine.config.enabled {
                engine.budget
            } else {
                None
            },
            current_bytes: c.resident,
            peak_bytes: c.peak,
            host_bytes: c.host,
            peak_host_bytes: c.peak_host,
            offloads: c.offloads,
            offloaded_bytes: c.offloaded_bytes,
            offload_seconds: c.offload_nanos as f64 * 1e-9,
            fetches: c.fetches,
            fetched_bytes: c.fetched_bytes,
            fetch_seconds: c.fetch_nanos as f64 * 1e-9,
            failed_offloads: c.failed_offloads,
            ops: c.ops,
            largest_op_bytes: c.largest_op,
            evictions: c.evictions,
            recomputes: c.recomputes,
            recompute_seconds: c.recompute_nanos as f64 * 1e-9,
            exposed_wait_ns: c.exposed_wait_nanos,
            planned_waits: c.planned_waits,
            device_memory_bytes: engine.device_memory,
            allocator: c.allocator,
            allocator_peak: c.allocator_peak,
            plans: c.plans,
            planning_seconds: c.planning_nanos as f64 * 1e-9,
            predicted_peak_bytes: c.predicted_peak,
            predicted_exposed_seconds: c.predicted_exposed_nanos.map(|n| n as f64 * 1e-9),
            planned_offloads: engine.program().map_or(0, |p| p.offloads),
            planned_recomputes: engine.program().map_or(0, |p| p.recomputes),
            compression: engine.config.compression.name().to_string(),
            raw_bytes: c.raw_bytes,
            moved_bytes: c.moved_bytes,
            compression_ratio: if c.moved_bytes == 0 {
                1.0
            } else {
                c.raw_bytes as f64 / c.moved_bytes as f64
            },
            compressed_offloads: c.compressed_offloads,
            device_compressed_offloads: c.device_compressed,
            device_decompressed_fetches: c.device_decompressed,
            codec_seconds: c.codec_nanos as f64 * 1e-9,
            compression_by_tensor: c.compression_by_tensor(),
            peers: engine.peers.as_ref().map_or_else(Vec::new, |p| p.stats()),
            peer_fallbacks: engine.peers.as_ref().map_or(0, |p| p.fallbacks()),
            period,
            iteration_peaks,
        }
    }

    fn memory(&self) -> crate::Memory {
        let engine = self.engine();
        crate::Memory {
            resident_bytes: engine.counters.resident,
            peak_bytes: engine.counters.peak,
            host_bytes: engine.counters.host,
            budget_bytes: if engine.config.enabled {
                engine.budget
            } else {
                None
            },
        }
    }

    fn reset_counters(&self) {
        let mut engine = self.engine();
        engine.counters.reset();
        if let Some(peers) = &engine.peers {
            peers.reset_counters();
        }
    }

    fn restart_trace(&self) {
        self.engine().restart_trace();
    }

    fn profile(&self) -> Option<crate::plan::profile::Profile> {
        let mut engine = self.engine();
        let trace = engine.recorder.trace()?;
        let links = engine.links();
        Some(crate::plan::profile::Profile::new(&trace, links))
    }

    fn measure_transfers(&self, sizes: &[u64]) -> Option<crate::plan::profile::Links> {
        self.engine().measure_transfers(sizes)
    }

    fn trace(&self) -> Option<Trace> {
        self.engine().recorder.trace()
    }

    fn trace_window(&self) -> Trace {
        self.engine().recorder.trace_all()
    }
}
