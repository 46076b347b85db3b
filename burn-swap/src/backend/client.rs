//! The swap client: receives every op of one device from the router and hands it to the
//! engine.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use burn_backend::{DType, DTypeUsageSet, ExecutionError, Shape, TensorData};
use burn_ir::{BackendIr, OperationIr, TensorId, TensorIr};
use burn_router::{RouterTensor, RunnerClient};
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
    shared: Arc<ClientState<B>>,
}

pub(crate) struct ClientState<B: BackendIr> {
    device: B::Device,
    engine: Mutex<Engine<B>>,
    /// Set when the inner backend panicked inside an op: the panic's message.
    broken: OnceLock<String>,
}

impl<B: BackendIr> Clone for SwapClient<B> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

/// Stops the current op with the error itself as the panic's payload: Burn's ops cannot
/// return errors. A caller can `catch_unwind` and `downcast_ref::<SwapError>()` it; the panic
/// hook burn-swap chains in front of the one in force prints its sentence.
#[cold]
#[track_caller]
pub(crate) fn fail(error: SwapError) -> ! {
    tracing::error!(%error, "burn-swap: cannot run the operation");
    install_panic_hook();
    std::panic::panic_any(error)
}

/// Chains, once, a panic hook in front of the one in force that prints a [`SwapError`]
/// payload as the standard hook prints a message (which it cannot do for a typed payload);
/// every other panic goes to the previous hook unchanged.
fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            match info.payload().downcast_ref::<SwapError>() {
                Some(error) => {
                    let thread = std::thread::current();
                    let name = thread.name().unwrap_or("<unnamed>");
                    let at = info
                        .location()
                        .map(|l| format!(" at {}:{}:{}", l.file(), l.line(), l.column()))
                        .unwrap_or_default();
                    // The standard hook's format, which it cannot apply to a typed payload.
                    let _ = std::io::Write::write_fmt(
                        &mut std::io::stderr(),
                        format_args!("\nthread '{name}' panicked{at}:\n{error}\n"),
                    );
                }
                None => previous(info),
            }
        }));
    });
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
        let config = match registry::config(registry::DeviceKey::of(device)) {
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
            shared: Arc::new(ClientState {
                device: device.clone(),
                engine: Mutex::new(Engine::new(device.clone(), config, budget)),
                broken: OnceLock::new(),
            }),
        };
        registry::register::<B>(registry::DeviceKey::of(device), Arc::new(client.clone()));
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

    /// Fails with [`SwapError::InnerBackendPanicked`] once the inner backend has panicked
    /// inside an op.
    pub(crate) fn check_usable(&self) {
        if let Some(message) = self.shared.broken.get() {
            fail(SwapError::InnerBackendPanicked {
                message: message.clone(),
            })
        }
    }

    /// Runs `f`, an op that reaches the inner backend: a panic out of it that is not one of
    /// burn-swap's typed errors came from inside the inner backend (or left the engine
    /// mid-op), so the device is marked unusable before the panic goes on.
    fn guarded<R>(&self, f: impl FnOnce() -> R) -> R {
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(value) => value,
            Err(payload) => {
                if payload.downcast_ref::<SwapError>().is_none() {
                    let message = payload
                        .downcast_ref::<&str>()
                        .map(|m| m.to_string())
                        .or_else(|| payload.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "no message".to_string());
                    tracing::error!(%message, "burn-swap: the inner backend panicked in an op");
                    let _ = self.shared.broken.set(message);
                }
                resume_unwind(payload)
            }
        }
    }

    pub(crate) fn take_handle(&self, tensor: &TensorIr) -> B::Handle {
        self.check_usable();
        let result = self.engine().take_handle(tensor);
        result.unwrap_or_else(|e| fail(e))
    }

    pub(crate) fn register_handle(
        &self,
        handle: B::Handle,
        shape: Shape,
        dtype: DType,
    ) -> TensorId {
        self.check_usable();
        let result = self.engine().register_handle(handle, shape, dtype);
        let id = result.unwrap_or_else(|e| fail(e));
        super::in_flight::made(id);
        id
    }
}

impl<B: BackendIr> SwapClient<B> {
    /// Runs `op`, an op that makes exactly one tensor, and returns that tensor:
    /// [`RunnerClient::register`] without its list of outputs, and with this client moved
    /// into the output rather than cloned for it (`backend/build.rs`).
    pub(crate) fn run_one(self, mut op: OperationIr) -> RouterTensor<Self> {
        let mut made = None;
        self.run_op_with(&mut op, |t| {
            made = Some((t.id, crate::exec::shape_of(&t.shape), t.dtype));
        });
        match made {
            Some((id, shape, dtype)) => RouterTensor::new(id, shape, dtype, self),
            None => no_single_output(&op),
        }
    }

    /// Runs `op` (not a drop) on the engine, `on_output` seeing each tensor it makes; an
    /// engine error abandons the op and fails it ([`fail`]).
    #[inline]
    fn run_op_with(&self, op: &mut OperationIr, on_output: impl FnMut(&TensorIr)) {
        self.check_usable();
        let result = self.guarded(|| {
            let mut engine = self.engine();
            let result = engine.run_op_with(op, on_output);
            if result.is_err() {
                engine.abandon_op();
            }
            result
        });
        if let Err(error) = result {
            fail(error)
        }
    }
}

