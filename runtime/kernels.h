//===- kernels.h - the backend kernel ABI --------------------------*- C++ -*-===//
//
// Every kernel has the C signature
//   void shardc_k_<name>(void *ctx, void **b, const int64_t *i,
//                        const double *f, int64_t stream);
// `b` are the buffers, `i` and `f` the integer and float arguments listed
// below (emitted by passes/ConvertNNToRt.cpp). Shapes are row-major;
// floating-point buffers are f32, ids and targets int32.
//
//   name           buffers                 ints                      floats
//   embedding      ids[N] table[V,C] y[N,C] N V C
//   linear         x[M,K] w b? y[M,N]      M K N in_out has_bias     (w is [N,K], or [K,N] if in_out)
//   add, mul       a b y                   R dims[R] astr[R] bstr[R] (element strides, 0 = broadcast)
//   layer_norm     x[M,C] w[C] b? y        M C has_bias              eps
//   rms_norm       x[M,C] w[C] y           M C                       eps
//   gelu           x y                     n tanh
//   silu           x y                     n
//   rotary         x[B,H,T,D] y            B H T D                   theta
//   attention      q[B,H,T,D] k[B,G,S,D] v o[B,H,T,D]  B H G T S D causal  scale
//   softmax        x y                     outer n inner (softmax over n)
//   transpose      x y                     R dims[R] perm[R]
//   slice          x y                     outer n start size inner
//   cross_entropy  logits[N,V] t[N] loss[] N V ignore_index
//   copy           x y                     bytes
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_KERNELS_H
#define SHARDC_RUNTIME_KERNELS_H

#include <cstdint>

#define SHARDC_KERNEL(name)                                                    \
  extern "C" void shardc_k_##name(void *ctx, void **b, const int64_t *i,       \
                                  const double *f, int64_t stream)

SHARDC_KERNEL(embedding);
SHARDC_KERNEL(linear);
SHARDC_KERNEL(add);
SHARDC_KERNEL(mul);
SHARDC_KERNEL(layer_norm);
SHARDC_KERNEL(rms_norm);
SHARDC_KERNEL(gelu);
SHARDC_KERNEL(silu);
SHARDC_KERNEL(rotary);
SHARDC_KERNEL(attention);
SHARDC_KERNEL(softmax);
SHARDC_KERNEL(transpose);
SHARDC_KERNEL(slice);
SHARDC_KERNEL(cross_entropy);
SHARDC_KERNEL(copy);

#endif // SHARDC_RUNTIME_KERNELS_H
