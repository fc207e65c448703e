//! The plan of one matrix multiplication in a ggml host: the byte layout of ggml's work buffer
//! (`wdata`) and the split of the rows into chunks for its threads.
//!
//! The work buffer, from its start:
//!
//! ```text
//! [up to 63 bytes to reach a 64-byte boundary]
//! [packed activations of all columns (act_pack::packed_size), rounded up to 64 bytes]
//! [per thread: one column's Q8_K blocks (ceil(k/256) x 292 bytes), rounded up to 64 bytes,
//!  then 256 floats for the zero-padded last block when k % 256 != 0]
//! ```

use crate::format::{BlockQ8K, QK_K};
use crate::Error;
use core::mem::size_of;

/// Alignment of the work buffer's parts.
pub const WORK_ALIGN: usize = 64;

fn round_up(n: usize, a: usize) -> Option<usize> {
    n.checked_next_multiple_of(a)
}

/// The work buffer of one matrix multiplication with activation rows of `k` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkPlan {
    /// Q8_K blocks per column (the last one zero-padded when `k % 256 != 0`).
    pub nq: usize,
    /// Bytes of one column's Q8_K blocks.
    pub q8_row: usize,
    /// Bytes of the packed activations.
    pub packed: usize,
    /// Bytes of one thread's scratch.
    pub scratch: usize,
    /// Whether a thread's scratch ends in 256 floats of padding (`k % 256 != 0`).
    pub padded: bool,
}

impl WorkPlan {
    /// The plan for rows of `k` values whose packed activations take `packed` bytes.
    ///
    /// # Errors
    /// [`Error::Shape`] when a size overflows.
    pub fn new(k: usize, packed: usize) -> Result<Self, Error> {
        let nq = k.div_ceil(QK_K);
        let q8_row = nq.checked_mul(size_of::<BlockQ8K>()).ok_or(Error::Shape)?;
        let padded = !k.is_multiple_of(QK_K);
        let pad = if padded { QK_K * size_of::<f32>() } else { 0 };
        let scratch = round_up(q8_row, WORK_ALIGN).and_then(|s| s.checked_add(pad)).ok_or(Error::Shape)?;
        Ok(WorkPlan { nq, q8_row, packed, scratch, padded })
    }

    /// Where thread `ith`'s scratch starts, from the aligned start of the buffer.
    pub fn scratch_offset(&self, ith: usize) -> Result<usize, Error> {
        round_up(self.packed, WORK_ALIGN)
            .and_then(|p| ith.checked_mul(self.scratch).and_then(|s| p.checked_add(s)))
            .ok_or(Error::Shape)
    }

    /// Where a thread's padding floats start, from the start of its scratch.
    pub fn pad_offset(&self) -> usize {
        self.q8_row.next_multiple_of(WORK_ALIGN)
    }

    /// Bytes of work buffer, at any alignment, for `n_threads` threads.
    ///
    /// # Errors
    /// [`Error::Shape`] past `isize::MAX` bytes.
    pub fn work_size(&self, n_threads: usize) -> Result<usize, Error> {
        self.scratch_offset(n_threads)?
            .checked_add(WORK_ALIGN - 1)
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or(Error::Shape)
    }
}

/// The row split of `n_rows` rows in tiles of `tile` rows over `n_threads` threads: `(n_chunks,
/// chunk_rows)`; chunk `c` is rows `[c * chunk_rows, min(n_rows, (c + 1) * chunk_rows))`, whole
/// tiles. About 4 chunks per thread, handed out as threads finish (one per thread on one thread,
/// or on NUMA, where a thread should keep its rows), never more chunks than tiles.
///
/// # Errors
/// [`Error::InvalidArgument`] for no threads or a zero tile.
pub fn row_chunks(n_rows: usize, tile: usize, n_threads: usize, numa: bool) -> Result<(usize, usize), Error> {
    if n_threads == 0 || tile == 0 {
        return Err(Error::InvalidArgument);
    }
    let n_tiles = n_rows.div_ceil(tile);
    let wanted = if n_threads == 1 || numa { n_threads } else { n_threads.saturating_mul(4) };
    let n_chunks = wanted.min(n_tiles);
    if n_chunks == 0 {
        return Ok((0, 0));
    }
    let per = n_tiles.div_ceil(n_chunks);
    Ok((n_tiles.div_ceil(per), per * tile))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_work_buffer_layout() {
        // k = 896: 4 Q8_K blocks (the last padded), 1168 bytes -> 1216, + 1024 padding floats
        let p = WorkPlan::new(896, 1000).unwrap();
        assert_eq!(p, WorkPlan { nq: 4, q8_row: 1168, packed: 1000, scratch: 2240, padded: true });
        assert_eq!(p.scratch_offset(0), Ok(1024));
        assert_eq!(p.scratch_offset(3), Ok(1024 + 3 * 2240));
        assert_eq!(p.pad_offset(), 1216);
        assert_eq!(p.work_size(2), Ok(63 + 1024 + 2 * 2240));
        // k = 1024: no padding
        let p = WorkPlan::new(1024, 4096).unwrap();
        assert_eq!((p.nq, p.q8_row, p.scratch, p.padded), (4, 1168, 1216, false));
        assert_eq!(p.work_size(1), Ok(63 + 4096 + 1216));
        assert_eq!(WorkPlan::new(1024, usize::MAX - 10).unwrap().work_size(1), Err(Error::Shape));
        assert_eq!(WorkPlan::new(1024, 64).unwrap().work_size(usize::MAX / 64), Err(Error::Shape));
    }

    /// The shim's former arithmetic, for comparison.
    fn split_c(n_rows: i64, tile: i64, nth: i64, numa: bool) -> (i64, i64) {
        let n_tiles = (n_rows + tile - 1) / tile;
        let mut n_chunks = if nth == 1 || numa { nth } else { nth * 4 };
        n_chunks = n_chunks.min(n_tiles);
        let per = (n_tiles + n_chunks - 1) / n_chunks;
        ((n_tiles + per - 1) / per, per * tile)
    }

    #[test]
    fn the_row_split() {
        assert_eq!(row_chunks(896, 16, 2, false), Ok((8, 112)));
        assert_eq!(row_chunks(896, 16, 1, false), Ok((1, 896)));
        assert_eq!(row_chunks(896, 16, 2, true), Ok((2, 448)));
        assert_eq!(row_chunks(4, 16, 8, false), Ok((1, 16)));
        assert_eq!(row_chunks(144, 16, 2, false), Ok((5, 32))); // 9 tiles in 8 chunks: 2 per chunk
        assert_eq!(row_chunks(0, 16, 2, false), Ok((0, 0)));
        assert_eq!(row_chunks(16, 16, 0, false), Err(Error::InvalidArgument));
        for n_rows in (4..=700).step_by(4) {
            for tile in [4, 16] {
                for nth in 1..=9 {
                    for numa in [false, true] {
                        let (n, rows) = row_chunks(n_rows, tile, nth, numa).unwrap();
                        let (cn, crows) = split_c(n_rows as i64, tile as i64, nth as i64, numa);
                        assert_eq!((n as i64, rows as i64), (cn, crows), "{n_rows} {tile} {nth} {numa}");
                        // the chunks cover every row once, in whole tiles
                        assert!(rows % tile == 0 && (n - 1) * rows < n_rows && n * rows >= n_rows);
                    }
                }
            }
        }
    }
}
