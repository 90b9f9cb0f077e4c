// RUN: shardc-opt %s --convert-rt-to-llvm | FileCheck %s

// The manifest gains each entry's arena and their maximum.
// CHECK-DAG: llvm.mlir.global external constant @shardc_manifest("{\22arena_bytes\22:4096,\22arenas\22:[{\22arena_bytes\22:4096,\22symbol\22:\22shardc_step\22}],\22format\22:2}\00")
// CHECK-DAG: llvm.mlir.global private constant @__rt_ints_{{[0-9A-F]+}}_0(dense<[8, 4]> : tensor<2xi64>) {{.*}} : !llvm.array<2 x i64>
// CHECK-DAG: llvm.mlir.global private constant @__rt_floats_{{[0-9A-F]+}}_0(dense<1.000000e-05> : tensor<1xf64>) {{.*}} : !llvm.array<1 x f64>
// CHECK-DAG: llvm.func @shardc_k_rms_norm(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64)
// CHECK-DAG: llvm.func @shardc_event_record(!llvm.ptr, i64, i64)
// CHECK-DAG: llvm.func @shardc_event_wait(!llvm.ptr, i64, i64)

// CHECK-LABEL: llvm.func @shardc_step
// CHECK-SAME: (%[[CTX:.*]]: !llvm.ptr, %[[P:.*]]: !llvm.ptr, %{{.*}}: !llvm.ptr, %[[A:.*]]: !llvm.ptr)
module attributes {rt.manifest = {format = 2 : i64}} {
func.func @shardc_step(%ctx: !rt.context, %p: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) attributes {rt.arena_bytes = 4096 : i64} {
  // Views are byte offsets.
  // CHECK: %[[OFF:.*]] = llvm.mlir.constant(64 : i64) : i64
  // CHECK: %[[X:.*]] = llvm.getelementptr %[[P]][%[[OFF]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
  %x = rt.view %p[64] : !rt.buffer
  %w = rt.view %p[0] : !rt.buffer
  %y = rt.view %arena[0] : !rt.buffer
  // Buffers go in a stack array; ints and floats are constant globals.
  // CHECK: %[[ARR:.*]] = llvm.alloca %{{.*}} x !llvm.ptr
  // CHECK: llvm.store %[[X]], %{{.*}} : !llvm.ptr, !llvm.ptr
  // CHECK: %[[INTS:.*]] = llvm.mlir.addressof @__rt_ints_
  // CHECK: %[[FLOATS:.*]] = llvm.mlir.addressof @__rt_floats_
  // CHECK: %[[S:.*]] = llvm.mlir.constant(0 : i64) : i64
  // CHECK: llvm.call @shardc_k_rms_norm(%[[CTX]], %[[ARR]], %[[INTS]], %[[FLOATS]], %[[S]])
  rt.kernel %ctx, "rms_norm"(%x, %w, %y) {ints = array<i64: 8, 4>, floats = array<f64: 1.0e-5>}
  // Equal arguments share one global; no floats is a null pointer.
  // CHECK: llvm.mlir.addressof @__rt_ints_
  // CHECK: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
  // CHECK: llvm.call @shardc_k_silu(%[[CTX]], %{{.*}}, %{{.*}}, %[[NULL]], %{{.*}})
  rt.kernel %ctx, "silu"(%y, %x) {ints = array<i64: 8, 4>, floats = array<f64>, stream = 1 : i64}
  // CHECK: llvm.call @shardc_event_record(%[[CTX]], %{{.*}}, %{{.*}}) : (!llvm.ptr, i64, i64) -> ()
  rt.event_record %ctx {event = 0 : i64, stream = 1 : i64}
  // CHECK: llvm.call @shardc_event_wait(%[[CTX]], %{{.*}}, %{{.*}}) : (!llvm.ptr, i64, i64) -> ()
  rt.event_wait %ctx {event = 0 : i64, stream = 0 : i64}
  return
}
}
