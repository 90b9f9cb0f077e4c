//===- NNInterfaces.td - nn op interfaces --------------------*- tablegen -*-===//
#ifndef SHARDC_NN_INTERFACES
#define SHARDC_NN_INTERFACES

include "mlir/IR/OpBase.td"

def NN_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let description = [{
    An op that states its vector-Jacobian product: given the gradient of the
    loss with respect to each of its results, it builds (at the builder's
    insertion point) the gradient with respect to each operand. Operands that
    are not differentiable (token ids, targets) get a null Value. The
    autodiff pass calls this; new ops add their own rule here instead of
    growing a central switch.
  }];
  let cppNamespace = "::shardc::nn";
  let methods = [
    InterfaceMethod<
      "Builds the operand gradients from the result gradients.",
      "::llvm::SmallVector<::mlir::Value>", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ArrayRef<::mlir::Value>":$resultGrads)>,
  ];
}

#endif // SHARDC_NN_INTERFACES
