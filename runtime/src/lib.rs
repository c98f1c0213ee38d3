//! The arrayad runtime: the C support code that generated code calls.
//!
//! Everything lives in one C file, [`RUNTIME_C_SOURCE`] (with its header
//! [`RUNTIME_C_HEADER`]): the per-call context [`Ctx`] with its arena
//! (bump allocation of every array of a call, [`ARENA_ALIGN`]-byte aligned, freed when the
//! call ends), its tape (a LIFO stack of 8-byte slots, whose popped slots
//! stay stored for a rewind) and its error record;
//! error message formatting; `digamma` and a thread-safe `lgamma`; and the
//! support of the C ABI wrappers of shared libraries (`arrayad_invoke`,
//! `arrayad_jacobian`). The build script compiles it into this crate for the
//! JIT; `arrayad build` writes the same source next to the generated object
//! and compiles it into the shared library.
//!
//! [`Callee`] is the typed table of every function generated code calls
//! (runtime, C library and math functions): symbol, C signature, address.

pub use arrayad_ir::MathFn;
use std::ffi::c_char;

/// The C source of the runtime (`arrayad_runtime.c`).
pub const RUNTIME_C_SOURCE: &str = include_str!("arrayad_runtime.c");
/// The C header of the runtime (`arrayad_runtime.h`), included by the source.
pub const RUNTIME_C_HEADER: &str = include_str!("arrayad_runtime.h");
/// The C source of the shared part of the C ABI wrappers of shared
/// libraries (`arrayad_abi.c`): per-thread contexts and last errors.
pub const ABI_C_SOURCE: &str = include_str!("arrayad_abi.c");
/// `arrayad_runtime.c` and `arrayad_abi.c` compiled, when this crate was
/// built, as objects of shared libraries for the machine it runs on (the
/// flags of the library build: PIC, `-O2`, `-std=gnu99`,
/// `-ffp-contract=off`, hidden visibility), as (file name, bytes): linked
/// by `arrayad build` instead of compiling the sources when it uses the
/// default C compiler for this machine with no extra flags. Empty when
/// this crate was built with a C compiler or flags from the environment
/// (`CC`, `CFLAGS`: they would be in the objects).
pub const SHARED_RUNTIME_OBJECTS: [(&str, &[u8]); 2] = [
    ("arrayad_runtime.o", include_bytes!(concat!(env!("OUT_DIR"), "/shared_arrayad_runtime.o"))),
    ("arrayad_abi.o", include_bytes!(concat!(env!("OUT_DIR"), "/shared_arrayad_abi.o"))),
];

/// The alignment of every arena allocation, in bytes, and the multiple
/// its size is rounded up to (`ARRAYAD_ARENA_ALIGN`): a cache line, so
/// that a row of 64 bytes or more starts a line and vector loops load and
/// store it by whole lines. On an AVX-512 machine GMM d64's backward
/// loop took about 20% more time with its per-point rows 32 bytes off a
/// line's start (every 64-byte access split in two).
pub const ARENA_ALIGN: i64 = 64;

/// The file name the source includes the header as.
pub const RUNTIME_C_HEADER_NAME: &str = "arrayad_runtime.h";

/// Size of the fallback buffer for messages composed at run time
/// (`ARRAYAD_ERR_BUF`).
pub const ERR_BUF: usize = 256;

/// The result slots `arrayad_parallel_map` gives a chunk function
/// (`ARRAYAD_PMAP_RESULT_SLOTS` of the C runtime): per array it makes, the
/// rows' pointer, their count and the extents of a row.
pub const PMAP_RESULT_SLOTS: usize = 2 * PMAP_MAX_OUTPUTS;

/// The words of one array in the layout a parallel map is given
/// (`ARRAYAD_PMAP_LAYOUT_WORDS`): its first result slot, the rank of its
/// rows and their extents (at most [`PMAP_LAYOUT_WORDS`] - 2 axes).
pub const PMAP_LAYOUT_WORDS: usize = 8;

/// The most arrays one parallel map makes (`ARRAYAD_PMAP_MAX_OUTPUTS`):
/// a pointer, a count and the extents of a row each in the result slots (a
/// value and its tangents; a pass of a vector jvp makes at most 33, its
/// value and 32 lanes; a forward pass, its values and stacked residuals).
pub const PMAP_MAX_OUTPUTS: usize = 34;

