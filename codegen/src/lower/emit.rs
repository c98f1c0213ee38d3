//! The emitter trait: the small instruction set the generic lowering
//! (`lower/`) writes machine code with. Each backend (Cranelift in `clif/`,
//! LLVM in `llvm/`) implements only this trait; loops, views, bounds and
//! size checks, the tape, accumulators, arena allocation and error
//! reporting are written once, in terms of it. The model is rustc's
//! `rustc_codegen_ssa::traits::BuilderMethods`.
//!
//! Values are typed by [`Ty`]. Truth values ([`Ty::Bool`]) are what
//! comparisons yield and what branches and `select` take; in memory a bool
//! is one byte holding 0 or 1. Pointers ([`Ty::Ptr`]) are 64 bits; every
//! array slot, context field and tape slot is 8 bytes.

use super::Result;
use arrayad_ir::Scalar;
use arrayad_runtime::Callee;

/// The type of an emitted value.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Ty {
    /// A truth value (one byte in memory).
    Bool,
    /// A 32-bit integer (statuses and error kinds).
    I32,
    /// A 64-bit integer.
    I64,
    /// An IEEE double.
    F64,
    /// A data pointer.
    Ptr,
}

impl Ty {
    /// The type of a scalar of the IR.
    pub(crate) fn of(s: Scalar) -> Ty {
        match s {
            Scalar::F64 => Ty::F64,
            Scalar::I64 => Ty::I64,
            Scalar::Bool => Ty::Bool,
        }
    }
}

/// Integer comparisons (`S` signed, `U` unsigned).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum IntCC {
    Eq,
    Ne,
    Slt,
    Sle,
    Sgt,
    Sge,
    Ult,
    Ule,
    Uge,
}

/// Float comparisons: ordered (false when either operand is NaN), except
/// `Ne` (true when either is NaN, as C's `!=`) and `Uno` (true exactly when
/// either is NaN).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum FloatCC {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Uno,
}

/// Binary integer operations (two's complement, wrapping). `SDiv` and
/// `SRem` must not see a zero divisor or `i64::MIN / -1` (the lowering
/// excludes both). `And`, `Or` and `Xor` also apply to [`Ty::Bool`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum IntOp {
    Add,
    Sub,
    Mul,
    SDiv,
    SRem,
    And,
    Or,
    Xor,
    SMin,
    SMax,
    /// Shift left by the second operand (< 64).
    Shl,
    /// Logical shift right by the second operand (< 64).
    UShr,
    /// Arithmetic shift right by the second operand (< 64).
    SShr,
}

/// Binary IEEE operations on [`Ty::F64`] (and lane by lane on pairs of
/// them: [`Emitter::f64_pairs`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum FloatOp {
    Add,
    Sub,
    Mul,
    Div,
}

/// Unary exact operations on [`Ty::F64`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum FloatUnary {
    Neg,
    Abs,
    Sqrt,
    Floor,
    Ceil,
}

/// Conversions between value types.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Conv {
    /// `i64 -> f64`, rounding to nearest.
    I64ToF64,
    /// `f64 -> i64`, truncating toward zero, saturating, NaN -> 0.
    F64ToI64Sat,
    /// A truth value as an `i64` 0 or 1.
    BoolToI64,
    /// An `i64` nonzero test.
    I64ToBool,
    /// The bits of an `f64` as an `i64` (a bit cast).
    F64Bits,
    /// The `f64` whose bits an `i64` holds (a bit cast).
    BitsF64,
}

/// What a load or store touches (alias information for the backend).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Mem {
    /// Fields of the call context (arena and tape pointers).
    Ctx,
    /// The argument slots (read-only) or result slots of the call.
    Slots,
    /// Array elements.
    Data,
    /// Tape slots.
    Tape,
    /// Stack memory of this function.
    Stack,
}

/// The instruction set of the generic lowering (module docs).
pub(crate) trait Emitter {
    /// An SSA value. Equal handles denote the same value (the lowering
    /// compares them to recognise equal sizes).
    type Value: Copy + Eq + std::hash::Hash + std::fmt::Debug;
    /// A basic block.
    type Block: Copy;
    /// A mutable variable (the backend builds SSA form from its uses).
    type Var: Copy;
    /// A stack slot of one scalar, addressed without an SSA value.
    type Slot: Copy;

