//! Zero-value compression as CubeCL kernels, for CubeCL backends (CUDA, wgpu, ...): the same
//! format as [`crate::codec`] (a bitmask of `u32` words and the packed nonzero values),
//! computed on the device, on the client and stream that own the tensor.
//!
//! Compression runs four kernels over *mask words* (32 elements each; one unit per word,
//! 256 units per cube):
//!
//! 1. **count**: each unit builds its mask word and counts its nonzeros; the cube's total is
//!    added atomically to its block sum;
//! 2. **scan**: one cube turns the block sums into block offsets (exclusive prefix sum: each
//!    unit scans a stretch, unit 0 scans the stretches' totals);
//! 3. **compact**: each cube scans its units' counts in shared memory and each unit writes
//!    its nonzero elements at its offset. Elements narrower than a word (1 or 2 bytes) are
//!    merged into the zeroed output with atomic OR, so neighbours never race.
//!
//! Decompression counts from the bitmask (steps 1-2) and **scatters** the values back into a
//! zeroed output the same way. Elements are read and written as `u32` words, so buffers are
//! padded to whole words.

use cubecl::prelude::*;
use cubecl::server::Handle;

/// Units per cube: mask words per block.
const BLOCK: u32 = 256;

/// Loads element `i` of a buffer of `width`-byte elements as two words (`hi` is zero below 8
/// bytes).
#[allow(unused_assignments)]
#[cube]
fn load(input: &Array<u32>, i: usize, #[comptime] width: u32) -> (u32, u32) {
    let mut lo = 0u32;
    let mut hi = 0u32;
    if comptime![width == 8] {
        lo = input[2 * i];
        hi = input[2 * i + 1];
    } else if comptime![width == 4] {
        lo = input[i];
    } else if comptime![width == 2] {
        let word = input[i / 2];
        lo = (word >> (((i % 2) * 16) as u32)) & 0xffff;
    } else {
        let word = input[i / 4];
        lo = (word >> (((i % 4) * 8) as u32)) & 0xff;
    }
    (lo, hi)
}

/// Step 1 of compression: mask words, per-word counts and per-cube sums.
#[cube(launch)]
fn count_kernel(
    input: &Array<u32>,
    masks: &mut Array<u32>,
    counts: &mut Array<u32>,
    block_sums: &mut Array<Atomic<u32>>,
    n: usize,
    #[comptime] width: u32,
) {
    let t = ABSOLUTE_POS;
    if t < masks.len() {
        let mut mask = 0u32;
        for j in 0..32usize {
            let i = t * 32 + j;
            if i < n {
                let (lo, hi) = load(input, i, width);
                if (lo | hi) != 0 {
                    mask |= 1u32 << (j as u32);
                }
            }
        }
        masks[t] = mask;
        let c = mask.count_ones();
        counts[t] = c;
        block_sums[CUBE_POS].fetch_add(c);
    }
}

/// Step 1 of decompression: per-word counts and per-cube sums from the bitmask.
#[cube(launch)]
fn count_mask_kernel(
    masks: &Array<u32>,
    counts: &mut Array<u32>,
    block_sums: &mut Array<Atomic<u32>>,
) {
    let t = ABSOLUTE_POS;
    if t < masks.len() {
        let c = masks[t].count_ones();
        counts[t] = c;
        block_sums[CUBE_POS].fetch_add(c);
    }
}

/// Step 2: exclusive prefix sum of the block sums, by one cube of `BLOCK` units.
#[cube(launch)]
fn scan_kernel(block_sums: &Array<Atomic<u32>>, offsets: &mut Array<u32>) {
    let mut partial = SharedMemory::<u32>::new(256usize);
    let blocks = offsets.len();
    let u = UNIT_POS as usize;
    let stretch = blocks.div_ceil(256usize);
    let start = u * stretch;
    let mut total = 0u32;
    for k in 0..stretch {
        if start + k < blocks {
            total += block_sums[start + k].load();
        }
    }
    partial[u] = total;
    sync_cube();
    if u == 0 {
        let mut running = 0u32;
        for k in 0..256usize {
            let v = partial[k];
            partial[k] = running;
            running += v;
        }
    }
    sync_cube();
    let mut running = partial[u];
    for k in 0..stretch {
        if start + k < blocks {
            offsets[start + k] = running;
            running += block_sums[start + k].load();
        }
    }
}

