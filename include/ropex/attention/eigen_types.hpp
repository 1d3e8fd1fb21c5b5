// The Eigen types the attention headers take: row-major float matrices (one query or one key per
// row, matching ropex's [tokens][heads][head_dim] buffers) passed by Eigen::Ref, so Maps over raw
// buffers, blocks such as `.middleCols(h * head_dim, head_dim)` and plain matrices all bind
// without a copy.
#pragma once

#include <Eigen/Core>

namespace ropex {

using row_matrix_f = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using row_matrix_d = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using matrix_ref = Eigen::Ref<row_matrix_f>;              // writable, any outer stride, inner stride 1
using const_matrix_ref = Eigen::Ref<const row_matrix_f>;  // read-only, any outer stride, inner stride 1

}  // namespace ropex
