//! KV block layouts and the index math of the layout conversion (mirrored by `cuda/kernels.cu`).
//!
//! A KV block holds `num_layers × outer_dim` chunks (outer dim 2 for K/V, 1 for MLA). Engines
//! keep one chunk per (layer, outer) in their own tensors, in one of two orders:
//!
//! * **NHD**: `[block_size (tokens)][num_heads][head_dim]`
//! * **HND**: `[num_heads][block_size][head_dim]`
//!
//! The **universal** layout stores a whole block contiguously as
//! `[num_heads][num_layers][outer_dim][block_size][head_dim]`, so a reader with a different
//! tensor-parallel split can take a contiguous range of heads.
//!
//! The kernel does not move single elements. It moves *rows*: runs of bytes that are
//! contiguous on both sides. For NHD a row is one token of one head (`head_dim` elements), for
//! HND one head of the chunk (`block_size × head_dim` elements). [`RowPlan`] describes that split;
//! both layouts become "chunk row `r = t·H + h` goes to universal row
//! `((h·num_layers + l)·outer_dim + o)·T + t`", with `T = block_size, H = num_heads` for NHD and
//! `T = 1, H = num_heads` for HND.

use crate::KernelError;

/// Order of one per-(layer, outer) chunk of a KV block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlockLayout {
    /// `[tokens][heads][head_dim]` (vLLM's layer-separate caches).
    Nhd,
    /// `[heads][tokens][head_dim]` (FlashInfer-style caches).
    Hnd,
}

impl BlockLayout {
    /// Parses `"NHD"` or `"HND"` (any case); `argument` names the input in the error.
    pub fn parse(name: &str, argument: &str) -> Result<Self, KernelError> {
        match name.to_ascii_uppercase().as_str() {
            "NHD" => Ok(BlockLayout::Nhd),
            "HND" => Ok(BlockLayout::Hnd),
            _ => Err(KernelError::invalid(
                argument,
                format!("must be \"NHD\" or \"HND\", got {name:?}"),
            )),
        }
    }

    /// Value passed across the C ABI (`DK_LAYOUT_NHD` / `DK_LAYOUT_HND`).
    pub const fn abi(self) -> i32 {
        match self {
            BlockLayout::Nhd => 0,
            BlockLayout::Hnd => 1,
        }
    }
}

/// Element type of the KV cache. The conversion moves bytes, so only the size matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F16,
    Bf16,
    F32,
    /// Either FP8 format (E4M3 or E5M2).
    Fp8,
}

impl DType {
    pub const ALL: [DType; 4] = [DType::F16, DType::Bf16, DType::F32, DType::Fp8];

    pub const fn size(self) -> u32 {
        match self {
            DType::F16 | DType::Bf16 => 2,
            DType::F32 => 4,
            DType::Fp8 => 1,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::F32 => "f32",
            DType::Fp8 => "fp8",
        }
    }

    /// Parses `f16`, `bf16`, `f32` or `fp8`; `argument` names the input in the error.
    pub fn parse(name: &str, argument: &str) -> Result<Self, KernelError> {
        DType::ALL
            .into_iter()
            .find(|d| d.name() == name)
            .ok_or_else(|| {
                KernelError::invalid(
                    argument,
                    format!("must be one of \"f16\", \"bf16\", \"f32\", \"fp8\", got {name:?}"),
                )
            })
    }
}

/// Which way a conversion goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Gather the per-layer chunks of each block into its universal buffer.
    BlocksToUniversal,
    /// Scatter each universal buffer back into the block's per-layer chunks.
    UniversalToBlocks,
}

impl Direction {
    pub const fn abi(self) -> i32 {
        match self {
            Direction::BlocksToUniversal => 0,
            Direction::UniversalToBlocks => 1,
        }
    }
}

/// Shape of one KV block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LayoutSpec {
    pub layout: BlockLayout,
    pub dtype: DType,
    pub num_layers: u32,
    /// 2 for separate K and V, 1 for MLA.
    pub outer_dim: u32,
    /// Tokens per block (page size).
    pub block_size: u32,
    pub num_heads: u32,
    pub head_dim: u32,
}

/// Largest chunk the kernel handles: it indexes inside a chunk with 32-bit arithmetic.
pub const MAX_CHUNK_BYTES: u64 = u32::MAX as u64;

impl LayoutSpec {
    /// Chunks per block, `num_layers × outer_dim`.
    pub const fn chunks_per_block(&self) -> u64 {
        self.num_layers as u64 * self.outer_dim as u64
    }

