//===- Shape.cpp - shapes, indexing and constants -------------------------===//
//
// Constant, Identity and the ops that move, index or compute shapes:
// Shape, ConstantOfShape, Range, Reshape, Unsqueeze, Squeeze, Transpose,
// Concat, Expand, Trilu, Gather, Slice and Split. Shape subgraphs fold to
// compile-time values; runtime tensors become nn ops.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/GraphImporter.h"
#include "frontends/onnx/OpRegistry.h"
#include "runtime/abi/abi.h"

#include "mlir/IR/Verifier.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace shardc;
using namespace shardc::onnx_import;
using llvm::Error;
using llvm::Expected;

Error GraphImporter::constantNode(const onnx::NodeProto &n) {
  if (n.attribute_size() != 1)
    return nodeError(n, "expects exactly one value attribute");
  const onnx::AttributeProto &a = n.attribute(0);
  if (a.name() == "value") {
    Expected<HostTensor> h = toHost(a.t(), baseDir);
    if (!h)
      return h.takeError();
    setConst(n.output(0), *h);
  } else if (a.name() == "value_float") {
    setConst(n.output(0), HostTensor::floats({}, {a.f()}));
  } else if (a.name() == "value_floats") {
    setConst(n.output(0), HostTensor::floats({a.floats_size()},
                                             {a.floats().begin(), a.floats().end()}));
  } else if (a.name() == "value_int") {
    setConst(n.output(0), HostTensor::integers({}, {a.i()}));
  } else if (a.name() == "value_ints") {
    setConst(n.output(0), HostTensor::integers({a.ints_size()},
                                               {a.ints().begin(), a.ints().end()}));
  } else {
    return nodeError(n, "attribute '" + a.name() + "' is not supported");
  }
  return Error::success();
}

Error GraphImporter::identity(const onnx::NodeProto &n) {
  if (paramNames.count(n.input(0)) && !vals.count(n.output(0)))
    return untie(n.input(0), n.output(0));
  vals[n.output(0)] = vals[n.input(0)];
  return Error::success();
}