/// The offset (in elements) of mask word `ABSOLUTE_POS`: its block's offset plus the counts
/// of the words before it in the block, scanned in shared memory.
#[cube]
fn word_offset(counts: &Array<u32>, offsets: &Array<u32>) -> u32 {
    let mut local = SharedMemory::<u32>::new(256usize);
    let t = ABSOLUTE_POS;
    let u = UNIT_POS as usize;
    let mut c = 0u32;
    if t < counts.len() {
        c = counts[t];
    }
    local[u] = c;
    sync_cube();
    if u == 0 {
        let mut running = 0u32;
        for k in 0..256usize {
            let v = local[k];
            local[k] = running;
            running += v;
        }
    }
    sync_cube();
    offsets[CUBE_POS] + local[u]
}

/// Step 3 for 4- and 8-byte elements: each word's nonzeros to their place.
#[cube(launch)]
fn compact_kernel(
    input: &Array<u32>,
    masks: &Array<u32>,
    counts: &Array<u32>,
    offsets: &Array<u32>,
    values: &mut Array<u32>,
    #[comptime] width: u32,
) {
    let base = word_offset(counts, offsets) as usize;
    let t = ABSOLUTE_POS;
    if t < masks.len() {
        let mask = masks[t];
        let mut pos = base;
        for j in 0..32usize {
            if (mask >> (j as u32)) & 1 == 1 {
                let (lo, hi) = load(input, t * 32 + j, width);
                if comptime![width == 8] {
                    values[2 * pos] = lo;
                    values[2 * pos + 1] = hi;
                } else {
                    values[pos] = lo;
                }
                pos += 1;
            }
        }
    }
}

/// Step 3 for 1- and 2-byte elements: merged into the zeroed output with atomic OR.
#[cube(launch)]
fn compact_packed_kernel(
    input: &Array<u32>,
    masks: &Array<u32>,
    counts: &Array<u32>,
    offsets: &Array<u32>,
    values: &mut Array<Atomic<u32>>,
    #[comptime] width: u32,
) {
    let base = word_offset(counts, offsets) as usize;
    let t = ABSOLUTE_POS;
    if t < masks.len() {
        let mask = masks[t];
        let mut pos = base;
        for j in 0..32usize {
            if (mask >> (j as u32)) & 1 == 1 {
                let (lo, _hi) = load(input, t * 32 + j, width);
                if comptime![width == 2] {
                    values[pos / 2].fetch_or(lo << (((pos % 2) * 16) as u32));
                } else {
                    values[pos / 4].fetch_or(lo << (((pos % 4) * 8) as u32));
                }
                pos += 1;
            }
        }
    }
}

/// Decompression for 4- and 8-byte elements: values back to their elements.
#[cube(launch)]
fn scatter_kernel(
    values: &Array<u32>,
    masks: &Array<u32>,
    counts: &Array<u32>,
    offsets: &Array<u32>,
    output: &mut Array<u32>,
    #[comptime] width: u32,
) {
    let base = word_offset(counts, offsets) as usize;
    let t = ABSOLUTE_POS;
    if t < masks.len() {
        let mask = masks[t];
        let mut pos = base;
        for j in 0..32usize {
            if (mask >> (j as u32)) & 1 == 1 {
                let i = t * 32 + j;
                if comptime![width == 8] {
                    output[2 * i] = values[2 * pos];
                    output[2 * i + 1] = values[2 * pos + 1];
                } else {
                    output[i] = values[pos];
                }
                pos += 1;
            }
        }
    }
}