    /// Bytes of one (layer, outer) chunk. Saturates on overflow (rejected by [`Self::validate`]).
    pub fn chunk_bytes(&self) -> u64 {
        [self.num_heads, self.head_dim, self.dtype.size()]
            .into_iter()
            .fold(u64::from(self.block_size), |acc, d| {
                acc.saturating_mul(u64::from(d))
            })
    }

    /// Bytes of one block in the universal layout. Saturates on overflow.
    pub fn universal_bytes(&self) -> u64 {
        self.chunk_bytes().saturating_mul(self.chunks_per_block())
    }

    /// Checks every dimension is at least 1 and a chunk fits the kernel's 32-bit indexing.
    pub fn validate(&self) -> Result<(), KernelError> {
        for (name, value) in [
            ("spec.num_layers", self.num_layers),
            ("spec.outer_dim", self.outer_dim),
            ("spec.block_size", self.block_size),
            ("spec.num_heads", self.num_heads),
            ("spec.head_dim", self.head_dim),
        ] {
            if value == 0 {
                return Err(KernelError::invalid(name, "must be at least 1, got 0"));
            }
        }
        let chunk = self.chunk_bytes();
        if chunk > MAX_CHUNK_BYTES {
            return Err(KernelError::invalid(
                "spec",
                format!(
                    "one chunk (block_size × num_heads × head_dim × {} bytes) would be {chunk} bytes; at most {MAX_CHUNK_BYTES} are supported",
                    self.dtype.size()
                ),
            ));
        }
        if self.universal_bytes() == u64::MAX {
            return Err(KernelError::invalid(
                "spec",
                "one universal block would exceed 2^64 bytes",
            ));
        }
        Ok(())
    }

    /// Element offset of `(token, head, dim)` inside a chunk, from the definitions of NHD/HND.
    pub fn chunk_element(&self, token: u64, head: u64, dim: u64) -> u64 {
        let (nt, nh, hd) = (
            u64::from(self.block_size),
            u64::from(self.num_heads),
            u64::from(self.head_dim),
        );
        match self.layout {
            BlockLayout::Nhd => (token * nh + head) * hd + dim,
            BlockLayout::Hnd => (head * nt + token) * hd + dim,
        }
    }

    /// Element offset of `(head, layer, outer, token, dim)` inside a universal block.
    pub fn universal_element(
        &self,
        head: u64,
        layer: u64,
        outer: u64,
        token: u64,
        dim: u64,
    ) -> u64 {
        let (nl, no, nt, hd) = (
            u64::from(self.num_layers),
            u64::from(self.outer_dim),
            u64::from(self.block_size),
            u64::from(self.head_dim),
        );
        (((head * nl + layer) * no + outer) * nt + token) * hd + dim
    }

    pub fn row_plan(&self) -> RowPlan {
        let es = u64::from(self.dtype.size());
        let (nt, nh, hd) = (
            u64::from(self.block_size),
            u64::from(self.num_heads),
            u64::from(self.head_dim),
        );
        match self.layout {
            BlockLayout::Nhd => RowPlan {
                token_rows: nt,
                heads: nh,
                row_bytes: hd * es,
                num_layers: u64::from(self.num_layers),
                outer_dim: u64::from(self.outer_dim),
            },
            BlockLayout::Hnd => RowPlan {
                token_rows: 1,
                heads: nh,
                row_bytes: nt * hd * es,
                num_layers: u64::from(self.num_layers),
                outer_dim: u64::from(self.outer_dim),
            },
        }
    }
}

/// A chunk seen as `token_rows × heads` rows of `row_bytes`, each contiguous in the chunk and in
/// the universal block (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowPlan {
    /// `T`: block_size for NHD, 1 for HND.
    pub token_rows: u64,
    /// `H`: num_heads.
    pub heads: u64,
    pub row_bytes: u64,
    pub num_layers: u64,
    pub outer_dim: u64,
}

impl RowPlan {
    pub fn rows(&self) -> u64 {
        self.token_rows * self.heads
    }

    /// Byte offset of chunk row `row` inside the chunk.
    pub fn chunk_offset(&self, row: u64) -> u64 {
        row * self.row_bytes
    }

    /// Byte offset, inside the universal block, of chunk row `row` of chunk `(layer, outer)`.
    pub fn universal_offset(&self, layer: u64, outer: u64, row: u64) -> u64 {
        let (token, head) = (row / self.heads, row % self.heads);
        (((head * self.num_layers + layer) * self.outer_dim + outer) * self.token_rows + token)
            * self.row_bytes
    }
}

