//===- FuseSwiglu.cpp - SwiGLU's silu and product in one kernel each way -===//
//
// On a target with the fused kernels (TargetDescription::fusedSwiglu),
// Llama's MLP product silu(g) u, as convert-nn-to-rt lowers it and its
// gradient, becomes one kernel each way:
//
//   backward:  mul(dy, u) -> t; silu_grad(g, t) -> dg; mul(dy, s) -> du
//              (s written by silu(g), in forward or recomputed)
//     => swiglu_grad(g, u, dy) -> dg, du
//   forward:   silu(g) -> s; mul(s, u) -> y      (s read by nothing else)
//     => swiglu(g, u) -> y
//
// where every mul is of two contiguous tensors of one shape (no broadcast;
// the operands in either order), every kernel computes on one dtype over
// the same n elements, on one stream. The backward match goes first: it
// leaves s to the forward product alone (or to nothing: a silu whose output
// nothing reads is erased). The fused kernels round on bf16 where the
// unfused ones did (runtime::swiglu, runtime::swigluGrad): the same bits.
// The fused backward runs where the last of its kernels ran (its inputs
// written by then, its outputs read only after), their allocations moved
// before it. Runs after convert-nn-to-rt, before memory
// planning.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/rt/RtMatch.h"

#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_RTFUSESWIGLU
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

static_assert(int64_t(abi::mul::R) == int64_t(abi::add::R) &&
                  int64_t(abi::mul::dtype) == int64_t(abi::add::dtype) &&
                  int64_t(abi::mul::kNumInts) == int64_t(abi::add::kNumInts),
              "mul's ints are add's (plainAdd reads both)");
static_assert(int64_t(abi::silu::n) == int64_t(abi::silu_grad::n) &&
                  int64_t(abi::silu::dtype) == int64_t(abi::silu_grad::dtype),
              "silu and silu_grad share their ints");

/// The kernels' shared shape: n elements of a dtype on a stream.
struct Elements {
  int64_t n, dtype, stream;
  bool operator==(const Elements &o) const {
    return n == o.n && dtype == o.dtype && stream == o.stream;
  }
};

/// A plain mul's elements, or n = -1.
Elements mulElements(Operation *op) {
  if (!isKernel(op, abi::KernelId::mul))
    return {-1, 0, 0};
  auto k = cast<rt::KernelOp>(op);
  auto [M, C] = plainAdd(k);
  if (M < 0)
    return {-1, 0, 0};
  return {M * C, k.getInts()[abi::mul::dtype], k.getStream()};
}

/// A silu's or silu_grad's elements.
Elements siluElements(rt::KernelOp k) {
  return {k.getInts()[abi::silu::n], k.getInts()[abi::silu::dtype],
          k.getStream()};
}

/// The other operand of a two-operand kernel `k` reading `x`, or null.
Value otherOperand(rt::KernelOp k, Value x) {
  ValueRange b = k.getBuffers();
  if (b[0] == x && b[1] != x)
    return b[1];
  if (b[1] == x && b[0] != x)
    return b[0];
  return nullptr;
}

/// The silu kernel writing `s` from `g`, or null.
rt::KernelOp siluOf(Value s, Value g) {
  for (Operation *user : s.getUsers())
    if (isKernel(user, abi::KernelId::silu)) {
      auto k = cast<rt::KernelOp>(user);
      if (k.getBuffers()[1] == s && k.getBuffers()[0] == g)
        return k;
    }
  return nullptr;
}

