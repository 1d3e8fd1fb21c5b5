// ropex: RoPE kernels and context-extension policies. The one header users include.
//   config.hpp -> policies.hpp -> frequencies.hpp -> angles.hpp / table.hpp -> kernels/ -> apply.hpp
//   axes.hpp: multi-axis positions (M-RoPE, 2-D vision); threads.hpp: split a call over threads
//   fused.hpp: RMSNorm + RoPE, RoPE + paged (quantized) KV-cache append, cache shift, per-request RoPE
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
#include "ropex/block_angles.hpp"
#include "ropex/axes.hpp"
#include "ropex/apply.hpp"
#include "ropex/threads.hpp"
#include "ropex/onnx.hpp"
#include "ropex/fused.hpp"