/// Mirror of the C `arrayad_ctx` (layout checked against the C side in
/// tests). Generated code accesses the fields at the offsets of [`offsets`].
#[repr(C)]
pub struct Ctx {
    /// Next free byte of the current arena chunk ([`ARENA_ALIGN`]-byte aligned).
    pub arena_ptr: *mut u8,
    /// End of the current arena chunk.
    pub arena_end: *mut u8,
    /// The current chunk (opaque).
    pub arena_cur: *mut u8,
    /// Next free tape slot.
    pub tape_ptr: *mut u64,
    /// End of the tape buffer.
    pub tape_end: *mut u64,
    /// Start of the tape buffer.
    pub tape_base: *mut u64,
    /// End of the stored tape: pushes store up to here, pops leave it in
    /// place (so that a rewind to an earlier mark replays popped slots).
    pub tape_top: *mut u64,
    /// First chunk of the arena (opaque).
    pub arena_first: *mut u8,
    /// Bytes of arena chunks and tape held.
    pub held: u64,
    /// The most bytes the context may hold.
    pub limit: u64,
    /// Message template, or the composed message.
    pub err_msg: *const c_char,
    /// Values of the message.
    pub err_vals: [i64; 3],
    /// Error kind (0: none).
    pub err_kind: i32,
    /// Nonzero once generated code has recorded an error (`arrayad_fail`):
    /// later errors of the same call are dropped.
    pub err_final: i32,
    /// A message composed at run time (heap), or null.
    pub err_text: *mut c_char,
    /// Its fallback when the heap is out.
    pub err_buf: [c_char; ERR_BUF],
    /// Destinations of the array results of the call in progress, or null:
    /// for result `i`, `dest[2i]` a buffer of the caller (or 0) and
    /// `dest[2i + 1]` its size in bytes. A result of exactly that size may
    /// be computed there rather than in the arena (destination passing).
    /// Generated code that calls definitions takes it and leaves null.
    pub dest: *const u64,
    /// The lowest stack address from which generated code may call a
    /// definition kept as a call or enter a large frame (0: unchecked):
    /// [`OwnedCtx::set_stack_limit_here`].
    pub stack_limit: usize,
    /// In a call of a shared library built with `--flush-subnormals`, the
    /// caller's floating-point control, restored when the call ends (the C
    /// ABI's `arrayad_abi.c`); 0 in the JIT, whose calls keep it in a
    /// [`SubnormalsFlushed`].
    pub fp_control: u64,
}

/// The stack, in bytes, that generated code may use below the frame of
/// whoever calls it when the bottom of the thread's stack is unknown
/// (`ARRAYAD_CALL_STACK`, 1 MiB); when it is known, generated code may use
/// the whole stack less 64 KiB. The JIT knows the stack of every thread
/// (`pthread_getattr_np`); a shared library, which depends on no more than
/// libc and libm, knows the main thread's only (`/proc/self/maps` and
/// `RLIMIT_STACK`). Nested calls of definitions kept as calls that go
/// deeper fail with an out-of-memory error
/// ([`arrayad_ir::Fault::CallsTooDeep`]), and so does a function whose
/// frame does not fit ([`arrayad_ir::Fault::FrameTooLarge`]), rather than
/// overflowing the stack.
pub const CALL_STACK: i64 = 1 << 20;

/// Byte offsets of the [`Ctx`] fields that generated code uses.
pub mod offsets {
    use super::Ctx;
    use std::mem::offset_of;
    /// `arena_ptr`.
    pub const ARENA_PTR: i32 = offset_of!(Ctx, arena_ptr) as i32;
    /// `arena_end`.
    pub const ARENA_END: i32 = offset_of!(Ctx, arena_end) as i32;
    /// `arena_cur`.
    pub const ARENA_CUR: i32 = offset_of!(Ctx, arena_cur) as i32;
    /// `tape_ptr`.
    pub const TAPE_PTR: i32 = offset_of!(Ctx, tape_ptr) as i32;
    /// `tape_end`.
    pub const TAPE_END: i32 = offset_of!(Ctx, tape_end) as i32;
    /// `tape_base`.
    pub const TAPE_BASE: i32 = offset_of!(Ctx, tape_base) as i32;
    /// `tape_top`.
    pub const TAPE_TOP: i32 = offset_of!(Ctx, tape_top) as i32;
    /// `dest`.
    pub const DEST: i32 = offset_of!(Ctx, dest) as i32;
    /// `stack_limit`.
    pub const STACK_LIMIT: i32 = offset_of!(Ctx, stack_limit) as i32;
    /// `err_kind`.
    pub const ERR_KIND: i32 = offset_of!(Ctx, err_kind) as i32;
}

