// ModelRope and Hugging Face config.json import (import/hf.hpp). The Python wrapper in
// ropex/__init__.py turns a dict or a model directory into the text or path read here.
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include <ropex/import/hf.hpp>

#include "arguments.hpp"
#include "bindings.hpp"

namespace ropex::python {

namespace {

import_options options_of(const loose<std::optional<std::string>>& layout, const loose<std::string>& layer_type) {
  import_options o;
  if (const std::optional<std::string> name = layout.get("layout")) o.layout = to_layout(*name);
  o.layer_type = layer_type.get("layer_type");
  return o;
}

}  // namespace

void bind_import(py::module_& m) {
  using namespace pybind11::literals;
  py::class_<model_rope>(m, "ModelRope",
                         "A checkpoint's RoPE as read from its config: head geometry, scaling policy and the "
                         "model-level facts beside them.")
      .def_readonly("config", &model_rope::config, "RopeConfig: head_dim, rotary_dim, base, layout.")
      .def_property_readonly("policy", [](const model_rope& r) { return from_scaling(r.policy); })
      .def_readonly("max_position", &model_rope::max_position,
                    "HF max_position_embeddings (0 when the config does not say).")
      .def_readonly("softmax_scale_multiplier", &model_rope::softmax_scale_multiplier,
                    "Extra factor on the 1/sqrt(d) logit scale: mscale^2 for DeepSeek's mscale_all_dim, else 1.")
      .def_readonly("model_type", &model_rope::model_type)
      .def_readonly("rope_type", &model_rope::rope_type, "The scaling name as written in the config.")
      .def_readonly("notes", &model_rope::notes, "What the config holds that ropex does not express.")
      .def_property_readonly(
          "mrope_section",
          [](const model_rope& r) -> std::optional<std::vector<int>> {
            if (!r.axes) return std::nullopt;
            return r.axes->mrope_section;
          },
          "Pairs per position axis for M-RoPE models (None for 1-D RoPE; the Python API rotates 1-D only).")
      .def(
          "rotary_embedding",
          [](const model_rope& r, loose<std::int64_t> seq_len) {
            return make_rope(r.config, r.policy, seq_len.get("seq_len"));
          },
          "seq_len"_a = 0, "A RotaryEmbedding for this checkpoint.")
      .def("__repr__", [](const model_rope& r) {
        return "ModelRope(model_type='" + r.model_type + "', config=" + std::string(py::repr(py::cast(r.config))) +
               ", policy=" + std::string(py::repr(from_scaling(r.policy))) +
               ", max_position=" + std::to_string(r.max_position) +
               ", softmax_scale_multiplier=" + float_repr(r.softmax_scale_multiplier) + ")";
      });

  m.def(
      "_parse_hf_config",
      [](const std::string& text, const loose<std::optional<std::string>>& layout, const loose<std::string>& layer_type) {
        return parse_hf_config(text, options_of(layout, layer_type));
      },
      "text"_a, "layout"_a = py::none(), "layer_type"_a = "full_attention");
  m.def(
      "_load_hf_config",
      [](const std::string& path, const loose<std::optional<std::string>>& layout, const loose<std::string>& layer_type) {
        return load_hf_config(path, options_of(layout, layer_type));
      },
      "path"_a, "layout"_a = py::none(), "layer_type"_a = "full_attention");
}

}  // namespace ropex::python
