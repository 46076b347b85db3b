//! What identifies an operation across iterations: its kind and its tensors' dtypes and
//! shapes, never their ids.

use burn_backend::DType;
use burn_ir::OperationIr;
use core::hash::{Hash, Hasher};
use core::mem::discriminant;

/// A small, fast, deterministic hasher (the Fx hash of rustc) for signatures.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// A key for the kind of an operation: its variant and the variant of the inner operation
/// enum (e.g. `NumericFloat` + `Add`). Dtypes and shapes are not part of it.
pub(crate) fn kind_key(op: &OperationIr) -> u64 {
    let mut h = FxHasher::default();
    discriminant(op).hash(&mut h);
    match op {
        OperationIr::BaseFloat(o) | OperationIr::BaseInt(o) | OperationIr::BaseBool(o) => {
            discriminant(o).hash(&mut h)
        }
        OperationIr::NumericFloat(_, o) | OperationIr::NumericInt(_, o) => {
            discriminant(o).hash(&mut h)
        }
        OperationIr::Bool(o) => discriminant(o).hash(&mut h),
        OperationIr::Int(o) => discriminant(o).hash(&mut h),
        OperationIr::Float(_, o) => discriminant(o).hash(&mut h),
        OperationIr::Module(o) => discriminant(o).hash(&mut h),
        OperationIr::Custom(o) => o.id.hash(&mut h),
        OperationIr::Init(_) | OperationIr::Drop(_) => {}
        #[allow(unreachable_patterns)]
        _ => {}
    }
    h.finish()
}

/// Adds one tensor's dtype and shape to an op's signature.
#[inline]
pub(crate) fn hash_tensor(h: &mut FxHasher, dtype: DType, dims: &[usize]) {
    discriminant(&dtype).hash(h);
    if let DType::Bool(store) = dtype {
        discriminant(&store).hash(h);
    }
    h.write_usize(dims.len());
    for &d in dims {
        h.write_usize(d);
    }
}

/// The key of a pseudo-op that is not an `OperationIr` (`Read`, `Arrive`, a native op).
pub(crate) fn name_key(name: &str) -> u64 {
    let mut h = FxHasher::default();
    h.write(name.as_bytes());
    h.write_u8(0xfe);
    h.finish()
}

/// A readable name for an operation kind, such as `NumericFloat.Add` or `Module.Conv2d`:
/// the chain of enum variants in its `Debug` form down to the first struct. Computed once per
/// kind, never on the per-op path.
pub(crate) fn kind_name(op: &OperationIr) -> String {
    match op {
        OperationIr::Drop(_) => return "Drop".to_string(),
        OperationIr::Init(_) => return "Init".to_string(),
        OperationIr::Custom(custom) => return format!("Custom.{}", custom.id),
        _ => {}
    }
    let text = format!("{op:?}");
    let bytes = text.as_bytes();
    let mut parts: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_alphabetic() {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let word = &text[start..i];
            match bytes.get(i) {
                Some(b'(') => parts.push(word),
                Some(b' ') if bytes.get(i + 1) == Some(&b'{') => break,
                _ => {}
            }
        } else if bytes[i] == b'{' {
            break;
        } else {
            i += 1;
        }
    }
    if parts.is_empty() {
        text.chars().take(32).collect()
    } else {
        parts.join(".")
    }
}
