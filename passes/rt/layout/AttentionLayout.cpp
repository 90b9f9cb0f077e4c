//===- AttentionLayout.cpp - attention reads and writes rows in place ----===//
//
// A transformer's attention is surrounded by layout kernels: q, k and v are
// sliced out of the fused QKV projection [B*T, W] and transposed from
// [B,T,heads,D] to [B,heads,T,D]; o is transposed back for the output
// projection; in backward dO is transposed, and dq, dk, dv are transposed,
// padded back to [B*T, W] (slice_grad) and summed. llm.c has none of this:
// its attention reads Q, K and V by their strides. Here, for `attention`,
// `sdpa` and their gradients:
//
//   slice(qkv, x) {start s, size H*D}; transpose(x, q) {[B,T,H,D] -> 0213}
//     => q = rt.view qkv[s] read in rows of W elements
//   attention(.., o); transpose(o, z) {[B,H,T,D] -> 0213}
//     => o = z, written in rows of H*D elements
//   attention_grad(.., dq, dk, dv); transpose; slice_grad; add; add -> dqkv
//     => dq, dk, dv = views of dqkv at their columns, in rows of W
//
// Between a projection and attention may stand a rotary embedding (q and
// k of Llama), on [B,heads,T,D] between two transposes; it takes layout
// rows instead, on the projection's [B,T,heads,D] as it is:
//
//   transpose(x, xt) {0213}; rotary(xt, q); attention(q, ..)
//     => rotary(x, q) {rows}; attention(q, ..) read in rows of heads*D
//   attention_grad(.., dq, ..); rotary(dq, r) {inverse}; transpose(r, z)
//     => attention_grad(.., dq in rows, ..); rotary(dq, z) {inverse, rows}
//
// Each operand may be read or written in place: a transposed operand reads
// the transpose's source ([B*T, heads*D] rows), a sliced one the slice's
// source; an output whose only reader is such a transpose is written where
// the transpose would have put it. The kernels take layout
// abi::kAttentionRows with each operand's row stride (ld_q, ld_k, ld_v,
// ld_o; dq, dk, dv and dO share them), so a forward and the gradient that
// reads its q, k, v and o are laid out together, and only where every
// operand of both can be. Runs after convert-nn-to-rt and
// rt-fused-attention, before memory planning; any target (the CPU gathers
// strided operands; CUDA's kernels and cuDNN read strides).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/rt/RtMatch.h"

#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_RTATTENTIONLAYOUT
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

namespace At = abi::attention;

// Every attention kernel's ints: attention's shape first; its layout and
// row strides consecutive (sdpa's after ws_bytes).
static_assert(int64_t(abi::sdpa::B) == int64_t(At::B) &&
                  int64_t(abi::sdpa::dtype) == int64_t(At::dtype) &&
                  int64_t(abi::attention_grad::layout) == int64_t(At::layout) &&
                  int64_t(abi::sdpa::layout) ==
                      int64_t(abi::sdpa_grad::layout) &&
                  int64_t(At::ld_o) == int64_t(At::layout) + 4 &&
                  int64_t(abi::sdpa::ld_o) == int64_t(abi::sdpa::layout) + 4,
              "attention kernels share their shape and layout ints");

bool isSdpa(rt::KernelOp k) {
  return isKernel(k, abi::KernelId::sdpa) ||
         isKernel(k, abi::KernelId::sdpa_grad);
}
bool isForward(Operation *op) {
  return isKernel(op, abi::KernelId::attention) ||
         isKernel(op, abi::KernelId::sdpa);
}
bool isGrad(Operation *op) {
  return isKernel(op, abi::KernelId::attention_grad) ||
         isKernel(op, abi::KernelId::sdpa_grad);
}
int64_t layoutAt(rt::KernelOp k) {
  return isSdpa(k) ? int64_t(abi::sdpa::layout) : int64_t(At::layout);
}