/// Decompression for 1- and 2-byte elements, merged into the zeroed output.
#[cube(launch)]
fn scatter_packed_kernel(
    values: &Array<u32>,
    masks: &Array<u32>,
    counts: &Array<u32>,
    offsets: &Array<u32>,
    output: &mut Array<Atomic<u32>>,
    #[comptime] width: u32,
) {
    let base = word_offset(counts, offsets) as usize;
    let t = ABSOLUTE_POS;
    if t < masks.len() {
        let mask = masks[t];
        let mut pos = base;
        for j in 0..32usize {
            if (mask >> (j as u32)) & 1 == 1 {
                let i = t * 32 + j;
                if comptime![width == 2] {
                    let v = (values[pos / 2] >> (((pos % 2) * 16) as u32)) & 0xffff;
                    output[i / 2].fetch_or(v << (((i % 2) * 16) as u32));
                } else {
                    let v = (values[pos / 4] >> (((pos % 4) * 8) as u32)) & 0xff;
                    output[i / 4].fetch_or(v << (((i % 4) * 8) as u32));
                }
                pos += 1;
            }
        }
    }
}

/// A plain device-to-device copy of `words` words, one word per unit: the yardstick the
/// kernels' throughput is measured against.
#[cube(launch)]
fn copy_kernel(input: &Array<u32>, output: &mut Array<u32>) {
    if ABSOLUTE_POS < output.len() {
        output[ABSOLUTE_POS] = input[ABSOLUTE_POS];
    }
}

/// Copies `words` words of `input` into a new buffer (for the benches' yardstick).
pub fn copy<R: Runtime>(
    client: &ComputeClient<R>,
    input: &Handle,
    words: usize,
) -> Result<Handle, KernelError> {
    let output = client.empty(4 * words.max(1));
    let cubes = u32::try_from(words.div_ceil(BLOCK as usize))
        .ok()
        .filter(|&c| c <= 65_535)
        .ok_or(KernelError::TooLarge(words))?;
    let args = (arg(input, words)?, arg(&output, words)?);
    copy_kernel::launch::<R>(
        client,
        CubeCount::Static(cubes, 1, 1),
        CubeDim::new_1d(BLOCK),
        args.0,
        args.1,
    );
    Ok(output)
}

/// Waits until the client's queued work has run.
pub fn sync<R: Runtime>(client: &ComputeClient<R>) -> Result<(), KernelError> {
    cubecl::future::block_on(client.sync()).map_err(|e| KernelError::Read(format!("{e:?}")))
}

/// A tensor compressed on the device: the bitmask and the packed values, each in a buffer of
/// `u32` words.
pub struct DeviceCompressed {
    /// `ceil(n / 32)` mask words.
    pub masks: Handle,
    /// The packed values, padded to whole words (`ceil(nonzeros · width / 4)` words).
    pub values: Handle,
    /// Elements.
    pub n: usize,
    /// Bytes per element: 1, 2, 4 or 8.
    pub width: usize,
    /// Nonzero elements.
    pub nonzeros: usize,
}

/// Why a kernel could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// An element width the kernels do not handle.
    #[error("the zero-value kernels handle 1-, 2-, 4- and 8-byte elements, not {0}")]
    Width(usize),
    /// More mask-word blocks than one dispatch dimension allows.
    #[error("{0} elements exceed one dispatch of the zero-value kernels")]
    TooLarge(usize),
    /// A kernel argument longer than its buffer (a bug of ours: refused, not launched).
    #[error(transparent)]
    Overrun(crate::gpu::cubecl_calls::Overrun),
    /// A buffer could not be read back.
    #[error("reading a device buffer failed: {0}")]
    Read(String),
}

/// `words` words of `handle` as a kernel argument (checked against the buffer's size).
fn arg<R: Runtime>(handle: &Handle, words: usize) -> Result<ArrayArg<R>, KernelError> {
    crate::gpu::cubecl_calls::words(handle, words).map_err(KernelError::Overrun)
}

/// Words of a buffer holding `bytes` bytes.
fn words(bytes: usize) -> usize {
    bytes.div_ceil(4)
}