Error GraphImporter::shapeNode(const onnx::NodeProto &n) {
  std::vector<int64_t> s = shape_(n, 0);
  int64_t rank = s.size(), start = attrInt(n, "start", 0), end = attrInt(n, "end", rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  setConst(n.output(0), HostTensor::integers({end - start},
                                             {s.begin() + start, s.begin() + end}));
  return Error::success();
}

Error GraphImporter::constantOfShape(const onnx::NodeProto &n) {
  Expected<std::vector<int64_t>> s = constInts(n, 0, "input");
  if (!s)
    return s.takeError();
  HostTensor fill = HostTensor::floats({1}, {0.0});
  if (const auto *a = attr(n, "value")) {
    Expected<HostTensor> h = toHost(a->t(), baseDir);
    if (!h)
      return h.takeError();
    if (h->numel() != 1)
      return nodeError(n, "value must hold one element");
    fill = *h;
  }
  for (int64_t d : *s)
    if (d < 0)
      return nodeError(n, "negative dimension in the shape");
  if (Error e = reserveFold(n, shardc::abi::checkedSize(*s, 1)))
    return e;
  fill.shape = {};
  setConst(n.output(0), evalExpand(fill, *s));
  return Error::success();
}

Error GraphImporter::range(const onnx::NodeProto &n) {
  if (!allInputsConst(n))
    return nodeError(n, "start, limit and delta must be known at compile time");
  const HostTensor &s = constant(n.input(0)), &l = constant(n.input(1)),
                   &d = constant(n.input(2));
  if (s.numel() != 1 || l.numel() != 1 || d.numel() != 1 || d.at(0) == 0)
    return nodeError(n, "start, limit and delta must be scalars, delta non-zero");
  if (s.kind != l.kind || s.kind != d.kind)
    return nodeError(n, "start, limit and delta must have one type (ONNX's T)");
  double count = std::ceil((l.at(0) - s.at(0)) / d.at(0));
  if (!std::isfinite(count))
    return nodeError(n, "the range's length is not finite");
  int64_t len = count <= 0 ? 0 : count >= 9.2e18 ? -1 : int64_t(count);
  if (Error e = reserveFold(n, len))
    return e;
  HostTensor r;
  r.kind = s.kind;
  r.onnxType = s.onnxType;
  r.shape = {len};
  for (int64_t k = 0; k < len; ++k) {
    if (s.kind == Kind::Float)
      r.f.push_back(float(s.at(0) + double(k) * d.at(0)));
    else
      r.i.push_back(s.i[0] + k * d.i[0]);
  }
  setConst(n.output(0), r);
  return Error::success();
}

Error GraphImporter::reshapeLike(const onnx::NodeProto &n) {
  const std::string &op = n.op_type();
  std::vector<int64_t> in = shape_(n, 0), out;
  if (op == "Reshape") {
    Expected<std::vector<int64_t>> s = constInts(n, 1, "shape");
    if (!s)
      return s.takeError();
    bool allowZero = attrInt(n, "allowzero", 0);
    int64_t known = 1, infer = -1;
    for (auto [k, d] : llvm::enumerate(*s)) {
      if (d == 0 && !allowZero) {
        if (k >= in.size())
          return nodeError(n, "shape copies dim " + llvm::Twine(k) +
                                  " the input lacks");
        d = in[k];
      }
      if (d == -1) {
        if (infer >= 0)
          return nodeError(n, "shape has more than one -1");
        infer = k;
      } else if (d < 0) {
        return nodeError(n, "shape has a negative size " + llvm::Twine(d));
      } else if (__builtin_mul_overflow(known, d, &known)) {
        // (C++ leaves the overflow undefined: found by fuzzing.)
        return nodeError(n, "shape " + shapeText(*s) +
                                " has more than 2^63 elements");
      }
      out.push_back(d);
    }
    int64_t numel = 1;
    for (int64_t d : in)
      if (__builtin_mul_overflow(numel, d, &numel))
        return nodeError(n, "input " + shapeText(in) +
                                " has more than 2^63 elements");
    if (infer >= 0)
      out[infer] = known ? numel / known : 0;
    int64_t outNumel = 1;
    for (int64_t d : out)
      if (__builtin_mul_overflow(outNumel, d, &outNumel))
        return nodeError(n, "shape " + shapeText(*s) +
                                " has more than 2^63 elements");
    if (outNumel != numel)
      return nodeError(n, "cannot reshape " + shapeText(in) + " (" +
                              llvm::Twine(numel) + " elements) to " +
                              shapeText(*s) + batchAdvice());
  } else {
    std::vector<int64_t> axes;
    if (hasInput(n, 1)) {
      Expected<std::vector<int64_t>> a = constInts(n, 1, "axes");
      if (!a)
        return a.takeError();
      axes = *a;
    } else if (auto a = attrInts(n, "axes")) {
      axes = *a;
    }
    if (op == "Unsqueeze") {
      int64_t rank = in.size() + axes.size();
      std::vector<bool> inserted(rank, false);
      for (int64_t a : axes) {
        if (Error e = normalizeAxis(n, a, rank))
          return e;
        if (inserted[a])
          return nodeError(n, "axis " + llvm::Twine(a) + " is given twice");
        inserted[a] = true;
      }
      for (int64_t d = 0, k = 0; d < rank; ++d)
        out.push_back(inserted[d] ? 1 : in[k++]);
    } else {
      std::vector<bool> removed(in.size(), false);
      for (int64_t a : axes) {
        if (Error e = normalizeAxis(n, a, in.size()))
          return e;
        if (in[a] != 1)
          return nodeError(n, "cannot squeeze dim " + llvm::Twine(a) + " of size " +
                                  llvm::Twine(in[a]));
        removed[a] = true;
      }
      for (size_t d = 0; d < in.size(); ++d)
        if (!(axes.empty() ? in[d] == 1 : bool(removed[d])))
          out.push_back(in[d]);
    }
  }
  if (isConst(n.input(0))) {
    HostTensor t = constant(n.input(0));
    t.shape = out;
    setConst(n.output(0), t);
    return Error::success();
  }
  if (kind(n.input(0)) == Kind::Int) {
    // Token ids: the same values seen with another shape (a view).
    Val v = vals[n.input(0)];
    v.view = out;
    vals[n.output(0)] = v;
    return Error::success();
  }
  Expected<Value> x = floatValue(n, 0);
  if (!x)
    return x.takeError();
  setValue(n.output(0), reshape(*x, out));
  return Error::success();
}

Error GraphImporter::transpose(const onnx::NodeProto &n) {
  bool allConst = allInputsConst(n);
  std::vector<int64_t> in = shape_(n, 0), perm, out;
  if (auto p = attrInts(n, "perm"))
    perm = *p;
  else
    for (int64_t d = int64_t(in.size()) - 1; d >= 0; --d)
      perm.push_back(d);
  if (perm.size() != in.size())
    return nodeError(n, "perm has " + llvm::Twine(perm.size()) +
                            " entries for an input of rank " + llvm::Twine(in.size()));
  std::vector<int64_t> sorted(perm);
  std::sort(sorted.begin(), sorted.end());
  for (size_t d = 0; d < sorted.size(); ++d)
    if (sorted[d] != int64_t(d))
      return nodeError(n, "perm is not a permutation of the input's dims");
  if (allConst) {
    setConst(n.output(0), evalTranspose(constant(n.input(0)), perm));
    return Error::success();
  }
  Expected<Value> x = floatValue(n, 0);
  if (!x)
    return x.takeError();
  for (int64_t p : perm)
    out.push_back(in[p]);
  setValue(n.output(0), nn::TransposeOp::create(b, loc, type(out), *x,
                                                b.getDenseI64ArrayAttr(perm)));
  return Error::success();
}

Error GraphImporter::concat(const onnx::NodeProto &n) {
  bool allConst = allInputsConst(n);
  int64_t axis = attrInt(n, "axis", 0);
  std::vector<int64_t> first = shape_(n, 0);
  if (Error e = normalizeAxis(n, axis, first.size()))
    return e;
  if (allConst) {
    std::vector<const HostTensor *> ins;
    for (int k = 0; k < n.input_size(); ++k) {
      const HostTensor &t = constant(n.input(k));
      if (t.shape.size() != first.size())
        return nodeError(n, "inputs differ in rank");
      for (size_t d = 0; d < first.size(); ++d)
        if (int64_t(d) != axis && t.shape[d] != first[d])
          return nodeError(n, "inputs differ on dim " + llvm::Twine(d));
      ins.push_back(&t);
    }
    setConst(n.output(0), evalConcat(ins, axis));
    return Error::success();
  }
  SmallVector<Value> ins;
  SmallVector<int64_t> out(first.begin(), first.end());
  out[axis] = 0;
  for (int k = 0; k < n.input_size(); ++k) {
    Expected<Value> x = floatValue(n, k);
    if (!x)
      return x.takeError();
    ArrayRef<int64_t> xs = shapeOf(*x);
    if (xs.size() != first.size())
      return nodeError(n, "inputs differ in rank");
    for (size_t d = 0; d < first.size(); ++d)
      if (int64_t(d) != axis && xs[d] != first[d])
        return nodeError(n, "input " + llvm::Twine(k) + " has size " + llvm::Twine(xs[d]) +
                                " on dim " + llvm::Twine(d) + ", input 0 " +
                                llvm::Twine(first[d]));
    out[axis] += xs[axis]; // each at most a tensor's size limit: no overflow
    ins.push_back(*x);
  }
  setValue(n.output(0),
           nn::ConcatOp::create(b, loc, type(out), ins, b.getI64IntegerAttr(axis)));
  return Error::success();
}

Error GraphImporter::expand(const onnx::NodeProto &n) {
  Expected<std::vector<int64_t>> s = constInts(n, 1, "shape");
  if (!s)
    return s.takeError();
  auto out = broadcast(shape_(n, 0), *s);
  if (!out)
    return nodeError(n, "the input does not broadcast to the shape given");
  if (isConst(n.input(0))) {
    if (Error e = reserveFold(n, shardc::abi::checkedSize(*out, 1)))
      return e;
    setConst(n.output(0), evalExpand(constant(n.input(0)), *s));
    return Error::success();
  }
  Expected<Value> x = floatValue(n, 0);
  if (!x)
    return x.takeError();
  Value y = *x;
  if (shapeOf(y) != ArrayRef<int64_t>(*out))
    y = nn::BroadcastToOp::create(b, loc, type(*out), y);
  setValue(n.output(0), y);
  return Error::success();
}

Error GraphImporter::trilu(const onnx::NodeProto &n) {
  bool upper = attrInt(n, "upper", 1);
  int64_t k = 0;
  if (hasInput(n, 1)) {
    Expected<std::vector<int64_t>> kv = constInts(n, 1, "k");
    if (!kv)
      return kv.takeError();
    if (kv->size() != 1)
      return nodeError(n, "k must be a scalar");
    k = (*kv)[0];
  }
  if (shape_(n, 0).size() < 2)
    return nodeError(n, "the input must have rank >= 2");
  if (isConst(n.input(0))) {
    setConst(n.output(0), evalTrilu(constant(n.input(0)), upper, k));
    return Error::success();
  }
  Expected<Value> x = floatValue(n, 0);
  if (!x)
    return x.takeError();
  setValue(n.output(0), nn::TriluOp::create(b, loc, x->getType(), *x, upper, k));
  return Error::success();
}

Error GraphImporter::gather(const onnx::NodeProto &n) {
  std::vector<int64_t> ds = shape_(n, 0);
  int64_t axis = attrInt(n, "axis", 0), rank = ds.size();
  if (Error e = normalizeAxis(n, axis, rank))
    return e;
  if (kind(n.input(1)) != Kind::Int)
    return nodeError(n, "the indices must be int32 or int64");
  // Constant indices are checked and made non-negative.
  std::optional<HostTensor> idx;
  if (isConst(n.input(1))) {
    idx = constant(n.input(1));
    for (int64_t &v : idx->i) {
      if (v < -ds[axis] || v >= ds[axis])
        return nodeError(n, "index " + llvm::Twine(v) + " is out of range for size " +
                                llvm::Twine(ds[axis]));
      if (v < 0)
        v += ds[axis];
    }
    if (isConst(n.input(0))) {
      // Its result: the data's shape with the indices' in place of dim axis.
      std::vector<int64_t> out(ds.begin(), ds.begin() + axis);
      out.insert(out.end(), idx->shape.begin(), idx->shape.end());
      out.insert(out.end(), ds.begin() + axis + 1, ds.end());
      if (Error e = reserveFold(n, shardc::abi::checkedSize(out, 1)))
        return e;
      setConst(n.output(0), evalGather(constant(n.input(0)), *idx, axis));
      return Error::success();
    }
  }
  Expected<Value> data = floatValue(n, 0);
  if (!data)
    return data.takeError();
  Value ids;
  if (idx) {
    ids = materialize(*idx);
  } else {
    // Ids reshaped at runtime are read as they were computed; the rows
    // looked up take the view's shape below.
    auto it = vals.find(n.input(1));
    if (it == vals.end() || !it->second.value)
      return nodeError(n, "indices '" + n.input(1) + "' are not defined");
    ids = it->second.value;
  }
  if (kindOf(ids) != Kind::Int)
    return nodeError(n, "indices must be integers");
  // Gather on `axis` is an embedding lookup of the table [ds[axis], rest]
  // obtained by moving `axis` to the front.
  SmallVector<int64_t> perm = {axis}, moved = {ds[axis]};
  int64_t rest = 1;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis) {
      perm.push_back(d);
      moved.push_back(ds[d]);
      rest *= ds[d];
    }
  Value table = *data;
  if (axis != 0)
    table = nn::TransposeOp::create(b, loc, type(moved), table,
                                    b.getDenseI64ArrayAttr(perm));
  table = reshape(table, {ds[axis], rest});
  SmallVector<int64_t> rows(shapeOf(ids));
  rows.push_back(rest);
  Value y = nn::EmbeddingOp::create(b, loc, type(rows), ids, table);
  std::vector<int64_t> idShape = shape_(n, 1);
  SmallVector<int64_t> is(idShape.begin(), idShape.end());
  // [indices..., moved dims...] back to [before axis, indices..., after axis].
  SmallVector<int64_t> expanded(is);
  expanded.append(moved.begin() + 1, moved.end());
  y = reshape(y, expanded);
  if (axis != 0) {
    int64_t ni = is.size();
    SmallVector<int64_t> back, finalShape;
    for (int64_t d = 0; d < axis; ++d)
      back.push_back(ni + d);
    for (int64_t d = 0; d < ni; ++d)
      back.push_back(d);
    for (int64_t d = axis; d < rank - 1; ++d)
      back.push_back(ni + d);
    for (int64_t p : back)
      finalShape.push_back(expanded[p]);
    y = nn::TransposeOp::create(b, loc, type(finalShape), y,
                                b.getDenseI64ArrayAttr(back));
  }
  setValue(n.output(0), y);
  return Error::success();
}

