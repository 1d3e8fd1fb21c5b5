// ropex attention analysis (optional; needs Eigen 3.4, CMake target ropex::attention).
//   softmax.hpp     stable softmax, in place / out of place / per row
//   divergence.hpp  entropy (nats, bits, per row, mean over rows), KL, Jensen-Shannon
//   sdpa.hpp        scaled dot-product attention: heads, GQA, causal and padding masks, bias
//   alibi.hpp       ALiBi slopes and biases (Press et al. 2022)
//   distance.hpp    RoFormer long-term-decay bound; attention mass by relative distance
#pragma once

#include "ropex/ropex.hpp"
#include "ropex/attention/eigen_types.hpp"
#include "ropex/attention/softmax.hpp"
#include "ropex/attention/divergence.hpp"
#include "ropex/attention/sdpa.hpp"
#include "ropex/attention/alibi.hpp"
#include "ropex/attention/distance.hpp"
