//===- FuseAmax.cpp - a float8 cast's amax written by its input's producer -===//
//
// --float8=tensorwise scales a cast by max / amax of its whole input, so
// cast_fp8 reads x twice: its amax, then the cast. Where x is an output of
// a kernel that can also write that output's amax (kernels.def's `amax`:
// add_rms_norm's y, swiglu's y, swiglu_grad's dg and du, rotary's y; and
// rms_norm_grad's dx where it adds the residual gradient, add_dr 2), that
// kernel does,
// and the cast reads x once, as torch.compile fuses torchao's amax into
// the op before it:
//
//   P(... -> x); cast_fp8(x -> q, s[, qt])                  (rowwise 0)
//     => P(... -> x, a); fp8_scales(a -> s); cast_fp8_scaled(x, s -> q[, qt])
//
// and the amax that rt-float8-tp-scales gathers over the tp ranks:
//
//   P(... -> x); amax_group(x -> a)  =>  P(... -> x, a)
//
// The bytes and scales are the unfused cast's, bit for bit: P's amax is of
// x as stored, fp8_scales computes cast_fp8's scale from it. Where: x is
// the whole of P's output (the same buffer, all its elements, the same
// dtype), P precedes the cast in its block on its stream, and nothing
// between them touches x's buffer. Runs after rt-float8-tp-scales, before
// memory planning.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/rt/Float8Scales.h"
#include "passes/rt/RtMatch.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace shardc {
#define GEN_PASS_DEF_RTFUSEAMAX
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

/// Where kernel `k` writes the amax of its output buffer `out`: the index
/// of that amax among k's buffers once it does, how many elements `out`
/// has and of what dtype, and the integer (`flag`) whose value `on` has it
/// write amaxes (`on - 1` before: the buffers that adds are the amaxes);
/// nullopt when k cannot.
struct AmaxSlot {
  int64_t slot, elements, dtype, flag, on = 1;
};
std::optional<AmaxSlot> amaxSlotOf(rt::KernelOp k, Value out) {
  ArrayRef<int64_t> i = k.getInts();
  auto buffers = k.getBuffers();
  if (isKernel(k, abi::KernelId::add_rms_norm) && buffers[4] == out) {
    namespace K = abi::add_rms_norm;
    return AmaxSlot{5, i[K::M] * i[K::C], i[K::dtype], K::amax};
  }
  if (isKernel(k, abi::KernelId::swiglu) && buffers[2] == out) {
    namespace K = abi::swiglu;
    return AmaxSlot{3, i[K::n], i[K::dtype], K::amax};
  }
  if (isKernel(k, abi::KernelId::swiglu_grad) &&
      (buffers[3] == out || buffers[4] == out)) {
    namespace K = abi::swiglu_grad;
    return AmaxSlot{buffers[3] == out ? 5 : 6, i[K::n], i[K::dtype], K::amax};
  }
  if (isKernel(k, abi::KernelId::rotary) && buffers[1] == out) {
    namespace K = abi::rotary;
    return AmaxSlot{2, i[K::B] * i[K::H] * i[K::T] * i[K::D], i[K::dtype],
                    K::amax};
  }
  // The norm's gradient plus the residual's (rt-fuse-norm-grad-add):
  // add_dr 1 becomes 2.
  if (isKernel(k, abi::KernelId::rms_norm_grad) && buffers[3] == out &&
      i[abi::rms_norm_grad::add_dr] >= 1) {
    namespace K = abi::rms_norm_grad;
    return AmaxSlot{6, i[K::M] * i[K::C], i[K::dtype], K::add_dr, 2};
  }
  return std::nullopt;
}

/// The last op before `at` in its block that touches `x`'s buffer, or null.
Operation *lastToucher(Value x, Operation *at) {
  Value root = viewRoot(x);
  for (Operation *op = at->getPrevNode(); op; op = op->getPrevNode()) {
    if (isa<rt::ViewOp>(op))
      continue;
    if (touchesRoots(op, {root}))
      return op;
  }
  return nullptr;
}