/// Buffer positions of q, k, v, o (dO for a gradient) and dq, dk, dv.
struct Slots {
  int q = 0, k = 1, v = 2, o = -1, dO = -1, dq = -1, dk = -1, dv = -1;
};
Slots slotsOf(rt::KernelOp k) {
  if (isKernel(k, abi::KernelId::attention) || isKernel(k, abi::KernelId::sdpa))
    return {0, 1, 2, 3};
  if (isKernel(k, abi::KernelId::attention_grad))
    return {0, 1, 2, -1, 3, 4, 5, 6};
  return {0, 1, 2, 3, 5, 6, 7, 8}; // sdpa_grad
}

/// An operand's shape: `heads` heads of `rows` rows.
struct Geometry {
  int64_t B, heads, rows, D, dtype;
};

/// Where an operand lives in rows: element `offset` of `base`, rows of `ld`
/// elements; and the ops that only produced its old form.
struct Placement {
  Value base;
  int64_t offset = 0, ld = 0;
  SmallVector<Operation *> dead;
  /// Allocations to move before the kernel (an output's destination).
  SmallVector<Operation *> hoist;
  /// A rotary embedding between the operand and the projection, to run in
  /// rows on buffer `rotaryBuffer` at its buffer `rotarySlot` (its input
  /// for q and k, its output for dq and dk).
  rt::KernelOp rotary;
  int rotarySlot = 0;
  Value rotaryBuffer;
  /// Further transposes of an output that repeat the first (recomputed):
  /// their outputs are replaced by `base`.
  SmallVector<rt::KernelOp> copies;
};

namespace Ro = abi::rotary;
static_assert(int64_t(Ro::B) == int64_t(abi::rotary_table::B) &&
                  int64_t(Ro::dtype) == int64_t(abi::rotary_table::dtype) &&
                  int64_t(Ro::layout) == int64_t(abi::rotary_table::layout),
              "rotary kernels share their shape and layout ints");

/// `op` as a rotary embedding of [B,heads,rows,D] (`g`) on that layout, or
/// null.
rt::KernelOp rotaryOn(Operation *op, const Geometry &g) {
  if (!isKernel(op, abi::KernelId::rotary) &&
      !isKernel(op, abi::KernelId::rotary_table))
    return nullptr;
  auto k = cast<rt::KernelOp>(op);
  ArrayRef<int64_t> i = k.getInts();
  if (i[Ro::B] != g.B || i[Ro::H] != g.heads || i[Ro::T] != g.rows ||
      i[Ro::D] != g.D || i[Ro::dtype] != g.dtype ||
      i[Ro::layout] != abi::kAttentionBHTD)
    return nullptr;
  return k;
}

/// Whether `k` is a transpose of [d0, d1, d2, d3] by [0, 2, 1, 3] on
/// `dtype`.
bool isSwap12(Operation *op, ArrayRef<int64_t> dims, int64_t dtype) {
  if (!isKernel(op, abi::KernelId::transpose))
    return false;
  ArrayRef<int64_t> i = cast<rt::KernelOp>(op).getInts();
  namespace T = abi::transpose;
  if (i.size() != T::kNumInts + 8 || i[T::R] != 4 || i[T::dtype] != dtype)
    return false;
  ArrayRef<int64_t> d = i.slice(T::kNumInts, 4), p = i.slice(T::kNumInts + 4, 4);
  return d == dims && p == ArrayRef<int64_t>{0, 2, 1, 3};
}

/// The op among `v`'s users other than `except` that writes it: its
/// defining kernel (a transient has one writer).
rt::KernelOp writerOf(Value v, ArrayRef<Operation *> except) {
  rt::KernelOp found;
  for (Operation *user : v.getUsers()) {
    if (llvm::is_contained(except, user))
      continue;
    auto k = dyn_cast<rt::KernelOp>(user);
    if (!k || found)
      return nullptr;
    found = k;
  }
  return found;
}

