//! The crate's error type ([`Error`], re-exported at the crate root): at the bottom of the crate,
//! so that every module can return it without importing anything above itself.

/// Errors of the safe API; [`ffi`](crate::ffi) maps each to a `GGML_T2P_ERR_*` status code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// A required pointer was null (C ABI only).
    Null,
    /// Shape not handled: inner size not a multiple of 128, rows not a multiple of 4, zero or
    /// overflowing sizes, or slice lengths that disagree with the shape
    /// ([`format::check_shape`](crate::format::check_shape)).
    Shape,
    /// A buffer is too small (or not a whole number of blocks) for the stated shape.
    BufferSize,
    /// A buffer is not aligned for its block type.
    Misaligned,
    /// A row range that is reversed, out of bounds or not on the layout's row tile.
    Range,
    /// The requested kernel level or layout is not available on this CPU or build.
    Unsupported,
    /// An unknown enum value (type id, layout or kernel level) was passed, buffers that must not
    /// overlap do, or activations were packed for another kernel.
    InvalidArgument,
}

impl Error {
    /// Every error, in status-code order (`-1` .. `-7`).
    pub const ALL: [Error; 7] = [
        Error::Null,
        Error::Shape,
        Error::BufferSize,
        Error::Misaligned,
        Error::Range,
        Error::Unsupported,
        Error::InvalidArgument,
    ];

    /// The message, NUL-terminated (the one source of the texts; [`ffi`](crate::ffi) hands them to C).
    pub(crate) fn message_c(self) -> &'static str {
        match self {
            Error::Null => "null pointer\0",
            Error::Shape => "unsupported shape (k: 128s, rows: 4s; quantized rows: 256s)\0",
            Error::BufferSize => "buffer too small for the shape\0",
            Error::Misaligned => "buffer not aligned for its block type\0",
            Error::Range => {
                "row range out of bounds or not on the layout's row tile (4 rows, 16 for X16, 64 for L64)\0"
            }
            Error::Unsupported => "kernel or layout not available on this CPU or for this type\0",
            Error::InvalidArgument => {
                "invalid argument (unknown type, layout or kernel; overlapping buffers; wrong activation pack)\0"
            }
        }
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.message_c().trim_end_matches('\0'))
    }
}

impl std::error::Error for Error {}