/// Widths the layout kernel may use, widest first.
pub const LAYOUT_VECTOR_WIDTHS: [u32; 5] = [16, 8, 4, 2, 1];

/// The widest width (16/8/4/2/1) dividing both pointers and the row size, so every row of the
/// chunk starts aligned on both sides. Chosen per chunk.
pub const fn layout_vector_width(chunk_ptr: u64, universal_ptr: u64, row_bytes: u64) -> u32 {
    let bits = chunk_ptr | universal_ptr | row_bytes;
    if bits & 15 == 0 {
        16
    } else if bits & 7 == 0 {
        8
    } else if bits & 3 == 0 {
        4
    } else if bits & 1 == 0 {
        2
    } else {
        1
    }
}

/// A conversion that passed [`validate_conversion`].
#[derive(Debug, Clone, Copy)]
pub struct Conversion<'a> {
    pub blocks: &'a [u64],
    pub universal: &'a [u64],
    pub spec: LayoutSpec,
    pub direction: Direction,
}

impl Conversion<'_> {
    pub fn num_blocks(&self) -> usize {
        self.universal.len()
    }
}

/// Checks a conversion before anything touches memory: a valid spec, one universal buffer per
/// block, `num_layers × outer_dim` chunk pointers per block (ordered `[block][layer][outer]`),
/// no null pointer and no buffer running past the 64-bit address space.
pub fn validate_conversion<'a>(
    blocks: &'a [u64],
    universal: &'a [u64],
    spec: &LayoutSpec,
    direction: Direction,
) -> Result<Conversion<'a>, KernelError> {
    spec.validate()?;
    let per_block = spec.chunks_per_block();
    let expected = (universal.len() as u64).checked_mul(per_block);
    if expected != Some(blocks.len() as u64) {
        return Err(KernelError::invalid(
            "blocks",
            format!(
                "has {}; expected universal.length ({}) × num_layers ({}) × outer_dim ({}) = {} chunk pointers, ordered [block][layer][outer]",
                crate::copy::entries(blocks.len()),
                universal.len(),
                spec.num_layers,
                spec.outer_dim,
                expected.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string()),
            ),
        ));
    }
    for (name, ptrs, bytes) in [
        ("blocks", blocks, spec.chunk_bytes()),
        ("universal", universal, spec.universal_bytes()),
    ] {
        for (i, &ptr) in ptrs.iter().enumerate() {
            if ptr == 0 {
                return Err(KernelError::invalid(
                    format!("{name}[{i}]"),
                    "is a null pointer",
                ));
            }
            if ptr.checked_add(bytes).is_none() {
                return Err(KernelError::invalid(
                    format!("{name}[{i}]"),
                    format!("{ptr:#x} + {bytes} bytes runs past the 64-bit address space"),
                ));
            }
        }
    }
    Ok(Conversion {
        blocks,
        universal,
        spec: *spec,
        direction,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(layout: BlockLayout) -> LayoutSpec {
        LayoutSpec {
            layout,
            dtype: DType::Bf16,
            num_layers: 2,
            outer_dim: 2,
            block_size: 4,
            num_heads: 3,
            head_dim: 5,
        }
    }

    #[test]
    fn nhd_rows_are_one_head_of_one_token() {
        let plan = spec(BlockLayout::Nhd).row_plan();
        assert_eq!((plan.token_rows, plan.heads, plan.row_bytes), (4, 3, 10));
    }

    #[test]
    fn hnd_rows_are_one_whole_head() {
        let plan = spec(BlockLayout::Hnd).row_plan();
        assert_eq!((plan.token_rows, plan.heads, plan.row_bytes), (1, 3, 40));
    }

    #[test]
    fn layout_width_accounts_for_row_size() {
        assert_eq!(layout_vector_width(0x1000, 0x2000, 256), 16);
        assert_eq!(layout_vector_width(0x1000, 0x2000, 10), 2);
        assert_eq!(layout_vector_width(0x1000, 0x2000, 127), 1);
        assert_eq!(layout_vector_width(0x1004, 0x2000, 256), 4);
    }

    #[test]
    fn parses_names() {
        assert_eq!(
            BlockLayout::parse("hnd", "spec.layout").unwrap(),
            BlockLayout::Hnd
        );
        assert_eq!(DType::parse("bf16", "spec.dtype").unwrap(), DType::Bf16);
        let err = DType::parse("f64", "spec.dtype").unwrap_err();
        assert_eq!(err.argument(), Some("spec.dtype"));
    }
}