/// Operand `x` of geometry `g` in its own buffer in rows, `rotary` to run
/// in rows with `buffer` at its buffer `slot`; `dead` its old form.
Placement rotated(Value x, const Geometry &g, SmallVector<Operation *> dead,
                  rt::KernelOp rotary, int slot, Value buffer) {
  Placement p;
  p.base = x;
  p.ld = g.heads * g.D;
  p.dead = std::move(dead);
  p.rotary = rotary;
  p.rotarySlot = slot;
  p.rotaryBuffer = buffer;
  return p;
}

/// An input operand `x` that `rotary` writes from the [B,heads,rows,D]
/// transpose of a dense [B,rows,heads,D] buffer: the rotary reads that
/// buffer in rows and writes x in rows.
std::optional<Placement> rotatedInRows(Value x, const Geometry &g,
                                       rt::KernelOp rotary) {
  ValueRange rb = rotary.getBuffers();
  Value xt = rb[0];
  if (rb.back() != x || !xt.getDefiningOp<rt::AllocOp>() ||
      llvm::count(rb, xt) != 1)
    return std::nullopt;
  rt::KernelOp t = writerOf(xt, {rotary});
  if (!t || t.getBuffers()[1] != xt ||
      !isSwap12(t, {g.B, g.rows, g.heads, g.D}, g.dtype))
    return std::nullopt;
  return rotated(x, g, {t, xt.getDefiningOp()}, rotary, 0, t.getBuffers()[0]);
}

/// An input operand `x` (q, k, v, or dO) of the attention kernels
/// `readers`, read in rows instead: x must be the [B,heads,rows,D]
/// transpose of a dense [B,rows,heads,D] buffer, or of a slice of the
/// columns of a [B*rows, W] one.
std::optional<Placement> readInRows(Value x, const Geometry &g,
                                    ArrayRef<Operation *> readers) {
  if (!x.getDefiningOp<rt::AllocOp>())
    return std::nullopt;
  rt::KernelOp t = writerOf(x, readers);
  if (rt::KernelOp rotary = t ? rotaryOn(t, g) : nullptr)
    return rotatedInRows(x, g, rotary);
  if (!t || t.getBuffers()[1] != x ||
      !isSwap12(t, {g.B, g.rows, g.heads, g.D}, g.dtype))
    return std::nullopt;
  Placement p;
  p.dead = {t, x.getDefiningOp()};
  Value src = t.getBuffers()[0];
  p.base = src;
  p.ld = g.heads * g.D;
  if (!src.getDefiningOp<rt::AllocOp>())
    return p;
  rt::KernelOp s = writerOf(src, {t});
  namespace S = abi::slice;
  if (!s || !isKernel(s, abi::KernelId::slice) || s.getBuffers()[1] != src)
    return p;
  ArrayRef<int64_t> i = s.getInts();
  if (i[S::outer] != g.B * g.rows || i[S::size] != g.heads * g.D ||
      i[S::inner] != 1 || i[S::dtype] != g.dtype)
    return p;
  p.base = s.getBuffers()[0];
  p.offset = i[S::start];
  p.ld = i[S::n];
  p.dead.append({s, src.getDefiningOp()});
  return p;
}

/// An output operand `x` that `rotary` alone reads, into a buffer whose one
/// other reader transposes it to [B,rows,heads,D]: x is written in rows,
/// and the rotary reads it so and writes the transpose's output.
std::optional<Placement> rotateFromRows(Value x, const Geometry &g,
                                        rt::KernelOp rotary) {
  ValueRange rb = rotary.getBuffers();
  Value r = rb.back();
  if (rb[0] != x || llvm::count(rb, x) != 1 ||
      !r.getDefiningOp<rt::AllocOp>())
    return std::nullopt;
  rt::KernelOp t = writerOf(r, {rotary});
  if (!t || t.getBuffers()[0] != r ||
      !isSwap12(t, {g.B, g.heads, g.rows, g.D}, g.dtype))
    return std::nullopt;
  Value z = t.getBuffers()[1];
  if (!z.getDefiningOp<rt::AllocOp>())
    return std::nullopt;
  return rotated(x, g, {t, r.getDefiningOp()}, rotary, int(rb.size()) - 1, z);
}