/// The C functions of the runtime.
#[allow(missing_docs)]
pub mod ffi {
    use super::Ctx;
    use std::ffi::c_char;
    extern "C" {
        pub fn arrayad_ctx_init(ctx: *mut Ctx);
        pub fn arrayad_ctx_release(ctx: *mut Ctx);
        pub fn arrayad_ctx_reset(ctx: *mut Ctx);
        pub fn arrayad_set_stack_limit(ctx: *mut Ctx);
        pub fn arrayad_ctx_size() -> usize;
        pub fn arrayad_ctx_capacity(ctx: *const Ctx) -> u64;
        pub fn arrayad_default_limit() -> u64;
        pub fn arrayad_keep_limit() -> u64;
        pub fn arrayad_alloc_slow(ctx: *mut Ctx, size: u64) -> *mut u8;
        pub fn arrayad_tape_grow(ctx: *mut Ctx, slots: u64) -> i32;
        pub fn arrayad_arena_keep(
            ctx: *mut Ctx,
            mark_ptr: *const u8,
            mark_chunk: *mut u8,
            n: i64,
            pairs: *mut i64,
        ) -> i32;
        pub fn arrayad_fail(ctx: *mut Ctx, kind: i32, msg: *const c_char, a: i64, b: i64, c: i64) -> i32;
        pub fn arrayad_fail_shapes(
            ctx: *mut Ctx,
            kind: i32,
            msg: *const c_char,
            row: i64,
            rank: i64,
            shape: *const i64,
            first: *const i64,
        ) -> i32;
        pub fn arrayad_error_kind(ctx: *const Ctx) -> i32;
        pub fn arrayad_format_error(ctx: *const Ctx, buf: *mut c_char, cap: usize) -> usize;
        pub fn arrayad_digamma(x: f64) -> f64;
        pub fn arrayad_polygamma(n: f64, x: f64) -> f64;
        pub fn arrayad_lgamma(x: f64) -> f64;
        pub fn arrayad_parallel_map(
            ctx: *mut Ctx,
            fn_: *const u8,
            args: *const u64,
            nslots: i64,
            results: *mut u64,
            layout: *const i64,
            outputs: i64,
            weight: i64,
        ) -> i32;
        pub fn arrayad_num_threads() -> i32;
        pub fn arrayad_set_num_threads(n: i32);
        pub fn arrayad_set_parallel_grain(work: i64);
        pub fn arrayad_fp_flush_subnormals() -> u64;
        pub fn arrayad_fp_restore(control: u64);
        pub fn arrayad_parallel_runs() -> u64;
    }
}

/// The libm functions generated code calls.
mod libm {
    extern "C" {
        pub fn log(x: f64) -> f64;
        pub fn sin(x: f64) -> f64;
        pub fn cos(x: f64) -> f64;
        pub fn tan(x: f64) -> f64;
        pub fn sinh(x: f64) -> f64;
        pub fn cosh(x: f64) -> f64;
        pub fn asin(x: f64) -> f64;
        pub fn acos(x: f64) -> f64;
        pub fn atan(x: f64) -> f64;
        pub fn log1p(x: f64) -> f64;
        pub fn expm1(x: f64) -> f64;
        pub fn erf(x: f64) -> f64;
        pub fn pow(x: f64, y: f64) -> f64;
        pub fn atan2(y: f64, x: f64) -> f64;
        pub fn memset(d: *mut u8, c: i32, n: usize) -> *mut u8;
        pub fn memmove(d: *mut u8, s: *const u8, n: usize) -> *mut u8;
    }
}

/// The number of threads parallel maps run on in this process (JIT code;
/// each shared library has its own: `MODULE_set_num_threads`): the last
/// [`set_num_threads`], else the environment variable
/// `ARRAYAD_NUM_THREADS` (1 to 256), else the number of cores the process
/// may run on.
pub fn num_threads() -> usize {
    // SAFETY: reads atomics and the environment.
    let n = unsafe { ffi::arrayad_num_threads() };
    usize::try_from(n).unwrap_or(1).max(1)
}

/// Sets the number of threads of parallel maps for JIT code of this
/// process (at most 256); `None` restores the default ([`num_threads`]).
/// One thread runs every map on the calling thread. Results are the same
/// for every number of threads.
pub fn set_num_threads(n: Option<usize>) {
    let n = n.map_or(0, |n| i32::try_from(n.min(256)).unwrap_or(256));
    // SAFETY: stores an atomic.
    unsafe { ffi::arrayad_set_num_threads(n) }
}