    /// The function's parameters: the context, the argument slots and the
    /// result slots (all [`Ty::Ptr`]).
    fn params(&self) -> [Self::Value; 3];

    /// An integer or truth constant.
    fn iconst(&mut self, ty: Ty, x: i64) -> Self::Value;
    /// An `f64` constant.
    fn fconst(&mut self, x: f64) -> Self::Value;
    /// A binary integer operation (operands of the same type).
    fn int(&mut self, op: IntOp, a: Self::Value, b: Self::Value) -> Self::Value;
    /// `a * b` of two `i64`s as unsigned, and whether it overflowed.
    fn umul_overflow(&mut self, a: Self::Value, b: Self::Value) -> (Self::Value, Self::Value);
    /// An integer comparison.
    fn icmp(&mut self, cc: IntCC, a: Self::Value, b: Self::Value) -> Self::Value;
    /// A binary float operation.
    fn float(&mut self, op: FloatOp, a: Self::Value, b: Self::Value) -> Self::Value;
    /// A binary float operation rounded as IEEE says even under
    /// `--fast-math` (never reassociated or contracted): for sequences whose
    /// rounding is their meaning, such as `exp`'s range reduction
    /// (`lower/inline_math.rs`).
    fn float_strict(&mut self, op: FloatOp, a: Self::Value, b: Self::Value) -> Self::Value {
        self.float(op, a, b)
    }
    /// A unary float operation.
    fn float_unary(&mut self, op: FloatUnary, a: Self::Value) -> Self::Value;
    /// A float comparison.
    fn fcmp(&mut self, cc: FloatCC, a: Self::Value, b: Self::Value) -> Self::Value;
    /// `c ? a : b`.
    fn select(&mut self, c: Self::Value, a: Self::Value, b: Self::Value) -> Self::Value;
    /// A conversion.
    fn convert(&mut self, conv: Conv, a: Self::Value) -> Self::Value;

    /// Loads a value of type `ty` from `addr + offset`.
    fn load(&mut self, ty: Ty, addr: Self::Value, offset: i32, mem: Mem) -> Self::Value;
    /// Loads an array extent (an `i64` in `0..=i64::MAX`) from `addr +
    /// offset`. Backends that can use the range (LLVM: `!range`, which
    /// folds the non-negativity checks of allocations inside loops) do.
    fn load_extent(&mut self, addr: Self::Value, offset: i32, mem: Mem) -> Self::Value {
        self.load(Ty::I64, addr, offset, mem)
    }
    /// Stores `v` (of type `ty`) at `addr + offset`.
    fn store(&mut self, ty: Ty, v: Self::Value, addr: Self::Value, offset: i32, mem: Mem);
    /// The address of element `index` (an `i64`) of an array of `elem` at
    /// `base`.
    fn elem_addr(&mut self, base: Self::Value, index: Self::Value, elem: Scalar) -> Self::Value;
    /// `base + bytes` (a pointer; `bytes` an `i64`).
    fn ptr_offset(&mut self, base: Self::Value, bytes: Self::Value) -> Self::Value;
    /// `base + bytes` as the base of element addresses ([`Self::elem_addr`],
    /// also through a [`Self::select`] of it) that may itself lie outside
    /// `base`'s object while every element address computed from it is
    /// inside (a buffer standing in for the rows `first..` of an array:
    /// `lower/private_rows.rs`): LLVM computes those addresses with plain,
    /// not `inbounds`, offsets.
    fn loose_base(&mut self, base: Self::Value, bytes: Self::Value) -> Self::Value {
        self.ptr_offset(base, bytes)
    }
    /// `a - b` in bytes, an `i64`.
    fn ptr_diff(&mut self, a: Self::Value, b: Self::Value) -> Self::Value;
    /// The address of `bytes` bytes of fresh, 8-byte aligned stack memory
    /// of this function.
    fn stack_slot(&mut self, bytes: u32) -> Self::Value;