/// An output operand `x` (o, dq, dk or dv) of `writer`, written in rows:
/// its only other readers are `readers` and one transpose to
/// [B,rows,heads,D], whose output it becomes. Where `readers` keep x (o,
/// which the fused attention's gradient reads) it may be transposed more
/// than once (--recompute=selective transposes it again for the output
/// projection's weight gradient): the later transposes' outputs become the
/// first's, which lives as long as x did.
std::optional<Placement> writeInRows(Value x, const Geometry &g,
                                     rt::KernelOp writer,
                                     ArrayRef<Operation *> readers) {
  if (!x.getDefiningOp<rt::AllocOp>() ||
      llvm::count(writer.getBuffers(), x) != 1)
    return std::nullopt;
  SmallVector<rt::KernelOp> others;
  for (Operation *user : x.getUsers()) {
    if (user == writer.getOperation() || llvm::is_contained(readers, user))
      continue;
    auto k = dyn_cast<rt::KernelOp>(user);
    if (!k || k->getBlock() != writer->getBlock() ||
        llvm::is_contained(others, k))
      return std::nullopt;
    others.push_back(k);
  }
  if (others.size() == 1)
    if (rt::KernelOp rotary = rotaryOn(others.front(), g))
      return rotateFromRows(x, g, rotary);
  if (others.empty() || (others.size() > 1 && readers.empty()))
    return std::nullopt;
  llvm::sort(others, [](rt::KernelOp a, rt::KernelOp b) {
    return a->isBeforeInBlock(b);
  });
  for (rt::KernelOp t : others)
    if (t.getBuffers()[0] != x || t.getBuffers()[1] == x ||
        !t.getBuffers()[1].getDefiningOp<rt::AllocOp>() ||
        !isSwap12(t, {g.B, g.heads, g.rows, g.D}, g.dtype))
      return std::nullopt;
  rt::KernelOp t = others.front();
  Value z = t.getBuffers()[1];
  Placement p;
  p.base = z;
  p.ld = g.heads * g.D;
  p.dead = {t, x.getDefiningOp()};
  p.hoist = {z.getDefiningOp()};
  p.copies.assign(others.begin() + 1, others.end());
  return p;
}

/// A padded gradient: slice_grad of a [B*rows, heads*D] buffer into the
/// columns [start, start + heads*D) of [B*rows, W].
struct Padded {
  rt::KernelOp pad;
  int64_t start, size, W;
};

std::optional<Padded> paddedOf(const Placement &p, const Geometry &g) {
  rt::KernelOp pad = writerOf(p.base, {p.dead.front()});
  if (!pad || !isKernel(pad, abi::KernelId::slice_grad) ||
      pad.getBuffers()[0] != p.base ||
      !pad.getBuffers()[1].getDefiningOp<rt::AllocOp>())
    return std::nullopt;
  namespace S = abi::slice_grad;
  ArrayRef<int64_t> i = pad.getInts();
  if (i[S::outer] != g.B * g.rows || i[S::size] != g.heads * g.D ||
      i[S::inner] != 1 || i[S::dtype] != g.dtype)
    return std::nullopt;
  return Padded{pad, i[S::start], i[S::size], i[S::n]};
}

/// An add of two buffers of one shape (no broadcast) on `dtype`.
bool isPlainAdd(Operation *op, int64_t dtype) {
  return isKernel(op, abi::KernelId::add) &&
         cast<rt::KernelOp>(op).getInts()[abi::add::dtype] == dtype &&
         plainAdd(cast<rt::KernelOp>(op)).first >= 0;
}

