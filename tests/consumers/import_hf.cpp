// Consumer of the optional ropex::import_hf target (nlohmann/json): a Llama-3-style config.json.
#include <ropex/import/hf.hpp>

#include <cstdio>
#include <variant>

int main() {
  const ropex::model_rope model = ropex::parse_hf_config(
      R"({"hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
          "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
          "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})");
  const bool ok = model.config.head_dim == 128 && model.config.base == 500000.0 &&
                  std::holds_alternative<ropex::llama3>(model.policy) && model.max_position == 131072;
  std::printf("ropex::import_hf consumer: head_dim %d, base %g, llama3 %s\n", model.config.head_dim,
              model.config.base, std::holds_alternative<ropex::llama3>(model.policy) ? "yes" : "no");
  return ok ? 0 : 1;
}
