//===- CudaAttentionTest.cpp - the fused attention kernels against the CPU ===//
#include "test/unit/CudaCompare.h"

#include <gtest/gtest.h>

namespace {

using namespace shardc::test;

} // namespace
