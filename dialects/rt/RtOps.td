//===- RtOps.td - the rt dialect -----------------------------*- tablegen -*-===//
//
// The rt dialect: the scheduled runtime program. Buffers are byte ranges of
// the regions the runtime owns (parameters, inputs/outputs, the activation
// arena); kernels are calls into the runtime's backend on a stream; events
// order streams. Both backends (cpu, cuda) run the same rt program.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_OPS
#define SHARDC_RT_OPS

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Rt_Dialect : Dialect {
  let name = "rt";
  let summary = "Scheduled runtime program: buffers, kernel calls, streams, events";
  let description = [{
    The last project dialect before LLVM. A step function takes the runtime
    context and the base pointers of its memory regions; its body views
    buffers at byte offsets fixed by the memory plan and launches backend
    kernels on streams. Lowered to LLVM calls of the runtime's C ABI
    `void shardc_k_<name>(ctx, void **buffers, const int64_t *ints,
    const double *floats, int64_t stream)`.
  }];
  let cppNamespace = "::shardc::rt";
  let useDefaultTypePrinterParser = 1;
}

class Rt_Type<string name, string typeMnemonic>
    : TypeDef<Rt_Dialect, name> {
  let mnemonic = typeMnemonic;
}

def Rt_BufferType : Rt_Type<"Buffer", "buffer"> {
  let summary = "a byte range of runtime-owned memory";
}

def Rt_ContextType : Rt_Type<"Context", "context"> {
  let summary = "the runtime context: backend, streams, events";
}

class Rt_Op<string mnemonic, list<Trait> traits = []>
    : Op<Rt_Dialect, mnemonic, traits>;

