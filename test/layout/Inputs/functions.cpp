// Hand-written input for check_sizes.py with --max-function 5: the lines
// of each body, from its opening brace to its closing one, are counted.
#include <vector>
#define LONG_MACRO(x) { \
  x; x; x; x; x; x; }

namespace outer {
namespace {

// five lines: within the limit
int five(int a) {
  int b = a;
  return b;
  // "} an unbalanced brace in a comment {"
}

// six lines, with a brace in a string and a lambda inside: over
int six(int a) {
  const char *s = "}}}";
  auto f = [&](int x) { return x + a; };
  int c = f(a) + s[0];
  return c;
}

} // namespace

struct Widget {
  std::vector<int> table = {1, 2, 3, 4, 5, 6, 7, 8};
  Widget(int v) : value{v}, other(v) {
    value += 1;
  }
  // seven lines, a member defined in its class: over
  int method() const {
    int r = value;
    r += other;
    r *= 2;
    r -= 1;
    return r;
  }
  int value, other;
};

} // namespace outer

static const int kTable[] = {
    1, 2, 3,
    4, 5, 6,
};