Error GraphImporter::slice(const onnx::NodeProto &n) {
  std::vector<int64_t> xs = shape_(n, 0);
  int64_t rank = xs.size();
  Expected<std::vector<int64_t>> starts = constInts(n, 1, "starts");
  if (!starts)
    return starts.takeError();
  Expected<std::vector<int64_t>> ends = constInts(n, 2, "ends");
  if (!ends)
    return ends.takeError();
  std::vector<int64_t> axes, steps;
  if (hasInput(n, 3)) {
    Expected<std::vector<int64_t>> a = constInts(n, 3, "axes");
    if (!a)
      return a.takeError();
    axes = *a;
  } else {
    for (size_t k = 0; k < starts->size(); ++k)
      axes.push_back(k);
  }
  if (hasInput(n, 4)) {
    Expected<std::vector<int64_t>> s = constInts(n, 4, "steps");
    if (!s)
      return s.takeError();
    steps = *s;
  } else {
    steps.assign(starts->size(), 1);
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size())
    return nodeError(n, "starts, ends, axes and steps differ in length");
  std::optional<HostTensor> c;
  if (isConst(n.input(0)))
    c = constant(n.input(0));
  Value v;
  if (!c) {
    Expected<Value> x = floatValue(n, 0);
    if (!x)
      return x.takeError();
    v = *x;
  }
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t axis = axes[k], step = steps[k];
    if (Error e = normalizeAxis(n, axis, rank))
      return e;
    if (step == 0)
      return nodeError(n, "a step is 0");
    int64_t dim = xs[axis];
    // Clamp as ONNX does (starts/ends may be INT64_MAX/MIN).
    auto clampIndex = [&](int64_t i, int64_t lo, int64_t hi) {
      if (i < 0)
        i = i < -dim ? -1 : i + dim;
      return std::clamp(i, lo, hi);
    };
    int64_t start = step > 0 ? clampIndex((*starts)[k], 0, dim)
                             : clampIndex((*starts)[k], -1, dim - 1);
    int64_t end = step > 0 ? clampIndex((*ends)[k], 0, dim)
                           : clampIndex((*ends)[k], -1, dim - 1);
    if ((*ends)[k] < -dim && step < 0)
      end = -1;
    int64_t size = step > 0 ? std::max<int64_t>(0, (end - start + step - 1) / step)
                            : std::max<int64_t>(0, (start - end - step - 1) / -step);
    if (c) {
      *c = evalSlice(*c, axis, start, end, step);
    } else {
      if (step != 1)
        return nodeError(n, "a slice with step " + llvm::Twine(step) +
                                " on a runtime tensor is not supported (step 1 only)");
      if (size == 0)
        return nodeError(n, "the slice is empty");
      SmallVector<int64_t> shape(shapeOf(v));
      if (size != shape[axis]) {
        shape[axis] = size;
        v = nn::SliceOp::create(b, loc, type(shape), v, b.getI64IntegerAttr(axis),
                                b.getI64IntegerAttr(start));
      }
    }
    xs[axis] = size;
  }
  if (c)
    setConst(n.output(0), *c);
  else
    setValue(n.output(0), v);
  return Error::success();
}