/// Sets the work (iterations times statements per iteration) below which
/// a map runs on the calling thread; `None` restores the default (the
/// environment variable `ARRAYAD_PARALLEL_GRAIN`, else 32,768). Tests set
/// 0 to run every map of more than one iteration on the pool.
pub fn set_parallel_grain(work: Option<u64>) {
    let w = work.map_or(-1, |w| i64::try_from(w).unwrap_or(i64::MAX));
    // SAFETY: stores an atomic.
    unsafe { ffi::arrayad_set_parallel_grain(w) }
}

/// How many maps of JIT code have run on the pool of threads (not on their
/// caller's thread alone) in this process.
pub fn parallel_runs() -> u64 {
    // SAFETY: reads an atomic.
    unsafe { ffi::arrayad_parallel_runs() }
}

/// `digamma(x)`, the derivative of `lgamma` (the runtime's implementation).
pub fn digamma(x: f64) -> f64 {
    // SAFETY: a pure C function of one double.
    unsafe { ffi::arrayad_digamma(x) }
}

/// `lgamma(x)` as compiled code computes it (thread-safe `lgamma_r`).
pub fn lgamma(x: f64) -> f64 {
    // SAFETY: a pure C function of one double.
    unsafe { ffi::arrayad_lgamma(x) }
}

/// A function of the runtime or of the C library that generated code calls
/// (besides the math functions, [`MathFn`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum RuntimeFn {
    /// `void *arrayad_alloc_slow(ctx, uint64_t size)`: the slow path of
    /// arena allocation; NULL (with an error recorded) on failure.
    AllocSlow,
    /// `int32_t arrayad_tape_grow(ctx, uint64_t slots)`: 0 or an error.
    TapeGrow,
    /// `int32_t arrayad_fail(ctx, int32_t kind, const char *template,
    /// int64_t, int64_t, int64_t)`: records an error, unless generated
    /// code recorded one before in the same call (the first is kept);
    /// returns the kind of the recorded error.
    Fail,
    /// `int32_t arrayad_fail_shapes(ctx, int32_t kind, const char *template,
    /// int64_t row, int64_t rank, const int64_t *shape, const int64_t *first)`.
    FailShapes,
    /// `void *memset(void *, int, size_t)`.
    Memset,
    /// `void *memmove(void *, const void *, size_t)`: the copy of a row
    /// of many elements.
    Memmove,
    /// `int32_t arrayad_arena_keep(ctx, const void *mark_ptr, void
    /// *mark_chunk, int64_t n, int64_t *pairs)`: releases the arena since a
    /// mark but for `n` arrays, which move down (pointers updated).
    ArenaKeep,
    /// `int32_t arrayad_parallel_map(ctx, arrayad_fn fn, const uint64_t
    /// *args, int64_t nslots, uint64_t *results, const int64_t *layout,
    /// int64_t outputs, int64_t weight)`: runs the chunk function of a map
    /// making `outputs` arrays (up to [`PMAP_MAX_OUTPUTS`]; none for a loop
    /// of effects) of rows whose extents `layout` gives ([`PMAP_LAYOUT_WORDS`]
    /// words per array: its first result slot, the rank of its rows, their
    /// extents) over the iterations `0..args[1]`, on the pool of threads
    /// when the work pays for it ([`set_num_threads`]); returns 0 or the
    /// error kind.
    ParallelMap,
}

impl RuntimeFn {
    /// Every runtime function.
    pub const ALL: [RuntimeFn; 8] = [
        RuntimeFn::AllocSlow,
        RuntimeFn::TapeGrow,
        RuntimeFn::Fail,
        RuntimeFn::FailShapes,
        RuntimeFn::Memset,
        RuntimeFn::Memmove,
        RuntimeFn::ArenaKeep,
        RuntimeFn::ParallelMap,
    ];
}

/// The machine types of the arguments and results of [`Callee`]s.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum AbiType {
    /// `int32_t`.
    I32,
    /// `int64_t` (and `uint64_t`, `size_t`).
    I64,
    /// `double`.
    F64,
    /// A data pointer.
    Ptr,
}

/// A function that generated code calls: its C symbol, its C signature and
/// its address in this process (for the JIT). Both code generators and the
/// symbol table of the JIT read this one table.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum Callee {
    /// A runtime or C library function.
    Runtime(RuntimeFn),
    /// A math function.
    Math(MathFn),
}

