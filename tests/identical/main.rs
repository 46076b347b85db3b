//! Training through `Swap` is the unwrapped backend's, bit for bit: models as users write them,
//! Burn's trainers and data-parallel training, every op family, views, quantized tensors,
//! compression, random op programs. One test binary (each file was one of its own: Burn is
//! linked once); its tests share the default device under `swap_device_lock` and the
//! backend's random generator under `rng_lock`.

mod bit_identical;
mod compression;
mod data_parallel;
mod learner;
mod op_coverage;
mod ordinary_models;
mod probe_models;
mod quantized;
mod random_programs;
mod trainers;
mod views;