/// A builder of `backend/build.rs` was given an op that makes no tensor: a bug in
/// burn-swap, not in its input.
#[cold]
#[inline(never)]
fn no_single_output(op: &OperationIr) -> ! {
    panic!("burn-swap: {op:?} was run as an op with one output, but made none")
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
    fn register(&self, mut op: OperationIr) -> Vec<RouterTensor<Self>> {
        // Most ops make one output: room for it up front (a push into an empty `Vec` takes
        // the slower growth path).
        let mut outputs = Vec::with_capacity(1);
        self.run_op_with(&mut op, |t| {
            outputs.push(RouterTensor::new(
                t.id,
                crate::exec::shape_of(&t.shape),
                t.dtype,
                self.clone(),
            ))
        });
        outputs
    }

    #[inline]
    fn register_op(&self, mut op: OperationIr) {
        if self.shared.broken.get().is_some() {
            // Tensors dropped after the inner backend panicked (while its panic unwinds, too)
            // leave nothing to free that an op could still reach.
            if matches!(op, OperationIr::Drop(_)) {
                return;
            }
            self.check_usable();
        }
        let is_drop = matches!(op, OperationIr::Drop(_));
        if let OperationIr::Drop(tensor) = &op
            && super::in_flight::must_wait(tensor.id)
        {
            // Inside an op of this thread, of a tensor the op did not make: the op may be
            // about to read it (`in_flight`); it goes once the op has ended.
            let client = self.clone();
            super::in_flight::hold_back(Box::new(move || client.register_op(op)));
            return;
        }
        let mut run = || {
            self.guarded(|| {
                let mut engine = self.engine();
                let result = engine.run_op_with(&mut op, |_| {});
                if result.is_err() {
                    engine.abandon_op();
                }
                result
            })
        };
        // A drop (the only op that reaches here outside `Swap`'s own methods) waits for the
        // ops other threads have begun: one of them may read this tensor (`in_flight`).
        let result = if is_drop {
            super::in_flight::drop_outside_ops(run)
        } else {
            run()
        };
        if let Err(error) = result {
            fail(error)
        }
    }

    fn read_tensor_async(&self, tensor: TensorIr) -> DynFut<Result<TensorData, ExecutionError>> {
        self.check_usable();
        self.guarded(|| self.engine().read(tensor))
    }

    fn sync(&self) -> Result<(), ExecutionError> {
        B::sync(&self.shared.device)
    }

    fn create_empty_handle(&self) -> TensorId {
        self.check_usable();
        let id = crate::exec::fresh_id();
        super::in_flight::made(id);
        id
    }

    fn register_tensor_data(&self, data: TensorData) -> RouterTensor<Self> {
        self.check_usable();
        let result = self.guarded(|| self.engine().register_data(data));
        let ir = result.unwrap_or_else(|e| fail(e));
        super::in_flight::made(ir.id);
        RouterTensor::new(ir.id, ir.shape, ir.dtype, self.clone())
    }

    fn device(&self) -> Self::Device {
        self.shared.device.clone()
    }

    fn seed(&self, seed: u64) {
        B::seed(&self.shared.device, seed)
    }

    fn dtype_usage(&self, dtype: DType) -> DTypeUsageSet {
        B::dtype_usage(&self.shared.device, dtype)
    }
}

impl<B: BackendIr> DeviceControl for SwapClient<B> {
    fn configure(&self, config: SwapConfig) -> Result<(), SwapError> {
        let budget = resolve_budget::<B>(&config, &self.shared.device)?;
        self.engine().reconfigure(config, budget)
    }

    fn report(&self) -> Report {
        let figures = self.engine().figures();
        figures.into_report(B::name(&self.shared.device))
    }

    fn memory(&self) -> crate::report::Memory {
        let mut engine = self.engine();
        let books = engine.books();
        crate::report::Memory {
            resident_bytes: books.resident,
            peak_bytes: books.peak,
            host_bytes: books.host,
            pinned_host_bytes: books.pinned,
            budget_bytes: engine.budget(),
        }
    }

    fn reset_counters(&self) {
        self.engine().reset_counters();
    }

    fn restart_trace(&self) {
        self.engine().restart_trace();
    }

    fn profile(&self) -> Option<crate::plan::profile::Profile> {
        self.engine().profile()
    }

    fn measure_transfers(&self, sizes: &[u64]) -> Option<crate::plan::profile::Links> {
        self.engine().measure_transfers(sizes)
    }

    fn forget_links(&self) {
        self.engine().forget_links();
    }

    fn trace(&self) -> Option<Trace> {
        self.engine().trace()
    }

    fn trace_window(&self) -> Trace {
        self.engine().trace_window()
    }

    fn hold_resident(&self) {
        self.engine().hold_resident();
    }

    fn allocator_cleanup(&self) {
        self.engine().allocator_cleanup();
    }
}