impl Callee {
    /// The C symbol.
    pub fn symbol(self) -> &'static str {
        match self {
            Callee::Runtime(RuntimeFn::AllocSlow) => "arrayad_alloc_slow",
            Callee::Runtime(RuntimeFn::TapeGrow) => "arrayad_tape_grow",
            Callee::Runtime(RuntimeFn::Fail) => "arrayad_fail",
            Callee::Runtime(RuntimeFn::FailShapes) => "arrayad_fail_shapes",
            Callee::Runtime(RuntimeFn::Memset) => "memset",
            Callee::Runtime(RuntimeFn::Memmove) => "memmove",
            Callee::Runtime(RuntimeFn::ArenaKeep) => "arrayad_arena_keep",
            Callee::Runtime(RuntimeFn::ParallelMap) => "arrayad_parallel_map",
            Callee::Math(m) => m.symbol(),
        }
    }

    /// The parameter types and the result type (`None`: no result used).
    pub fn signature(self) -> (&'static [AbiType], AbiType) {
        use AbiType::*;
        match self {
            Callee::Runtime(RuntimeFn::AllocSlow) => (&[Ptr, I64], Ptr),
            Callee::Runtime(RuntimeFn::TapeGrow) => (&[Ptr, I64], I32),
            Callee::Runtime(RuntimeFn::Fail) => (&[Ptr, I32, Ptr, I64, I64, I64], I32),
            Callee::Runtime(RuntimeFn::FailShapes) => (&[Ptr, I32, Ptr, I64, I64, Ptr, Ptr], I32),
            Callee::Runtime(RuntimeFn::Memset) => (&[Ptr, I32, I64], Ptr),
            Callee::Runtime(RuntimeFn::Memmove) => (&[Ptr, Ptr, I64], Ptr),
            Callee::Runtime(RuntimeFn::ArenaKeep) => (&[Ptr, Ptr, Ptr, I64, Ptr], I32),
            Callee::Runtime(RuntimeFn::ParallelMap) => (&[Ptr, Ptr, Ptr, I64, Ptr, Ptr, I64, I64], I32),
            Callee::Math(m) if m.arity() == 2 => (&[F64, F64], F64),
            Callee::Math(_) => (&[F64], F64),
        }
    }

    /// True for the functions that only record an error (never on a hot
    /// path: code generators may mark them cold).
    pub fn is_failure(self) -> bool {
        matches!(self, Callee::Runtime(RuntimeFn::Fail | RuntimeFn::FailShapes))
    }

    /// The function's address in this process.
    pub fn address(self) -> *const u8 {
        match self {
            Callee::Runtime(RuntimeFn::AllocSlow) => ffi::arrayad_alloc_slow as *const u8,
            Callee::Runtime(RuntimeFn::TapeGrow) => ffi::arrayad_tape_grow as *const u8,
            Callee::Runtime(RuntimeFn::Fail) => ffi::arrayad_fail as *const u8,
            Callee::Runtime(RuntimeFn::FailShapes) => ffi::arrayad_fail_shapes as *const u8,
            Callee::Runtime(RuntimeFn::Memset) => libm::memset as *const u8,
            Callee::Runtime(RuntimeFn::Memmove) => libm::memmove as *const u8,
            Callee::Runtime(RuntimeFn::ArenaKeep) => ffi::arrayad_arena_keep as *const u8,
            Callee::Runtime(RuntimeFn::ParallelMap) => ffi::arrayad_parallel_map as *const u8,
            Callee::Math(m) => match m {
                MathFn::Log => libm::log as *const u8,
                MathFn::Sin => libm::sin as *const u8,
                MathFn::Cos => libm::cos as *const u8,
                MathFn::Tan => libm::tan as *const u8,
                MathFn::Sinh => libm::sinh as *const u8,
                MathFn::Cosh => libm::cosh as *const u8,
                MathFn::Asin => libm::asin as *const u8,
                MathFn::Acos => libm::acos as *const u8,
                MathFn::Atan => libm::atan as *const u8,
                MathFn::Log1p => libm::log1p as *const u8,
                MathFn::Expm1 => libm::expm1 as *const u8,
                MathFn::Erf => libm::erf as *const u8,
                MathFn::Lgamma => ffi::arrayad_lgamma as *const u8,
                MathFn::Digamma => ffi::arrayad_digamma as *const u8,
                MathFn::Polygamma => ffi::arrayad_polygamma as *const u8,
                MathFn::Pow => libm::pow as *const u8,
                MathFn::Atan2 => libm::atan2 as *const u8,
            },
        }
    }

    /// Every callee.
    pub fn all() -> impl Iterator<Item = Callee> {
        RuntimeFn::ALL.into_iter().map(Callee::Runtime).chain(MathFn::ALL.into_iter().map(Callee::Math))
    }
}

