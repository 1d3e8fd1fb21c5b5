// ropex: RoPE kernels and context-extension policies. The one header users include.
//   config.hpp -> policies.hpp -> frequencies.hpp -> angles.hpp / table.hpp -> kernels/ -> apply.hpp
#pragma once

#include "ropex/version.hpp"
#include "ropex/config.hpp"
#include "ropex/policies.hpp"
#include "ropex/frequencies.hpp"
#include "ropex/angles.hpp"
#include "ropex/types.hpp"
#include "ropex/view.hpp"
#include "ropex/table.hpp"
#include "ropex/kernels/dispatch.hpp"
#include "ropex/apply.hpp"
#include "ropex/onnx.hpp"