    /// A new, empty block.
    fn create_block(&mut self) -> Self::Block;
    /// Continues emitting at the end of `b`.
    fn switch_to(&mut self, b: Self::Block);
    /// Ends the current block with a jump.
    fn jump(&mut self, b: Self::Block);
    /// Ends the current block with a two-way branch on a truth value.
    fn brif(&mut self, c: Self::Value, then_: Self::Block, else_: Self::Block);
    /// Declares that every predecessor of `b` is known.
    fn seal(&mut self, b: Self::Block);
    /// Marks the conditional branch just built (a counted loop's back
    /// edge) as the latch of a short loop: one whose trip count is an
    /// enclosing loop's index (a triangular row). The LLVM backend asks its
    /// vectoriser not to interleave it (one vector per iteration, so rows
    /// of fewer than two vectors' lanes still run vectorised).
    fn mark_short_loop(&mut self) {}
    /// The array elements loaded and stored next belong to the arrays of
    /// alias scope `r` of the function's `n` (`Some((r, n))`: accesses of
    /// different scopes never overlap, `roots.rs`), or to any array
    /// (`None`). Backends with alias analysis may use it (LLVM: `!alias.scope`
    /// and `!noalias`).
    fn set_data_scope(&mut self, _scope: Option<(u32, u32)>) {}
    /// Declares alias scope `r` of `n` here: where an array of that scope
    /// is made, so that copies of a loop body that makes one get their own
    /// scopes (LLVM: `llvm.experimental.noalias.scope.decl`).
    fn declare_data_scope(&mut self, _scope: (u32, u32)) {}
    /// Marks `b` as rarely executed (error paths).
    fn set_cold(&mut self, b: Self::Block);
    /// Ends the current block by returning a status (`i32`).
    fn ret(&mut self, status: Self::Value);

    /// A new mutable variable of type `ty`.
    fn declare_var(&mut self, ty: Ty) -> Self::Var;
    /// Assigns a variable.
    fn def_var(&mut self, var: Self::Var, v: Self::Value);
    /// The current value of a variable.
    fn use_var(&mut self, var: Self::Var) -> Self::Value;
    /// A fresh stack slot for one scalar value (8 bytes): where the
    /// lowering keeps a value used far from its definition, so that the
    /// register allocator does not track it through everything in between.
    fn slot(&mut self) -> Self::Slot;
    /// Stores `v` (of type `ty`) in slot `s`.
    fn slot_store(&mut self, ty: Ty, v: Self::Value, s: Self::Slot);
    /// The value of type `ty` in slot `s`.
    fn slot_load(&mut self, ty: Ty, s: Self::Slot) -> Self::Value;
    /// Declares that `var` is dead from here on (its scope has ended): a
    /// later [`Self::declare_var`] of the same type may return it again.
    /// Cranelift keeps a table per variable as long as the function's
    /// blocks, so reusing variables keeps that memory linear.
    fn release_var(&mut self, _var: Self::Var) {}