/// An owned, initialised context on the heap, released on drop.
pub struct OwnedCtx(Box<Ctx>);

/// The calling thread flushing subnormal numbers to zero while this lives
/// (results and operands: MXCSR's FTZ and DAZ on x86-64, FPCR.FZ on
/// AArch64; nothing on other machines); dropping it puts the thread's mode
/// back as it was. A parallel map run meanwhile flushes on every thread
/// (the runtime runs its chunks in the caller's floating-point
/// environment). What `--flush-subnormals` gives each call of a JIT module.
#[derive(Debug)]
pub struct SubnormalsFlushed {
    control: u64,
    /// Dropped on the thread it flushes (not `Send`).
    _thread: std::marker::PhantomData<*const ()>,
}

impl SubnormalsFlushed {
    /// Starts flushing on the calling thread.
    pub fn new() -> SubnormalsFlushed {
        // SAFETY: reads and sets the calling thread's floating-point control.
        SubnormalsFlushed { control: unsafe { ffi::arrayad_fp_flush_subnormals() }, _thread: std::marker::PhantomData }
    }
}

impl Default for SubnormalsFlushed {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for SubnormalsFlushed {
    fn drop(&mut self) {
        // SAFETY: puts back the flush bits this guard changed.
        unsafe { ffi::arrayad_fp_restore(self.control) }
    }
}

impl Default for OwnedCtx {
    fn default() -> Self {
        Self::new()
    }
}

impl OwnedCtx {
    /// A fresh context (allocates nothing until generated code needs it).
    pub fn new() -> OwnedCtx {
        let mut b = Box::new(Ctx {
            arena_ptr: std::ptr::null_mut(),
            arena_end: std::ptr::null_mut(),
            arena_cur: std::ptr::null_mut(),
            tape_ptr: std::ptr::null_mut(),
            tape_end: std::ptr::null_mut(),
            tape_base: std::ptr::null_mut(),
            tape_top: std::ptr::null_mut(),
            arena_first: std::ptr::null_mut(),
            held: 0,
            limit: 0,
            err_msg: std::ptr::null(),
            err_vals: [0; 3],
            err_kind: 0,
            err_final: 0,
            err_text: std::ptr::null_mut(),
            err_buf: [0; ERR_BUF],
            dest: std::ptr::null(),
            stack_limit: 0,
            fp_control: 0,
        });
        // SAFETY: a valid, exclusively owned context.
        unsafe { ffi::arrayad_ctx_init(&mut *b) };
        OwnedCtx(b)
    }

    /// The raw pointer to pass to generated code.
    pub fn as_ptr(&mut self) -> *mut Ctx {
        &mut *self.0
    }

    /// Empties the arena and the tape and clears the error, keeping memory.
    pub fn reset(&mut self) {
        // SAFETY: a valid context.
        unsafe { ffi::arrayad_ctx_reset(&mut *self.0) }
    }

    /// The memory limit of new contexts: `$ARRAYAD_MAX_MEMORY` (bytes, or
    /// with a suffix K, M, G or T for powers of 1024) when set and valid,
    /// else half of the physical memory.
    pub fn default_limit() -> u64 {
        // SAFETY: reads the environment and sysconf only.
        unsafe { ffi::arrayad_default_limit() }
    }

    /// How many bytes of arena and tape a thread keeps from one call for
    /// its next (`$ARRAYAD_KEEP_MEMORY`, else a quarter of
    /// [`OwnedCtx::default_limit`]): a context holding at most this much is
    /// kept.
    pub fn keep_limit() -> u64 {
        // SAFETY: reads the environment and sysconf only.
        unsafe { ffi::arrayad_keep_limit() }
    }

    /// Sets the most bytes of arena and tape the context may hold (a call
    /// that would need more fails with an out-of-memory error).
    pub fn set_limit(&mut self, bytes: u64) {
        self.0.limit = bytes;
    }

    /// Sets the stack limit 64 KiB above the bottom of the thread's stack,
    /// or [`CALL_STACK`] bytes below the caller's frame when the bottom is
    /// unknown ([`Ctx::stack_limit`], `arrayad_set_stack_limit`): call it
    /// right before calling generated code with this context, on the
    /// thread that calls it.
    pub fn set_stack_limit_here(&mut self) {
        // SAFETY: valid, exclusively borrowed context.
        unsafe { ffi::arrayad_set_stack_limit(&mut *self.0) }
    }

