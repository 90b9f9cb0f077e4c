//===- gelu_tanh.cpp - accuracy and cost of the tanh-GELU kernel math -----===//
//
// The fused nn.gelu {approximate = "tanh"} must compute what the exported
// chain 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) computes. This
// prints, for the kernel's formula (tanhf, runtime/math.h), the one it
// replaced (fastTanh), the cancellation-free x sigmoid(2z) and the unfused
// chain op by op, the largest error against a
// long-double reference of the exported chain over every float in
// [-12, 12] whose GELU is at least 1e-30 in magnitude, in ulps of the
// result (and where), and the time per element of
// each over 2^24 elements. Build: ninja -C build shardc-bench-gelu-tanh.
//
//===----------------------------------------------------------------------===//
#include "runtime/math.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

using namespace shardc::runtime;

namespace {

float previous(float v) {
  return 0.5f * v *
         (1.0f + fastTanh(kGeluAlpha * (v + 0.044715f * v * v * v)));
}

float current(float v) { return gelu(v, /*tanhForm=*/true); }

/// The same function as x sigmoid(2z): no cancellation, more accurate than
/// the chain, but nonzero where the chain (and PyTorch) round to 0.
float sigmoidForm(float v) {
  return v * fastSigmoid(2.0f * kGeluAlpha * (v + 0.044715f * v * v * v));
}

/// The exported chain as the unfused graph computes it: each op rounded to
/// f32 (pow and tanh through double, as the CPU kernels do).
float chain(float v) {
  float cube = float(std::pow(double(v), 3.0));
  float inner = v + 0.044715f * cube;
  float t = float(std::tanh(double(0.797884583f * inner)));
  return (v * 0.5f) * (t + 1.0f);
}

/// The chain's value in long double, through 0.5 (1 + tanh(z)) =
/// 1 / (1 + exp(-2z)), which has no cancellation where tanh(z) nears -1.
double reference(float v) {
  long double x = v;
  long double z = std::sqrt(2.0L / M_PIl) * (x + 0.044715L * x * x * x);
  return double(x / (1.0L + std::exp(-2.0L * z)));
}

/// |got - want| in units of the ulp of want (as an f32).
double ulps(float got, double want) {
  float w = float(want);
  float next = std::nextafter(std::fabs(w), INFINITY);
  double ulp = double(next) - double(std::fabs(w));
  return std::fabs(double(got) - want) / ulp;
}

template <typename F>
void report(const char *name, F f, const std::vector<float> &xs) {
  double worst = 0, at = 0, worst4 = 0;
  for (float x = -12.0f; x <= 12.0f; x = std::nextafter(x, 13.0f)) {
    double want = reference(x);
    if (std::fabs(want) < 1e-30) // far below any activation's scale
      continue;
    double e = ulps(f(x), want);
    if (std::fabs(x) <= 4.0f)
      worst4 = std::max(worst4, e);
    if (e > worst) {
      worst = e;
      at = x;
    }
  }
  std::vector<float> ys(xs.size());
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (size_t k = 0; k < xs.size(); ++k)
      ys[k] = f(xs[k]);
    auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
    volatile float sink = ys[rep];
    (void)sink;
  }
  std::printf("%-40s %8.1f %14.1f (x = %-9.4g) %8.3f\n", name, worst4, worst,
              at, best / double(xs.size()) * 1e9);
}

} // namespace

int main() {
  std::vector<float> xs(size_t(1) << 24);
  uint32_t r = 1;
  for (float &x : xs) {
    r = r * 1664525u + 1013904223u;
    x = float(int32_t(r >> 8) - (1 << 23)) / float(1 << 21); // [-4, 4)
  }
  std::printf("tanh-GELU against the exported chain in long double, every float "
              "in [-12, 12] with |GELU| >= 1e-30:\n");
  std::printf("%-40s %8s %30s %8s\n", "", "ulp |x|<=4", "ulp |x|<=12 (where)",
              "ns/elt");
  report("0.5 x (1 + tanhf(z)) (kernel now)", current, xs);
  report("0.5 x (1 + fastTanh(z)) (before)", previous, xs);
  report("x * sigmoid(2z) (not the chain's zeros)", sigmoidForm, xs);
  report("the exported chain, op by op (unfused)", chain, xs);
  return 0;
}