/// Reads buffers back, waiting for the kernels that write them.
fn read<R: Runtime>(
    client: &ComputeClient<R>,
    handles: Vec<Handle>,
) -> Result<Vec<cubecl::bytes::Bytes>, KernelError> {
    cubecl::future::block_on(client.read_async(handles))
        .map_err(|e| KernelError::Read(format!("{e:?}")))
}

fn zeros<R: Runtime>(client: &ComputeClient<R>, words: usize) -> Handle {
    client.create_from_slice(&vec![0u8; 4 * words.max(1)])
}

fn check(n: usize, width: usize) -> Result<u32, KernelError> {
    if !matches!(width, 1 | 2 | 4 | 8) {
        return Err(KernelError::Width(width));
    }
    let blocks = n.div_ceil(32).div_ceil(BLOCK as usize);
    u32::try_from(blocks)
        .ok()
        .filter(|&b| b <= 65_535)
        .ok_or(KernelError::TooLarge(n))
}

/// Mask-word counts, their block offsets, and the total, from step 1's outputs.
fn scan<R: Runtime>(
    client: &ComputeClient<R>,
    block_sums: &Handle,
    blocks: u32,
) -> Result<(Handle, usize), KernelError> {
    let offsets = zeros(client, blocks as usize);
    let (sums_arg, offsets_arg) = (
        arg(block_sums, blocks as usize)?,
        arg(&offsets, blocks as usize)?,
    );
    scan_kernel::launch::<R>(
        client,
        CubeCount::Static(1, 1, 1),
        CubeDim::new_1d(BLOCK),
        sums_arg,
        offsets_arg,
    );
    // The total: the last block's offset plus its sum.
    let last = read(client, vec![offsets.clone(), block_sums.clone()])?;
    let word = |bytes: &[u8], i: usize| {
        u32::from_le_bytes([
            bytes[4 * i],
            bytes[4 * i + 1],
            bytes[4 * i + 2],
            bytes[4 * i + 3],
        ])
    };
    let b = blocks as usize - 1;
    let total = word(&last[0], b) as usize + word(&last[1], b) as usize;
    Ok((offsets, total))
}

/// Compresses the `n` elements of `width` bytes in `input` (a buffer padded to whole words)
/// on its client.
pub fn compress<R: Runtime>(
    client: &ComputeClient<R>,
    input: &Handle,
    n: usize,
    width: usize,
) -> Result<DeviceCompressed, KernelError> {
    let blocks = check(n, width)?;
    let m = n.div_ceil(32);
    let masks = zeros(client, m);
    let counts = zeros(client, m);
    let block_sums = zeros(client, blocks as usize);
    let in_words = words(n * width);
    if m > 0 {
        let args = (
            arg(input, in_words)?,
            arg(&masks, m)?,
            arg(&counts, m)?,
            arg(&block_sums, blocks as usize)?,
        );
        count_kernel::launch::<R>(
            client,
            CubeCount::Static(blocks, 1, 1),
            CubeDim::new_1d(BLOCK),
            args.0,
            args.1,
            args.2,
            args.3,
            n,
            width as u32,
        );
    }
    let (offsets, nonzeros) = if m > 0 {
        scan(client, &block_sums, blocks)?
    } else {
        (zeros(client, 1), 0)
    };
    let value_words = words(nonzeros * width);
    let values = zeros(client, value_words);
    if nonzeros > 0 {
        let args = (
            arg(input, in_words)?,
            arg(&masks, m)?,
            arg(&counts, m)?,
            arg(&offsets, blocks as usize)?,
            arg(&values, value_words)?,
        );
        let (count, dim) = (CubeCount::Static(blocks, 1, 1), CubeDim::new_1d(BLOCK));
        if width >= 4 {
            compact_kernel::launch::<R>(
                client,
                count,
                dim,
                args.0,
                args.1,
                args.2,
                args.3,
                args.4,
                width as u32,
            );
        } else {
            compact_packed_kernel::launch::<R>(
                client,
                count,
                dim,
                args.0,
                args.1,
                args.2,
                args.3,
                args.4,
                width as u32,
            );
        }
    }
    Ok(DeviceCompressed {
        masks,
        values,
        n,
        width,
        nonzeros,
    })
}