    /// Offers the buffers of `dest` (for result `i`, `dest[2i]` a pointer
    /// and `dest[2i + 1]` its size in bytes, 0 where none) to the next
    /// call as the memory of its array results ([`Ctx::dest`]); null
    /// withdraws them. The caller keeps `dest` and the buffers alive and
    /// unaliased by the call's arguments until it withdraws them.
    pub fn set_dest(&mut self, dest: *const u64) {
        self.0.dest = dest;
    }

    /// Bytes of arena chunks and tape this context holds (kept by
    /// [`OwnedCtx::reset`]).
    pub fn capacity(&self) -> u64 {
        // SAFETY: valid context.
        unsafe { ffi::arrayad_ctx_capacity(&*self.0) }
    }

    /// The recorded error kind (0 when none).
    pub fn error_kind(&self) -> i32 {
        self.0.err_kind
    }

    /// The recorded error message (empty when none). Message templates
    /// point into the code that raised the error: call this only while that
    /// code is loaded.
    pub fn error_message(&self) -> String {
        let mut buf = vec![0u8; 512];
        // SAFETY: valid context; buf has the given capacity.
        let n = unsafe { ffi::arrayad_format_error(&*self.0, buf.as_mut_ptr() as *mut c_char, buf.len()) };
        if n >= buf.len() {
            buf = vec![0u8; n + 1];
            // SAFETY: as above.
            unsafe { ffi::arrayad_format_error(&*self.0, buf.as_mut_ptr() as *mut c_char, buf.len()) };
        }
        buf.truncate(n);
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// Records an error as generated code does (mainly for tests): the
    /// first of a call is kept, and the kind recorded returned.
    pub fn fail(&mut self, kind: i32, template: &'static std::ffi::CStr, vals: [i64; 3]) -> i32 {
        // SAFETY: valid context; the template is static.
        unsafe { ffi::arrayad_fail(&mut *self.0, kind, template.as_ptr(), vals[0], vals[1], vals[2]) }
    }

    /// Allocates `size` bytes from the arena (the slow path generated code
    /// uses); `None` on failure (an error is recorded).
    pub fn alloc(&mut self, size: u64) -> Option<*mut u8> {
        // SAFETY: valid context.
        let p = unsafe { ffi::arrayad_alloc_slow(&mut *self.0, size) };
        (!p.is_null()).then_some(p)
    }
}

impl Drop for OwnedCtx {
    fn drop(&mut self) {
        // SAFETY: valid context, released once.
        unsafe { ffi::arrayad_ctx_release(&mut *self.0) }
    }
}

// SAFETY: a context is exclusively owned; it holds no thread-bound state.
unsafe impl Send for OwnedCtx {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_slots_of_chunks_are_the_c_runtimes() {
        let define = format!("#define ARRAYAD_PMAP_MAX_OUTPUTS {PMAP_MAX_OUTPUTS}\n");
        assert!(RUNTIME_C_SOURCE.contains(&define), "{define:?} is not in arrayad_runtime.c");
        let slots = "#define ARRAYAD_PMAP_RESULT_SLOTS (2 * ARRAYAD_PMAP_MAX_OUTPUTS)\n";
        assert!(RUNTIME_C_SOURCE.contains(slots), "{slots:?} is not in arrayad_runtime.c");
        let layout = format!("#define ARRAYAD_PMAP_LAYOUT_WORDS {PMAP_LAYOUT_WORDS}\n");
        assert!(RUNTIME_C_SOURCE.contains(&layout), "{layout:?} is not in arrayad_runtime.c");
    }

    #[test]
    fn layout_matches_c() {
        assert_eq!(std::mem::size_of::<Ctx>(), unsafe { ffi::arrayad_ctx_size() });
        assert_eq!(offsets::ARENA_PTR, 0);
        assert_eq!(offsets::ARENA_END, 8);
        assert_eq!(offsets::ARENA_CUR, 16);
        assert_eq!(offsets::TAPE_PTR, 24);
        assert_eq!(offsets::TAPE_END, 32);
        assert_eq!(offsets::TAPE_BASE, 40);
        assert_eq!(offsets::TAPE_TOP, 48);
        assert_eq!(std::mem::offset_of!(Ctx, err_kind), 112);
        assert_eq!(std::mem::offset_of!(Ctx, dest), 384);
        assert_eq!(offsets::STACK_LIMIT, 392);
        // The header documents the stack of kept calls that code generation
        // checks against.
        assert_eq!(CALL_STACK, 1 << 20);
        assert!(RUNTIME_C_HEADER.contains("#define ARRAYAD_CALL_STACK (1u << 20)"));
        // Generated code's inline allocation rounds as the runtime does.
        assert!(RUNTIME_C_HEADER.contains(&format!("#define ARRAYAD_ARENA_ALIGN {ARENA_ALIGN}\n")));
    }