/// Makes the kernel that writes `x` (n elements of `dtype`) last before
/// kernel `at`, on at's stream, also write x's amax where it can (its
/// `amax` set, each amax buffer a new allocation before it); returns the
/// buffer that holds x's amax after it, or null where there is no such
/// kernel.
Value amaxFromProducer(Value x, int64_t n, int64_t dtype, rt::KernelOp at) {
  auto producer = dyn_cast_or_null<rt::KernelOp>(lastToucher(x, at));
  if (!producer || producer.getStream() != at.getStream())
    return {};
  std::optional<AmaxSlot> s = amaxSlotOf(producer, x);
  if (!s || s->elements != n || s->dtype != dtype)
    return {};
  ArrayRef<int64_t> ints = producer.getInts();
  if (ints[s->flag] == s->on)
    return producer.getBuffers()[s->slot];
  const abi::KernelInfo *info = abi::lookupKernel(producer.getName());
  OpBuilder b(producer);
  SmallVector<Value> bufs(producer.getBuffers());
  for (int64_t j = 0; j < info->buffersPer; ++j)
    bufs.push_back(rt::AllocOp::create(b, producer.getLoc(), 4));
  SmallVector<int64_t> newInts(ints);
  newInts[s->flag] = s->on;
  auto fused = rt::KernelOp::create(
      b, producer.getLoc(), producer.getCtx(), producer.getName(), bufs,
      newInts, producer.getFloats(), producer.getStream(),
      producer.getDtypeAttr());
  producer.erase();
  return fused.getBuffers()[s->slot];
}

/// cast_fp8(x -> q, s[, qt]) => fp8_scales(a -> s); cast_fp8_scaled(x, s ->
/// q[, qt]) with a the amax x's producer writes, where it can.
void fuseCast(rt::KernelOp cast) {
  namespace C8 = abi::cast_fp8;
  ArrayRef<int64_t> i = cast.getInts();
  int64_t R = i[C8::R], C = i[C8::C], dtype = i[C8::dtype];
  SmallVector<Value> bufs(cast.getBuffers()); // x q scale [qt]
  Value amax = amaxFromProducer(bufs[0], R * C, dtype, cast);
  if (!amax)
    return;
  OpBuilder b(cast);
  Location loc = cast.getLoc();
  launchKernel(b, loc, cast.getCtx(), abi::KernelId::fp8_scales,
               {amax, bufs[2]}, {1, 1, i[C8::format], dtype}, -1,
               cast.getStream());
  SmallVector<Value> out = {bufs[0], bufs[2], bufs[1]};
  if (i[C8::both])
    out.push_back(bufs[3]);
  launchKernel(b, loc, cast.getCtx(), abi::KernelId::cast_fp8_scaled, out,
               {R, C, dtype, i[C8::format], i[C8::trans], i[C8::both]}, dtype,
               cast.getStream());
  cast.erase();
}

/// amax_group(x -> a) of one tensor => nothing, a being what x's producer
/// writes, where it can.
void fuseAmaxGroup(rt::KernelOp group) {
  namespace G = abi::amax_group;
  ArrayRef<int64_t> i = group.getInts();
  if (i[G::k] != 1)
    return;
  Value x = group.getBuffers()[0], a = group.getBuffers()[1];
  Value amax = amaxFromProducer(x, i[G::kNumInts], i[G::dtype], group);
  if (!amax)
    return;
  group.erase();
  a.replaceAllUsesWith(amax);
  if (auto alloc = a.getDefiningOp<rt::AllocOp>())
    if (alloc->use_empty())
      alloc->erase();
}

struct RtFuseAmaxPass : public shardc::impl::RtFuseAmaxBase<RtFuseAmaxPass> {
  void runOnOperation() override {
    SmallVector<rt::KernelOp> casts, groups;
    getOperation().walk([&](rt::KernelOp k) {
      if (isKernel(k, abi::KernelId::cast_fp8) &&
          k.getInts()[abi::cast_fp8::rowwise] == 0)
        casts.push_back(k);
      if (isKernel(k, abi::KernelId::amax_group))
        groups.push_back(k);
    });
    for (rt::KernelOp cast : casts)
      fuseCast(cast);
    for (rt::KernelOp group : groups)
      fuseAmaxGroup(group);
  }
};

} // namespace
