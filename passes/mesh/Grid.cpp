//===- Grid.cpp - the module's device grid, made once ---------------------===//
//
// The `shard.grid @mesh` that every collective names, and the `fsdp.mesh`
// attribute the runtime's manifest reads: created by the first pass that
// needs them (tp-partition, else fsdp-shard-parameters), read by the rest.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace shardc;

abi::MeshGrid shardc::compiledMesh(ModuleOp module) {
  abi::MeshGrid mesh;
  if (auto attr = module->getAttrOfType<DenseI64ArrayAttr>(attrs::kMesh)) {
    mesh.replicas = attr[0];
    mesh.shards = attr[1];
    if (attr.size() > 2)
      mesh.tp = attr[2];
  }
  return mesh;
}

FailureOr<FlatSymbolRefAttr>
shardc::getOrCreateGrid(ModuleOp module, const abi::MeshGrid &mesh) {
  auto ref = FlatSymbolRefAttr::get(module.getContext(), attrs::kGridName);
  if (module->hasAttr(attrs::kMesh)) {
    abi::MeshGrid have = compiledMesh(module);
    if (have.replicas != mesh.replicas || have.shards != mesh.shards ||
        have.tp != mesh.tp)
      return module.emitError("the module is compiled for mesh ")
             << have.replicas << "x" << have.shards << " tp " << have.tp
             << ", not " << mesh.replicas << "x" << mesh.shards << " tp "
             << mesh.tp;
    return ref;
  }
  OpBuilder b(module.getBodyRegion());
  // [R, S] without tensor parallelism, as the manifest has always had it.
  SmallVector<int64_t> sizes = {mesh.replicas, mesh.shards};
  if (mesh.tp > 1)
    sizes.push_back(mesh.tp);
  module->setAttr(attrs::kMesh, b.getDenseI64ArrayAttr(sizes));
  SmallVector<int64_t> shape;
  if (mesh.replicaAxis() >= 0)
    shape.push_back(mesh.replicas);
  shape.push_back(mesh.shards);
  if (mesh.tpAxis() >= 0)
    shape.push_back(mesh.tp);
  b.setInsertionPointToStart(module.getBody());
  shard::GridOp::create(b, module.getLoc(), attrs::kGridName, shape);
  return ref;
}