    #[test]
    fn arena_allocations_are_aligned_and_distinct() {
        let mut c = OwnedCtx::new();
        let mut prev: Vec<(usize, usize)> = Vec::new();
        for size in [1u64, 8, 31, 32, 33, 64, 65, 1000, 100_000, 3, 1 << 20, 3 << 20, 40] {
            let p = c.alloc(size).expect("alloc") as usize;
            assert_eq!(p % ARENA_ALIGN as usize, 0, "{size} bytes at {p:#x}");
            for &(q, s) in &prev {
                assert!(p + size as usize <= q || q + s <= p, "overlap");
            }
            prev.push((p, size as usize));
        }
    }

    #[test]
    fn huge_allocation_is_out_of_memory() {
        let mut c = OwnedCtx::new();
        assert!(c.alloc(u64::MAX).is_none());
        assert_eq!(c.error_kind(), 8);
        assert!(c.error_message().starts_with("out of memory"), "{}", c.error_message());
    }

    #[test]
    fn message_template_is_formatted() {
        let mut c = OwnedCtx::new();
        let k = c.fail(1, c"f.arr:3:7: index out of bounds: index %1, size %2 (100%%)", [7, 5, 0]);
        assert_eq!(k, 1);
        assert_eq!(c.error_message(), "f.arr:3:7: index out of bounds: index 7, size 5 (100%)");
        c.reset();
        assert_eq!(c.error_kind(), 0);
        assert_eq!(c.error_message(), "");
    }

    #[test]
    fn shapes_message() {
        let mut c = OwnedCtx::new();
        let (a, b) = ([2i64, 3], [2i64, 4]);
        let t = c"f:1:2: irregular array: row %1 has shape %A but row 0 has shape %B";
        let k = unsafe { ffi::arrayad_fail_shapes(c.as_ptr(), 4, t.as_ptr(), 5, 2, a.as_ptr(), b.as_ptr()) };
        assert_eq!(k, 4);
        assert_eq!(c.error_message(), "f:1:2: irregular array: row 5 has shape [2, 3] but row 0 has shape [2, 4]");
    }

    #[test]
    fn digamma_matches_the_interpreter_algorithm() {
        // recurrence to x >= 10, the same series: equal to the IR interpreter
        // bit for bit is tested in the codegen crate; here: accuracy.
        let g = 0.5772156649015329;
        let want = -g - 2.0 * 2f64.ln() + (0..6).map(|k| 1.0 / (0.5 + k as f64)).sum::<f64>();
        assert!((digamma(6.5) - want).abs() < 1e-12, "{} {want}", digamma(6.5));
    }

    #[test]
    fn digamma_values() {
        // psi(1) = -gamma, psi(0.5) = -gamma - 2 ln 2, psi(10) = H_9 - gamma
        let g = 0.5772156649015329;
        assert!((digamma(1.0) + g).abs() < 1e-15);
        assert!((digamma(0.5) + g + 2.0 * 2f64.ln()).abs() < 1e-12);
        let h9: f64 = (1..10).map(|k| 1.0 / k as f64).sum();
        assert!((digamma(10.0) - (h9 - g)).abs() < 1e-12);
        // reflection: psi(1 - x) - psi(x) = pi cot(pi x)
        let x = -2.3;
        let lhs = digamma(1.0 - x) - digamma(x);
        let rhs = std::f64::consts::PI / (std::f64::consts::PI * x).tan();
        assert!((lhs - rhs).abs() < 1e-11, "{lhs} {rhs}");
        assert!(digamma(0.0).is_nan() && digamma(-3.0).is_nan());
        // the derivative of lgamma
        let x = 3.7;
        let h = 1e-6;
        let fd = (lgamma(x + h) - lgamma(x - h)) / (2.0 * h);
        assert!((fd - digamma(x)).abs() < 1e-8);
    }

    #[test]
    fn symbols_are_resolved() {
        assert!(Callee::all().all(|c| !c.address().is_null()));
        // SAFETY: `log` is `double log(double)`.
        let log: extern "C" fn(f64) -> f64 =
            unsafe { std::mem::transmute::<*const u8, extern "C" fn(f64) -> f64>(Callee::Math(MathFn::Log).address()) };
        assert_eq!(log(1.0), 0.0);
        assert_eq!(Callee::Math(MathFn::Lgamma).symbol(), "arrayad_lgamma");
    }
}