/// dq, dk and dv padded into the columns of one [B*T, W] gradient and summed
/// by two adds: their sum is that gradient, which they can write in place,
/// each at its columns. Updates the three placements; false if the pattern
/// is not there.
bool tileInto(MutableArrayRef<Placement> outs, const Geometry &gq,
              const Geometry &gkv) {
  SmallVector<Padded> pads;
  for (auto [n, p] : llvm::enumerate(outs)) {
    std::optional<Padded> pad = paddedOf(p, n == 0 ? gq : gkv);
    if (!pad)
      return false;
    pads.push_back(*pad);
  }
  int64_t W = pads[0].W;
  // The columns tile [0, W).
  SmallVector<std::pair<int64_t, int64_t>> cols;
  for (const Padded &p : pads) {
    if (p.W != W)
      return false;
    cols.push_back({p.start, p.size});
  }
  llvm::sort(cols);
  if (cols[0].first != 0 || cols[1].first != cols[0].first + cols[0].second ||
      cols[2].first != cols[1].first + cols[1].second ||
      cols[2].first + cols[2].second != W)
    return false;
  // add(r_a, r_b) -> t; add(t, r_c) or add(r_c, t) -> sum.
  SmallVector<Value> padded;
  for (Padded &p : pads)
    padded.push_back(p.pad.getBuffers()[1]);
  auto adderOf = [&](Value r) -> rt::KernelOp {
    if (!r.hasNUses(2))
      return nullptr;
    for (Operation *user : r.getUsers())
      if (isPlainAdd(user, gq.dtype) &&
          cast<rt::KernelOp>(user).getBuffers()[2] != r)
        return cast<rt::KernelOp>(user);
    return nullptr;
  };
  SmallVector<rt::KernelOp> adders;
  for (Value r : padded) {
    rt::KernelOp a = adderOf(r);
    if (!a)
      return false;
    if (!llvm::is_contained(adders, a))
      adders.push_back(a);
  }
  if (adders.size() != 2)
    return false;
  rt::KernelOp first = adders[0], second = adders[1];
  if (second->isBeforeInBlock(first))
    std::swap(first, second);
  Value t = first.getBuffers()[2], sum = second.getBuffers()[2];
  ValueRange sb = second.getBuffers();
  if (!t.getDefiningOp<rt::AllocOp>() || !t.hasNUses(2) ||
      (sb[0] != t && sb[1] != t) || !sum.getDefiningOp<rt::AllocOp>())
    return false;
  for (auto [p, pad] : llvm::zip(outs, pads)) { // pad: a copy
    p.dead.append({pad.pad, p.base.getDefiningOp(),
                   pad.pad.getBuffers()[1].getDefiningOp()});
    p.base = sum;
    p.offset = pad.start;
    p.ld = W;
    p.hoist = {sum.getDefiningOp()};
  }
  outs[0].dead.append({first, second, t.getDefiningOp()});
  return true;
}