/// Decompresses into a new buffer of `n · width` bytes padded to whole words.
pub fn decompress<R: Runtime>(
    client: &ComputeClient<R>,
    c: &DeviceCompressed,
) -> Result<Handle, KernelError> {
    let blocks = check(c.n, c.width)?;
    let m = c.n.div_ceil(32);
    let out_words = words(c.n * c.width);
    let output = zeros(client, out_words);
    if c.nonzeros == 0 {
        return Ok(output);
    }
    let counts = zeros(client, m);
    let block_sums = zeros(client, blocks as usize);
    let args = (
        arg(&c.masks, m)?,
        arg(&counts, m)?,
        arg(&block_sums, blocks as usize)?,
    );
    count_mask_kernel::launch::<R>(
        client,
        CubeCount::Static(blocks, 1, 1),
        CubeDim::new_1d(BLOCK),
        args.0,
        args.1,
        args.2,
    );
    let (offsets, _) = scan(client, &block_sums, blocks)?;
    let value_words = words(c.nonzeros * c.width);
    let args = (
        arg(&c.values, value_words)?,
        arg(&c.masks, m)?,
        arg(&counts, m)?,
        arg(&offsets, blocks as usize)?,
        arg(&output, out_words)?,
    );
    let (count, dim) = (CubeCount::Static(blocks, 1, 1), CubeDim::new_1d(BLOCK));
    if c.width >= 4 {
        scatter_kernel::launch::<R>(
            client,
            count,
            dim,
            args.0,
            args.1,
            args.2,
            args.3,
            args.4,
            c.width as u32,
        );
    } else {
        scatter_packed_kernel::launch::<R>(
            client,
            count,
            dim,
            args.0,
            args.1,
            args.2,
            args.3,
            args.4,
            c.width as u32,
        );
    }
    Ok(output)
}

/// Reads a device-compressed tensor back into the host format of
/// [`unstable::codec`](crate::unstable::codec).
pub fn to_host<R: Runtime>(
    client: &ComputeClient<R>,
    c: &DeviceCompressed,
    shape: Vec<usize>,
    dtype: burn_backend::DType,
) -> Result<crate::codec::Compressed, KernelError> {
    let bytes = read(client, vec![c.masks.clone(), c.values.clone()])?;
    let m = c.n.div_ceil(32);
    let bitmask = bytes[0][..4 * m]
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let values = bytes[1][..c.nonzeros * c.width].to_vec();
    Ok(crate::codec::Compressed {
        shape,
        dtype,
        bitmask,
        values,
    })
}

/// Uploads a host-compressed tensor for [`decompress`].
pub fn from_host<R: Runtime>(
    client: &ComputeClient<R>,
    c: &crate::codec::Compressed,
) -> Result<DeviceCompressed, KernelError> {
    let width = crate::codec::width(c.dtype).map_err(|_| KernelError::Width(0))?;
    let n = c.len();
    let mut mask_bytes: Vec<u8> = c.bitmask.iter().flat_map(|w| w.to_le_bytes()).collect();
    mask_bytes.resize(4 * n.div_ceil(32).max(1), 0);
    let mut value_bytes = c.values.clone();
    value_bytes.resize(4 * words(c.values.len()).max(1), 0);
    Ok(DeviceCompressed {
        masks: client.create_from_slice(&mask_bytes),
        values: client.create_from_slice(&value_bytes),
        n,
        width,
        nonzeros: c.values.len() / width,
    })
}

/// Kernel tests on CubeCL's wgpu runtime. With no adapter (no GPU and no software Vulkan
/// driver: `apt-get install mesa-vulkan-drivers`), they say so and pass, unless
/// `BURN_SWAP_REQUIRE_KERNELS=1` (set by `.ci/run`), where they fail.
#[cfg(test)]
mod tests;