Error GraphImporter::split(const onnx::NodeProto &n) {
  std::vector<int64_t> xs = shape_(n, 0);
  int64_t axis = attrInt(n, "axis", 0);
  if (Error e = normalizeAxis(n, axis, xs.size()))
    return e;
  std::vector<int64_t> sizes;
  if (hasInput(n, 1)) {
    Expected<std::vector<int64_t>> s = constInts(n, 1, "split");
    if (!s)
      return s.takeError();
    sizes = *s;
  } else if (auto s = attrInts(n, "split")) {
    sizes = *s;
  } else {
    int64_t parts = attrInt(n, "num_outputs", n.output_size());
    int64_t chunk = (xs[axis] + parts - 1) / std::max<int64_t>(parts, 1);
    for (int64_t k = 0, left = xs[axis]; k < parts; ++k, left -= chunk)
      sizes.push_back(std::min(chunk, left));
  }
  int64_t total = 0;
  for (int64_t s : sizes)
    total += s;
  if (int64_t(sizes.size()) != n.output_size() || total != xs[axis])
    return nodeError(n, "split sizes do not match the outputs or dim " +
                            llvm::Twine(axis));
  int64_t start = 0;
  for (auto [k, size] : llvm::enumerate(sizes)) {
    if (isConst(n.input(0))) {
      setConst(n.output(k), evalSlice(constant(n.input(0)), axis, start, start + size, 1));
    } else {
      Expected<Value> x = floatValue(n, 0);
      if (!x)
        return x.takeError();
      SmallVector<int64_t> shape(xs.begin(), xs.end());
      shape[axis] = size;
      setValue(n.output(k),
               nn::SliceOp::create(b, loc, type(shape), *x, b.getI64IntegerAttr(axis),
                                   b.getI64IntegerAttr(start)));
    }
    start += size;
  }
  return Error::success();
}