struct RtAttentionLayoutPass
    : public shardc::impl::RtAttentionLayoutBase<RtAttentionLayoutPass> {
  void runOnOperation() override {
    SmallVector<rt::KernelOp> forwards;
    getOperation().walk([&](rt::KernelOp k) {
      if (isForward(k) && k.getInts()[layoutAt(k)] == abi::kAttentionBHTD)
        forwards.push_back(k);
    });
    for (rt::KernelOp fwd : forwards)
      layOut(fwd);
  }

  /// The gradient kernel reading fwd's q, k and v, if exactly one does.
  rt::KernelOp gradOf(rt::KernelOp fwd) {
    rt::KernelOp grad;
    ValueRange fb = fwd.getBuffers();
    for (Operation *user : fb[0].getUsers()) {
      if (!isGrad(user))
        continue;
      auto g = cast<rt::KernelOp>(user);
      ValueRange gb = g.getBuffers();
      if (gb[0] != fb[0] || gb[1] != fb[1] || gb[2] != fb[2])
        continue;
      if (grad)
        return nullptr;
      grad = g;
    }
    return grad;
  }

  void layOut(rt::KernelOp fwd) {
    ArrayRef<int64_t> i = fwd.getInts();
    int64_t dtype = i[At::dtype];
    Geometry gq{i[At::B], i[At::H], i[At::T], i[At::D], dtype};
    Geometry gkv{i[At::B], i[At::G], i[At::S], i[At::D], dtype};
    rt::KernelOp grad = gradOf(fwd);
    if (grad) {
      ArrayRef<int64_t> gi = grad.getInts();
      for (int64_t at : {At::B, At::H, At::G, At::T, At::S, At::D, At::dtype})
        if (gi[at] != i[at])
          return;
      if (gi[layoutAt(grad)] != abi::kAttentionBHTD)
        return;
    }
    SmallVector<Operation *> readers = {fwd};
    if (grad)
      readers.push_back(grad);
    ValueRange fb = fwd.getBuffers();
    // One buffer as two operands (self-attention on one tensor) is read in
    // one layout only: left as it is.
    if (fb[0] == fb[1] || fb[0] == fb[2] || fb[1] == fb[2])
      return;
    // q, k, v, o.
    SmallVector<Placement> ops;
    const Geometry inputs[] = {gq, gkv, gkv};
    for (auto [n, g] : llvm::enumerate(inputs)) {
      std::optional<Placement> p = readInRows(fb[n], g, readers);
      if (!p)
        return;
      ops.push_back(std::move(*p));
    }
    SmallVector<Operation *> oReaders;
    Slots gs = grad ? slotsOf(grad) : Slots();
    if (grad && gs.o >= 0) {
      if (grad.getBuffers()[gs.o] != fb[3])
        return;
      oReaders.push_back(grad);
    }
    std::optional<Placement> o = writeInRows(fb[3], gq, fwd, oReaders);
    if (!o)
      return;
    ops.push_back(std::move(*o));
    if (grad && !layOutGrad(grad, gs, gq, gkv, ops))
      return;
    if (!grad && !fitsRows(ops, gq, gkv))
      return;
    apply(fwd, grad, gs, gq, gkv, ops);
  }

  /// Placements of dO, dq, dk and dv appended to `ops` (q k v o); false
  /// if the gradient cannot be laid out as its forward is.
  bool layOutGrad(rt::KernelOp grad, const Slots &gs, const Geometry &gq,
                  const Geometry &gkv, SmallVector<Placement> &ops) {
    ValueRange gb = grad.getBuffers();
    std::optional<Placement> dO = readInRows(gb[gs.dO], gq, {grad});
    if (!dO)
      return false;
    SmallVector<Placement> outs;
    const int slots[] = {gs.dq, gs.dk, gs.dv};
    const Geometry geometries[] = {gq, gkv, gkv};
    for (auto [slot, g] : llvm::zip(slots, geometries)) {
      std::optional<Placement> p = writeInRows(gb[slot], g, grad, {});
      if (!p)
        return false;
      outs.push_back(std::move(*p));
    }
    tileInto(outs, gq, gkv); // where the pattern is there
    ops.push_back(std::move(*dO));
    ops.append(std::make_move_iterator(outs.begin()),
               std::make_move_iterator(outs.end()));
    // A gradient shares its forward's row strides: dq q's, dO o's.
    return ops[4].ld == ops[3].ld && ops[5].ld == ops[0].ld &&
           ops[6].ld == ops[1].ld && ops[7].ld == ops[2].ld &&
           fitsRows(ops, gq, gkv);
  }

  /// Whether each row stride holds its operand's heads.
  bool fitsRows(ArrayRef<Placement> ops, const Geometry &gq,
                const Geometry &gkv) {
    for (auto [n, p] : llvm::enumerate(ops)) {
      const Geometry &g = (n == 1 || n == 2 || n == 6 || n == 7) ? gkv : gq;
      if (p.ld < g.heads * g.D)
        return false;
    }
    return true;
  }

  /// The buffer operand `p` gives a kernel of geometry `g` before `at`.
  Value bufferOf(const Placement &p, const Geometry &g, Operation *at) {
    for (Operation *h : p.hoist)
      if (at->isBeforeInBlock(h))
        h->moveBefore(at);
    if (p.offset == 0)
      return p.base;
    int64_t e = abi::dtypeBytes(g.dtype);
    int64_t span = (g.B * g.rows - 1) * p.ld + g.heads * g.D;
    OpBuilder b(at);
    return rt::ViewOp::create(b, at->getLoc(), p.base, p.offset * e,
                              span * e);
  }

  /// `k` with its buffers `slots` replaced and its layout set.
  void relayout(rt::KernelOp k, ArrayRef<std::pair<int, Value>> slots,
                int64_t ldq, int64_t ldk, int64_t ldv, int64_t ldo) {
    for (auto [slot, v] : slots)
      k.getBuffersMutable()[slot].set(v);
    SmallVector<int64_t> ints(k.getInts());
    int64_t at = layoutAt(k);
    ints[at] = abi::kAttentionRows;
    ints[at + 1] = ldq;
    ints[at + 2] = ldk;
    ints[at + 3] = ldv;
    ints[at + 4] = ldo;
    k.setInts(ints);
  }

  /// p's rotary embedding on [B,rows,heads,D] in place of its transposed
  /// buffer (an output's allocation moved before it).
  void rotateInRows(Placement &p) {
    if (auto alloc = p.rotaryBuffer.getDefiningOp<rt::AllocOp>())
      if (p.rotary->isBeforeInBlock(alloc))
        alloc->moveBefore(p.rotary);
    p.rotary.getBuffersMutable()[p.rotarySlot].set(p.rotaryBuffer);
    SmallVector<int64_t> ints(p.rotary.getInts());
    ints[Ro::layout] = abi::kAttentionRows;
    p.rotary.setInts(ints);
  }

  void apply(rt::KernelOp fwd, rt::KernelOp grad, const Slots &gs,
             const Geometry &gq, const Geometry &gkv,
             MutableArrayRef<Placement> ops) {
    Value q = bufferOf(ops[0], gq, fwd), k = bufferOf(ops[1], gkv, fwd),
          v = bufferOf(ops[2], gkv, fwd), o = bufferOf(ops[3], gq, fwd);
    int64_t ldq = ops[0].ld, ldk = ops[1].ld, ldv = ops[2].ld,
            ldo = ops[3].ld;
    relayout(fwd, {{0, q}, {1, k}, {2, v}, {3, o}}, ldq, ldk, ldv, ldo);
    if (grad) {
      SmallVector<std::pair<int, Value>> slots = {
          {gs.q, q},
          {gs.k, k},
          {gs.v, v},
          {gs.dO, bufferOf(ops[4], gq, grad)},
          {gs.dq, bufferOf(ops[5], gq, grad)},
          {gs.dk, bufferOf(ops[6], gkv, grad)},
          {gs.dv, bufferOf(ops[7], gkv, grad)}};
      if (gs.o >= 0)
        slots.push_back({gs.o, o});
      relayout(grad, slots, ldq, ldk, ldv, ldo);
    }
    for (Placement &p : ops) {
      if (p.rotary)
        rotateInRows(p);
      for (rt::KernelOp copy : p.copies) {
        Value out = copy.getBuffers()[1];
        p.dead.append({copy, out.getDefiningOp()});
        out.replaceAllUsesWith(p.base);
      }
    }
    // The layout kernels, then the buffers only they used.
    SmallVector<Operation *> dead;
    for (Placement &p : ops)
      dead.append(p.dead.begin(), p.dead.end());
    eraseKernelsThenAllocs(dead);
  }
};

} // namespace