def Rt_AllocOp : Rt_Op<"alloc"> {
  let summary = "a transient buffer, before memory planning";
  let description = [{
    A buffer of `size` bytes live from this op to its last use. The memory
    planner replaces every `rt.alloc` by an `rt.view` into the arena.

    Example:
    ```mlir
    %b = rt.alloc 4096 : !rt.buffer
    ```
  }];
  let arguments = (ins I64Attr:$size);
  let results = (outs Rt_BufferType:$result);
  let builders = [OpBuilder<(ins "int64_t":$size), [{
    build($_builder, $_state, BufferType::get($_builder.getContext()), size);
  }]>];
  let assemblyFormat = "$size attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Rt_ConstantOp : Rt_Op<"constant", [Pure]> {
  let summary = "a read-only buffer holding a constant tensor";
  let description = [{
    The tensor's elements in the runtime's layout (f32, i32, i64; i1 as one
    byte), embedded in the executable. Kernels only read it.

    Example:
    ```mlir
    %c = rt.constant dense<[1.0, 2.0]> : tensor<2xf32> : !rt.buffer
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Rt_BufferType:$result);
  let builders = [OpBuilder<(ins "mlir::ElementsAttr":$value), [{
    build($_builder, $_state, BufferType::get($_builder.getContext()), value);
  }]>];
  let assemblyFormat = "$value attr-dict `:` type($result)";
}

def Rt_ViewOp : Rt_Op<"view", [Pure]> {
  let summary = "a buffer at a byte offset of a base region";
  let description = [{
    The buffer `offset` bytes into `base`. A view of a region names a slot
    of it; a view of an `rt.alloc` (`size`: the bytes it spans) is a part
    of that buffer that a kernel reads or writes in place: a slice, a
    concatenation's part, or a strided operand (rt-slice-views,
    rt-concat-views, rt-attention-layout). The memory planner keeps the
    allocation live while any view of it is used.

    Example:
    ```mlir
    %b = rt.view %arena[128] : !rt.buffer
    %p = rt.view %flat[4096] size 1024 : !rt.buffer
    ```
  }];
  let arguments = (ins Rt_BufferType:$base, I64Attr:$offset,
                   OptionalAttr<I64Attr>:$size);
  let results = (outs Rt_BufferType:$result);
  let builders = [OpBuilder<(ins "mlir::Value":$base, "int64_t":$offset), [{
    build($_builder, $_state, BufferType::get($_builder.getContext()), base,
          offset, mlir::IntegerAttr());
  }]>, OpBuilder<(ins "mlir::Value":$base, "int64_t":$offset,
                      "int64_t":$size), [{
    build($_builder, $_state, BufferType::get($_builder.getContext()), base,
          offset, $_builder.getI64IntegerAttr(size));
  }]>];
  let assemblyFormat =
      "$base `[` $offset `]` (`size` $size^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Rt_KernelOp : Rt_Op<"kernel"> {
  let summary = "launch a backend kernel on a stream";
  let description = [{
    Calls the backend kernel `name` with its buffers, integer arguments
    `ints` and floating-point arguments `floats` on `stream` (0 is the
    compute stream, 1 the communication stream, 2 the stream of the host
    copies of `--offload=cpu`). Each kernel's arguments
    are defined once, in `runtime/abi/kernels.def`; the verifier checks
    the counts against it. Collectives are the typed ops below, not
    kernels.

    A typed kernel (one whose integers include `dtype`) computes on the
    element type `dtype` (f32 when absent): its float buffers hold that
    type, and its `dtype` integer is that type's code; the verifier checks
    both agree.

    Example:
    ```mlir
    rt.kernel %ctx, "silu"(%x, %y) {ints = array<i64: 1024, 0>, floats = array<f64>, stream = 0 : i64}
    rt.kernel %ctx, "silu"(%x, %y) {dtype = bf16, ints = array<i64: 1024, 1>, floats = array<f64>, stream = 0 : i64}
    ```
  }];
  let arguments = (ins Rt_ContextType:$ctx, StrAttr:$name,
                   Variadic<Rt_BufferType>:$buffers,
                   DenseI64ArrayAttr:$ints, DenseF64ArrayAttr:$floats,
                   DefaultValuedAttr<I64Attr, "0">:$stream,
                   OptionalAttr<TypeAttr>:$dtype);
  let assemblyFormat = "$ctx `,` $name `(` $buffers `)` attr-dict";
  let builders = [OpBuilder<(ins "mlir::Value":$ctx, "llvm::StringRef":$name,
      "mlir::ValueRange":$buffers, "llvm::ArrayRef<int64_t>":$ints,
      "llvm::ArrayRef<double>":$floats, "uint64_t":$stream), [{
    build($_builder, $_state, ctx, name, buffers, ints, floats, stream,
          /*dtype=*/mlir::TypeAttr());
  }]>];
  let extraClassDeclaration = [{
    /// The element type a typed kernel computes on (f32 when unset).
    mlir::Type getComputeType();
  }];
  let hasVerifier = 1;
}

def Rt_AllGatherOp : Rt_Op<"all_gather", [AttrSizedOperandSegments]> {
  let summary = "all-gather buffers over one grid axis (one collective)";
  let description = [{
    Every rank contributes `counts[j]` elements of `dtype` from `inputs[j]`;
    `outputs[j]` receives the rank-major concatenation of every rank's
    block. Several inputs are gathered by one exchange through the planned
    `scratch` buffers (pack, gathered), as `rt-coalesce-collectives` makes
    them for an FSDP group. `subgroup` N > 0 gathers within groups of N
    consecutive ranks of the axis (`--reshard-after-forward=N`). `group` is
    the FSDP group of the gathered parameters. Runs on `stream`.

    Example:
    ```mlir
    rt.all_gather %ctx (%in) -> (%out) {axis = 0 : i64, counts = array<i64: 64>, dtype = f32, stream = 1 : i64}
    ```
  }];
  let arguments = (ins Rt_ContextType:$ctx, Variadic<Rt_BufferType>:$inputs,
                   Variadic<Rt_BufferType>:$outputs,
                   Variadic<Rt_BufferType>:$scratch, I64Attr:$axis,
                   TypeAttr:$dtype, DenseI64ArrayAttr:$counts,
                   DefaultValuedAttr<I64Attr, "0">:$subgroup,
                   OptionalAttr<I64Attr>:$group,
                   DefaultValuedAttr<I64Attr, "1">:$stream);
  let assemblyFormat = [{
    $ctx `(` $inputs `)` `->` `(` $outputs `)`
    (`scratch` `(` $scratch^ `)`)? attr-dict
  }];
  let hasVerifier = 1;
}

def Rt_ReduceScatterOp : Rt_Op<"reduce_scatter"> {
  let summary = "sum over one grid axis, each rank keeping its block";
  let description = [{
    `input` holds P blocks of `count` elements of `dtype`; rank r's `output`
    receives the sum over the ranks of the axis of block r. `scratch` is a
    planned block for the ring's partial sums.

    Example:
    ```mlir
    rt.reduce_scatter %ctx %in -> %out scratch %tmp {axis = 0 : i64, count = 64 : i64, dtype = f32}
    ```
  }];
  let arguments = (ins Rt_ContextType:$ctx, Rt_BufferType:$input,
                   Rt_BufferType:$output, Rt_BufferType:$scratch,
                   I64Attr:$axis, TypeAttr:$dtype, I64Attr:$count,
                   OptionalAttr<I64Attr>:$group,
                   DefaultValuedAttr<I64Attr, "1">:$stream);
  let assemblyFormat = [{
    $ctx $input `->` $output `scratch` $scratch attr-dict
  }];
  let hasVerifier = 1;
}

def Rt_AllReduceOp : Rt_Op<"all_reduce"> {
  let summary = "sum a buffer over one grid axis";
  let description = [{
    Every rank's `output` receives the sum over the axis of `input` (`count`
    elements of `dtype`); `output` may be `input`.

    Example:
    ```mlir
    rt.all_reduce %ctx %in -> %out {axis = 0 : i64, count = 64 : i64, dtype = f32}
    ```
  }];
  let arguments = (ins Rt_ContextType:$ctx, Rt_BufferType:$input,
                   Rt_BufferType:$output, I64Attr:$axis, TypeAttr:$dtype,
                   I64Attr:$count, OptionalAttr<I64Attr>:$group,
                   DefaultValuedAttr<I64Attr, "1">:$stream);
  let assemblyFormat = "$ctx $input `->` $output attr-dict";
  let hasVerifier = 1;
}

def Rt_EventRecordOp : Rt_Op<"event_record"> {
  let summary = "record an event on a stream";
  let description = [{
    Marks the point of `stream` after every kernel launched on it so far.

    Example:
    ```mlir
    rt.event_record %ctx {event = 3 : i64, stream = 1 : i64}
    ```
  }];
  let arguments = (ins Rt_ContextType:$ctx, I64Attr:$event, I64Attr:$stream);
  let assemblyFormat = "$ctx attr-dict";
}

def Rt_EventWaitOp : Rt_Op<"event_wait"> {
  let summary = "make a stream wait for an event";
  let description = [{
    Kernels launched on `stream` after this op start after the recorded
    point of `event`.

    Example:
    ```mlir
    rt.event_wait %ctx {event = 3 : i64, stream = 0 : i64}
    ```
  }];
  let arguments = (ins Rt_ContextType:$ctx, I64Attr:$event, I64Attr:$stream);
  let assemblyFormat = "$ctx attr-dict";
}

#endif // SHARDC_RT_OPS