ArrayRef<OpInfo> shardc::onnx_import::shapeOps() {
  // Op type, opsets, inputs, outputs, handler.
  // clang-format off
  static const OpInfo ops[] = {
      {"Constant", {1, 21}, {0, 0}, {1, 1}, &GraphImporter::constantNode},
      {"Identity", {1, 21}, {1, 1}, {1, 1}, &GraphImporter::identity},
      {"Shape", {13, 21}, {1, 1}, {1, 1}, &GraphImporter::shapeNode},
      {"ConstantOfShape", {9, 21}, {1, 1}, {1, 1},
       &GraphImporter::constantOfShape},
      {"Range", {11, 21}, {3, 3}, {1, 1}, &GraphImporter::range},
      {"Reshape", {13, 21}, {2, 2}, {1, 1}, &GraphImporter::reshapeLike},
      // (Un)squeeze also read their axes from the attribute opsets < 13 had.
      {"Unsqueeze", {11, 21}, {1, 2}, {1, 1}, &GraphImporter::reshapeLike},
      {"Squeeze", {11, 21}, {1, 2}, {1, 1}, &GraphImporter::reshapeLike},
      {"Transpose", {13, 21}, {1, 1}, {1, 1}, &GraphImporter::transpose},
      {"Concat", {13, 21}, {1, kVariadic}, {1, 1}, &GraphImporter::concat},
      {"Expand", {13, 21}, {2, 2}, {1, 1}, &GraphImporter::expand},
      // An op from opset 14.
      {"Trilu", {14, 21}, {1, 2}, {1, 1}, &GraphImporter::trilu},
      {"Gather", {13, 21}, {2, 2}, {1, 1}, &GraphImporter::gather},
      {"Slice", {13, 21}, {3, 5}, {1, 1}, &GraphImporter::slice},
      {"Split", {13, 21}, {1, 2}, {1, kVariadic}, &GraphImporter::split},
  };
  // clang-format on
  return ops;
}
