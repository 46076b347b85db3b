//! A tensor's dimensions as the books keep them.

use burn_backend::Shape;

/// A tensor's dimensions, kept inline up to rank 6 so that recording a tensor copies a few
/// words instead of cloning a `Shape`; turned back into a `Shape` only when a tensor moves.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Dims {
    Inline { rank: u8, dims: [usize; 6] },
    Heap(Box<[usize]>),
}

impl Dims {
    #[inline]
    pub fn from_slice(dims: &[usize]) -> Self {
        if dims.len() <= 6 {
            let mut inline = [0; 6];
            inline[..dims.len()].copy_from_slice(dims);
            Dims::Inline {
                rank: dims.len() as u8,
                dims: inline,
            }
        } else {
            Dims::Heap(dims.into())
        }
    }

    pub fn as_slice(&self) -> &[usize] {
        match self {
            Dims::Inline { rank, dims } => &dims[..*rank as usize],
            Dims::Heap(dims) => dims,
        }
    }

    pub fn to_shape(&self) -> Shape {
        crate::exec::shape_of(self.as_slice())
    }
}