struct RtFuseSwigluPass
    : public shardc::impl::RtFuseSwigluBase<RtFuseSwigluPass> {
  using Base::Base;

  void runOnOperation() override {
    const TargetDescription *t = lookupTargetOf(getOperation(), target);
    if (!t)
      return signalPassFailure();
    if (!t->fusedSwiglu)
      return;
    SmallVector<rt::KernelOp> grads, silus;
    getOperation().walk([&](rt::KernelOp k) {
      if (isKernel(k, abi::KernelId::silu_grad))
        grads.push_back(k);
    });
    for (rt::KernelOp g : grads)
      fuseGrad(g);
    getOperation().walk([&](rt::KernelOp k) {
      if (isKernel(k, abi::KernelId::silu))
        silus.push_back(k);
    });
    for (rt::KernelOp s : silus)
      fuseForward(s);
  }

  /// The du mul of a backward: a plain mul of `dy` and an output of a silu
  /// of `g`, on `e`, other than `except`.
  rt::KernelOp duMul(Value dy, Value g, const Elements &e,
                     rt::KernelOp except) {
    for (Operation *user : dy.getUsers()) {
      if (user == except.getOperation() || !(mulElements(user) == e))
        continue;
      auto d = cast<rt::KernelOp>(user);
      Value s = otherOperand(d, dy);
      if (s && d.getBuffers()[2] != dy && d.getBuffers()[2] != s &&
          siluOf(s, g))
        return d;
    }
    return nullptr;
  }

  /// Whether every reader of `out` other than its writer `w` comes after
  /// `at` (the fused kernel, at `at`, writes it in w's place).
  static bool readAfter(Value out, rt::KernelOp w, Operation *at) {
    return llvm::all_of(out.getUsers(), [&](Operation *user) {
      return user == w.getOperation() ||
             (user->getBlock() == at->getBlock() && at->isBeforeInBlock(user));
    });
  }

  void fuseGrad(rt::KernelOp sg) {
    Value g = sg.getBuffers()[0], t = sg.getBuffers()[1],
          dg = sg.getBuffers()[2];
    Elements e = siluElements(sg);
    auto tAlloc = t.getDefiningOp<rt::AllocOp>();
    if (!tAlloc || g == t || !t.hasNUses(2))
      return;
    rt::KernelOp tm;
    for (Operation *user : t.getUsers())
      if (user != sg.getOperation())
        tm = dyn_cast<rt::KernelOp>(user);
    if (!tm || !(mulElements(tm) == e) || tm.getBuffers()[2] != t ||
        tm->getBlock() != sg->getBlock() || !tm->isBeforeInBlock(sg))
      return;
    // Which of t's factors is dy: the one a du mul shares. A product of
    // the other factor and silu(g) (a recomputed forward's u silu(g)) has
    // the same form; the du mul is the one after t's, where both are.
    struct Match {
      Value dy, u;
      rt::KernelOp d;
      Operation *at; ///< d, for ordering
    };
    SmallVector<Match> matches;
    for (int side : {0, 1}) {
      Value dy = tm.getBuffers()[side], u = tm.getBuffers()[1 - side];
      rt::KernelOp d = duMul(dy, g, e, tm);
      if (d && d->getBlock() == sg->getBlock() && u != dy)
        matches.push_back({dy, u, d, d.getOperation()});
    }
    llvm::stable_sort(matches, [&](const Match &a, const Match &b) {
      return tm->isBeforeInBlock(a.at) && !tm->isBeforeInBlock(b.at);
    });
    for (Match &m : matches) {
      // The fused kernel runs where the last of the three ran: its inputs
      // are written by then; dg's and du's readers must come after it.
      Operation *at = sg->isBeforeInBlock(m.d) ? m.d.getOperation()
                                                : sg.getOperation();
      Value du = m.d.getBuffers()[2];
      if (!readAfter(dg, sg, at) || !readAfter(du, m.d, at) ||
          !hoistable(dg, at) || !hoistable(du, at))
        continue;
      hoistBefore(dg, at);
      hoistBefore(du, at);
      OpBuilder b(at);
      rt::KernelOp::create(b, sg.getLoc(), tm.getCtx(),
                           abi::kernelInfo(abi::KernelId::swiglu_grad).name,
                           ValueRange{g, m.u, m.dy, dg, du},
                           ArrayRef<int64_t>{e.n, e.dtype, 0}, ArrayRef<double>{},
                           e.stream, sg.getDtypeAttr());
      rt::KernelOp silu = siluOf(otherOperand(m.d, m.dy), g);
      sg->erase();
      tm->erase();
      m.d->erase();
      tAlloc->erase();
      eraseIfUnread(silu);
      return;
    }
  }

  /// Erases a silu whose output nothing reads (and that output's
  /// allocation).
  void eraseIfUnread(rt::KernelOp silu) {
    Value s = silu.getBuffers()[1];
    if (!s.hasOneUse())
      return;
    silu->erase();
    if (auto alloc = s.getDefiningOp<rt::AllocOp>())
      if (alloc->use_empty())
        alloc->erase();
  }

  void fuseForward(rt::KernelOp silu) {
    Value g = silu.getBuffers()[0], s = silu.getBuffers()[1];
    auto sAlloc = s.getDefiningOp<rt::AllocOp>();
    if (!sAlloc || g == s || !s.hasNUses(2))
      return;
    rt::KernelOp m;
    for (Operation *user : s.getUsers())
      if (user != silu.getOperation())
        m = dyn_cast<rt::KernelOp>(user);
    Elements e = siluElements(silu);
    if (!m || !(mulElements(m) == e) || m->getBlock() != silu->getBlock() ||
        !silu->isBeforeInBlock(m))
      return;
    Value u = otherOperand(m, s), y = m.getBuffers()[2];
    if (!u || y == s || y == u || y == g)
      return;
    OpBuilder b(m);
    rt::KernelOp::create(b, m.getLoc(), m.getCtx(),
                         abi::kernelInfo(abi::KernelId::swiglu).name,
                         ValueRange{g, u, y}, ArrayRef<int64_t>{e.n, e.dtype, 0},
                         ArrayRef<double>{}, e.stream, silu.getDtypeAttr());
    m->erase();
    silu->erase();
    sAlloc->erase();
  }
};

} // namespace