    /// True when the lowering should add the partial sums of `sum` in
    /// pairs of lanes, two `f64`s per instruction (`lower/sum.rs`): a
    /// backend without a vectoriser of its own (Cranelift). LLVM's SLP
    /// vectoriser turns the scalar partial sums into vector code itself.
    /// The methods below that take or make pairs are called only when this
    /// is true.
    fn f64_pairs(&self) -> bool {
        false
    }
    /// True when the unrolled rounds of a fused sum of `width` sums (the
    /// results of one comprehension: a value and its tangents, two points
    /// of a jammed comprehension) are computed on pairs, each sum's
    /// partial sums `lanes * k ..` one pair (`lower/sum.rs`): on
    /// Cranelift, as every sum; on LLVM, for two sums or more, whose
    /// scalar partials its SLP vectoriser packs across the sums (one lane
    /// per sum, filled by loads from several rows) rather than along them,
    /// and for a body computing `exp` or `tanh` (`inline_math`), whose
    /// long chains of scalar operations it packs two lanes wide at most.
    fn pairs_in_sums(&self, width: usize, inline_math: bool) -> bool {
        let _ = (width, inline_math);
        self.f64_pairs()
    }
    /// True when pairs compute lane by lane what scalars do: comparisons
    /// as lane masks, selects of them, integer lanes, bit casts and so the
    /// inline math functions ([`Self::splat_int_pair`]). Cranelift's pairs
    /// and LLVM's vectors of four or eight.
    fn lanewise_pairs(&self) -> bool {
        self.f64_pairs()
    }
    /// The number of `f64`s in a pair: 2 (Cranelift's `f64x2`), or 8 on
    /// x86-64 and 4 elsewhere (LLVM's `<8 x double>` and `<4 x double>`, in
    /// sums only: [`Self::pairs_in_sums`]); a divisor of `ops::SUM_LANES`.
    fn pair_lanes(&self) -> usize {
        2
    }
    /// A mutable variable holding a pair of `f64`s ([`Self::f64_pairs`]).
    fn declare_pair_var(&mut self) -> Self::Var {
        unreachable!("pairs are used only when f64_pairs() is true")
    }
    /// The pair `(p[0], p[1], ..)` of [`Self::pair_lanes`] array elements
    /// ([`Mem::Data`]) at `addr`, aligned to 8 bytes only
    /// ([`Self::f64_pairs`]).
    fn load_pair(&mut self, _addr: Self::Value) -> Self::Value {
        unreachable!("pairs are used only when f64_pairs() is true")
    }
    /// Stores the pair `v` at `addr` as two array elements ([`Mem::Data`]),
    /// aligned to 8 bytes only ([`Self::f64_pairs`]).
    fn store_pair(&mut self, _v: Self::Value, _addr: Self::Value) {
        unreachable!("pairs are used only when f64_pairs() is true")
    }
    /// The pair `(x, x, ..)` ([`Self::f64_pairs`]).
    fn splat_pair(&mut self, _x: Self::Value) -> Self::Value {
        unreachable!("pairs are used only when f64_pairs() is true")
    }
    /// The pair of `i64`s `(x, x)` ([`Self::lanewise_pairs`]): the integer
    /// lanes of the inline math functions (`lower/inline_math.rs`), which
    /// on such a backend also run on pairs. There, [`Self::int`] (`Add`,
    /// `Sub`, `Or`, and the shifts `Shl` and `UShr` by a single `i64`:
    /// x86-64 shifts 64-bit lanes arithmetically only with AVX-512, which
    /// valgrind cannot run), [`Self::fcmp`] (a
    /// pair of lane masks, which only [`Self::select`] and `Or` take),
    /// [`Self::select`], [`Self::float_unary`], [`Self::float_strict`] and
    /// the bit casts of [`Self::convert`] apply lane by lane.
    fn splat_int_pair(&mut self, _x: Self::Value) -> Self::Value {
        unreachable!("integer lanes are used only when lanewise_pairs() is true")
    }
    /// The pair `(x, x)` of an `f64` constant ([`Self::f64_pairs`]): what
    /// [`Self::splat_pair`] of [`Self::fconst`] gives, but a backend may
    /// load it from a constant pool rather than build it.
    fn const_pair(&mut self, x: f64) -> Self::Value {
        let c = self.fconst(x);
        self.splat_pair(c)
    }
    /// The pair `(x, x)` of an `i64` constant ([`Self::splat_int_pair`]).
    fn const_int_pair(&mut self, x: i64) -> Self::Value {
        let c = self.iconst(Ty::I64, x);
        self.splat_int_pair(c)
    }
    /// Lane `lane` (below [`Self::pair_lanes`]) of a pair
    /// ([`Self::f64_pairs`]).
    fn pair_lane(&mut self, _pair: Self::Value, _lane: u8) -> Self::Value {
        unreachable!("pairs are used only when f64_pairs() is true")
    }

    /// Calls a runtime, C library or math function; returns its result.
    fn call(&mut self, callee: Callee, args: &[Self::Value]) -> Result<Self::Value>;
    /// Calls the generated function compiled for the definition `func` of
    /// the program (a call kept by inlining: [`crate::Callees`]) with the
    /// internal calling convention, `[ctx, args, results]`; returns its
    /// status (an `i32`).
    ///
    /// Errors: [`crate::CodegenError::Malformed`] when the module was
    /// given no target for `func`.
    fn call_function(&mut self, func: arrayad_ir::FuncId, args: [Self::Value; 3]) -> Result<Self::Value>;
    /// The entry address of the generated function compiled for `func`
    /// (as [`Self::call_function`] calls it), for the runtime to call.
    ///
    /// Errors: [`crate::CodegenError::Malformed`] when the module was
    /// given no target for `func`.
    fn function_address(&mut self, func: arrayad_ir::FuncId) -> Result<Self::Value>;
    /// The address of a static, NUL-terminated copy of `text`.
    fn message(&mut self, text: &str) -> Result<Self::Value>;
}
