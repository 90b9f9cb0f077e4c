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
//   rotary         x[B,H,T,D] y            B H T D inverse           theta
//   attention      q[B,H,T,D] k[B,G,S,D] v o[B,H,T,D]  B H G T S D causal  scale
//   softmax        x y                     outer n inner (softmax over n)
//   transpose      x y                     R dims[R] perm[R]
//   slice          x y                     outer n start size inner
//   cross_entropy  logits[N,V] t[N] loss[] N V ignore_index
//   copy           x y                     bytes
//   cast           x y                     n from to                 (dtype codes: 0 f32, 1 bf16, 2 f16)
//
// Backward and training kernels (cpu/train_kernels.cpp):
//   fill           y                       n                         value
//   matmul         a b y[M,N]              M K N trans_a trans_b     (a is [M,K] or [K,M], b [K,N] or [N,K])
//   sum_to         x y                     R out_n dims[R] ystr[R]   (x has dims; ystr 0 where summed)
//   embedding_grad ids[N] dy[N,C] dtable[V,C]  N V C
//   layer_norm_grad x w dy dx dw db        M C                       eps
//   rms_norm_grad  x w dy dx dw            M C                       eps
//   gelu_grad      x dy dx                 n tanh
//   silu_grad      x dy dx                 n
//   softmax_grad   y dy dx                 outer n inner
//   attention_grad q k v do dq dk dv       B H G T S D causal        scale
//   slice_grad     dy dx                   outer n start size inner  (dx zero outside the slice)
//   cross_entropy_grad logits t dloss dlogits  N V ignore_index
//   cross_entropy_with_grad logits t loss dlogits  N V ignore_index (loss gradient 1)
//   accumulate     acc g ctl[2] out        n                         (out = ctl[0] ? acc + ctl[1] g : ctl[1] g)
//   squared_norm   x y[]                   n
//   clip_coef      sq[] max[] y[]
//   adamw          p g m v hyper[7] c[] p' m' v'   n is_1d           (outputs may alias p m v)
//   sgd            p g buf hyper[7] c[] p' buf'    n is_1d
//
// Generic tensor kernels of imported models (cpu/tensor_kernels.cpp):
//   sub, div, pow  a b y                   as add
//   where          c a b y                 R dims[R] cstr astr bstr  (c: one byte per bool)
//   equal          a b y                   R dims[R] astr bstr dtype (y bool; dtype 0 f32, 3 i32)
//   unary          x y                     n fn                      (fn: 0 sqrt 1 erf 2 tanh 3 sigmoid
//                                                                     4 neg 5 reciprocal 6 exp 7 log)
//   unary_grad     x y dy dx               n fn                      (dx = dy f'(x), y = f(x))
//   broadcast      x y                     R dims[R] xstr[R]
//   batch_matmul   a b c                   M K N ta tb R batch[R] astr[R] bstr[R]  (strides in matrices)
//   concat_part    x y                     outer n_x n_y start inner (x into y at start)
//   trilu          x y                     batch rows cols upper k
//   cast also converts 3 (i32) and 4 (bool) from and to f32.
//
// Collectives (cpu/collectives.cpp, MPI), on the communicator of grid axis
// `axis` (see runtime/mesh.h):
//   all_gather     in[n] out[n*P]          n axis dtype              (rank-major concatenation)
//   all_gather_group in_1..in_k out_1..out_k pack[sum n] gathered[P sum n]
//                  k axis dtype n_1..n_k   (one exchange for a group of k)
//   reduce_scatter in[n*P] out[n] tmp[n]   n axis dtype              (sum, rank r keeps block r)
//   all_reduce     in[n] out[n]            n axis dtype              (sum; f32)
//   reshard_chunk  full chunk              bytes N axis              (chunk rank%N of full, no communication)
//   all_gather_subgroup chunk[n] full[n*N] n axis dtype N            (within N consecutive ranks)
//
// hyper = [lr, beta1 (momentum for SGD), beta2, eps, weight_decay,
//          weight_decay_1d, step (from 1)].
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
SHARDC_KERNEL(cast);

SHARDC_KERNEL(fill);
SHARDC_KERNEL(matmul);
SHARDC_KERNEL(sum_to);
SHARDC_KERNEL(embedding_grad);
SHARDC_KERNEL(layer_norm_grad);
SHARDC_KERNEL(rms_norm_grad);
SHARDC_KERNEL(gelu_grad);
SHARDC_KERNEL(silu_grad);
SHARDC_KERNEL(softmax_grad);
SHARDC_KERNEL(attention_grad);
SHARDC_KERNEL(slice_grad);
SHARDC_KERNEL(cross_entropy_grad);
SHARDC_KERNEL(cross_entropy_with_grad);
SHARDC_KERNEL(accumulate);
SHARDC_KERNEL(squared_norm);
SHARDC_KERNEL(clip_coef);
SHARDC_KERNEL(adamw);
SHARDC_KERNEL(sgd);

SHARDC_KERNEL(sub);
SHARDC_KERNEL(div);
SHARDC_KERNEL(pow);
SHARDC_KERNEL(where);
SHARDC_KERNEL(equal);
SHARDC_KERNEL(unary);
SHARDC_KERNEL(unary_grad);
SHARDC_KERNEL(broadcast);
SHARDC_KERNEL(batch_matmul);
SHARDC_KERNEL(concat_part);
SHARDC_KERNEL(trilu);

SHARDC_KERNEL(all_gather);
SHARDC_KERNEL(all_gather_group);
SHARDC_KERNEL(reduce_scatter);
SHARDC_KERNEL(all_reduce);
SHARDC_KERNEL(reshard_chunk);
SHARDC_KERNEL(all_gather_subgroup);

#endif // SHARDC_RUNTIME_KERNELS_H
