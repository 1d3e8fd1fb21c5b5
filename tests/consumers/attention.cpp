// Consumer of the optional ropex::attention target (Eigen): the softmax of two equal logits.
#include <ropex/attention.hpp>

#include <cmath>
#include <cstdio>

int main() {
  float x[2] = {0.25f, 0.25f};
  ropex::softmax(x, 2);
  std::printf("ropex::attention consumer: softmax = (%.7f, %.7f)\n", static_cast<double>(x[0]),
              static_cast<double>(x[1]));
  return x[0] == 0.5f && x[1] == 0.5f ? 0 : 1;
}
