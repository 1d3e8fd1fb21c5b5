// The scaling policies as immutable Python value objects over the C++ aggregates, with Hugging
// Face's defaults (policies.hpp) and a repr of the resolved values.
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "arguments.hpp"
#include "bindings.hpp"

namespace ropex::python {

namespace {

std::string integer(std::int64_t v) { return std::to_string(v); }

// Policies are checked when they are made, against a head geometry where every policy is legal
// (NTK needs rotary_dim > 2; a LongRoPE list fixes rotary_dim itself). RotaryEmbedding checks the
// policy again against its own head_dim.
constexpr int probe_head_dim = 128;

template <class Policy>
Policy checked(Policy p) {
  validate(rope_config{probe_head_dim}, p);
  return p;
}

// The attention factor a policy resolves to (it does not depend on the head geometry).
double resolved_attention_factor(const yarn& p) {
  return compute_frequencies(rope_config{probe_head_dim}, p, 0).attention_factor;
}
double resolved_attention_factor(longrope p) {
  p.short_factor.assign(1, 1.0);
  p.long_factor.assign(1, 1.0);
  return compute_frequencies(rope_config{2}, p, 0).attention_factor;
}

longrope make_longrope(const loose<std::vector<double>>& short_factor, const loose<std::vector<double>>& long_factor,
                       const loose<double>& factor, const loose<std::int64_t>& original_max_position,
                       const loose<std::optional<double>>& attention_factor) {
  longrope p{short_factor.get("short_factor"), long_factor.get("long_factor"), factor.get("factor"),
             original_max_position.get("original_max_position"), attention_factor.get("attention_factor").value_or(0.0)};
  if (p.short_factor.empty()) detail::fail("longrope.short_factor", "must not be empty");
  // One entry per rotated pair: the short list fixes rotary_dim, the long one must agree.
  validate(rope_config{static_cast<int>(2 * p.short_factor.size())}, p);
  return p;
}

std::string list(const std::vector<double>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + float_repr(v[i]);
  return s + "]";
}

std::string repr(const plain&) { return "Plain()"; }
std::string repr(const linear& p) { return "Linear(factor=" + float_repr(p.factor) + ")"; }
std::string repr(const ntk& p) { return "NTK(factor=" + float_repr(p.factor) + ")"; }
std::string repr(const dynamic_ntk& p) {
  return "DynamicNTK(factor=" + float_repr(p.factor) + ", max_position=" + integer(p.max_position) + ")";
}
std::string repr(const yarn& p) {
  // beta 0 means HF's default (HF reads them with Python `or`); show what is used.
  return "Yarn(factor=" + float_repr(p.factor) + ", original_max_position=" + integer(p.original_max_position) +
         ", beta_fast=" + float_repr(p.beta_fast == 0 ? 32 : p.beta_fast) +
         ", beta_slow=" + float_repr(p.beta_slow == 0 ? 1 : p.beta_slow) + ", mscale=" + float_repr(p.mscale) +
         ", mscale_all_dim=" + float_repr(p.mscale_all_dim) + ", attention_factor=" +
         float_repr(resolved_attention_factor(p)) + ", truncate=" + (p.truncate ? "True" : "False") + ")";
}
std::string repr(const llama3& p) {
  return "Llama3(factor=" + float_repr(p.factor) + ", low_freq_factor=" + float_repr(p.low_freq_factor) +
         ", high_freq_factor=" + float_repr(p.high_freq_factor) +
         ", original_max_position=" + integer(p.original_max_position) + ")";
}
std::string repr(const longrope& p) {
  return "LongRoPE(short_factor=" + list(p.short_factor) + ", long_factor=" + list(p.long_factor) +
         ", factor=" + float_repr(p.factor) + ", original_max_position=" + integer(p.original_max_position) +
         ", attention_factor=" + float_repr(resolved_attention_factor(p)) + ")";
}

// repr() of each bound policy, and equality as values (repr lists every field).
template <class Policy, class Class>
void value_methods(Class& c) {
  c.def("__repr__", [](const Policy& p) { return repr(p); });
  c.def("__eq__", [](const Policy& a, py::object b) {
    return py::isinstance<Policy>(b) && repr(a) == repr(b.cast<const Policy&>());
  });
  c.def("__hash__", [](const Policy& p) { return py::hash(py::str(repr(p))); });
  c.def_property_readonly("rope_type", [](const Policy& p) { return rope_type_name(p); },
                          "The Hugging Face rope_type this policy reproduces.");
}

}  // namespace

ropex::layout to_layout(const std::string& name) {
  if (name == "half") return layout::half;
  if (name == "interleaved") return layout::interleaved;
  detail::fail("layout", "must be \"half\" or \"interleaved\" (got \"" + name + "\")");
}

const char* layout_name(ropex::layout l) { return l == layout::half ? "half" : "interleaved"; }

scaling to_scaling(py::handle policy) {
  if (policy.is_none() || py::isinstance<plain>(policy)) return plain{};
  if (py::isinstance<linear>(policy)) return policy.cast<linear>();
  if (py::isinstance<ntk>(policy)) return policy.cast<ntk>();
  if (py::isinstance<dynamic_ntk>(policy)) return policy.cast<dynamic_ntk>();
  if (py::isinstance<yarn>(policy)) return policy.cast<yarn>();
  if (py::isinstance<llama3>(policy)) return policy.cast<llama3>();
  if (py::isinstance<longrope>(policy)) return policy.cast<longrope>();
  raise(PyExc_TypeError, std::string("policy must be a ropex policy (Plain, Linear, NTK, DynamicNTK, Yarn, Llama3, "
                                     "LongRoPE) or None, got ") +
                             Py_TYPE(policy.ptr())->tp_name);
}

// Generic on purpose: a policy added to the C++ variant compiles here and raises TypeError from
// py::cast until it is bound above.
py::object from_scaling(const scaling& policy) {
  return std::visit([](const auto& p) { return py::cast(p); }, policy);
}

void bind_policies(py::module_& m) {
  using namespace pybind11::literals;

  auto plain_class = py::class_<plain>(m, "Plain", "Unscaled RoPE (HF rope_type \"default\").");
  plain_class.def(py::init<>());
  value_methods<plain>(plain_class);

  auto linear_class = py::class_<linear>(m, "Linear",
                                         "Position Interpolation (HF \"linear\"): position m -> m / factor.");
  linear_class.def(py::init([](loose<double> factor) { return checked(linear{factor.get("factor")}); }), "factor"_a = 1.0)
      .def_readonly("factor", &linear::factor);
  value_methods<linear>(linear_class);

  auto ntk_class = py::class_<ntk>(m, "NTK", "NTK-aware base scaling: base' = base * factor^(r / (r - 2)).");
  ntk_class.def(py::init([](loose<double> factor) { return checked(ntk{factor.get("factor")}); }), "factor"_a = 1.0)
      .def_readonly("factor", &ntk::factor);
  value_methods<ntk>(ntk_class);

  auto dynamic_class = py::class_<dynamic_ntk>(
      m, "DynamicNTK",
      "HF \"dynamic\": NTK base scaling that grows with seq_len past max_position "
      "(HF max_position_embeddings). RotaryEmbedding(seq_len=...) picks the base.");
  dynamic_class
      .def(py::init([](loose<double> factor, loose<std::int64_t> max_position) {
             return checked(dynamic_ntk{factor.get("factor"), max_position.get("max_position")});
           }),
           "factor"_a = 1.0, "max_position"_a = 2048)
      .def_readonly("factor", &dynamic_ntk::factor)
      .def_readonly("max_position", &dynamic_ntk::max_position);
  value_methods<dynamic_ntk>(dynamic_class);

  auto yarn_class = py::class_<yarn>(
      m, "Yarn",
      "HF \"yarn\" (Peng et al. 2023) with DeepSeek's mscale / mscale_all_dim. attention_factor None "
      "derives it from factor (0.1 ln factor + 1, or the mscale ratio); truncate=False keeps the "
      "correction range unrounded (gpt-oss).");
  yarn_class
      .def(py::init([](loose<double> factor, loose<std::int64_t> original_max_position, loose<double> beta_fast,
                       loose<double> beta_slow, loose<double> mscale, loose<double> mscale_all_dim,
                       loose<std::optional<double>> attention_factor, loose<bool> truncate) {
             return checked(yarn{factor.get("factor"), original_max_position.get("original_max_position"),
                                 beta_fast.get("beta_fast"), beta_slow.get("beta_slow"), mscale.get("mscale"),
                                 mscale_all_dim.get("mscale_all_dim"),
                                 attention_factor.get("attention_factor").value_or(0.0), truncate.get("truncate")});
           }),
           "factor"_a = 1.0, "original_max_position"_a = 2048, "beta_fast"_a = 32.0, "beta_slow"_a = 1.0,
           "mscale"_a = 0.0, "mscale_all_dim"_a = 0.0, "attention_factor"_a = py::none(), "truncate"_a = true)
      .def_readonly("factor", &yarn::factor)
      .def_readonly("original_max_position", &yarn::original_max_position)
      .def_property_readonly("beta_fast", [](const yarn& p) { return p.beta_fast == 0 ? 32.0 : p.beta_fast; })
      .def_property_readonly("beta_slow", [](const yarn& p) { return p.beta_slow == 0 ? 1.0 : p.beta_slow; })
      .def_readonly("mscale", &yarn::mscale)
      .def_readonly("mscale_all_dim", &yarn::mscale_all_dim)
      .def_property_readonly("attention_factor", [](const yarn& p) { return resolved_attention_factor(p); })
      .def_readonly("truncate", &yarn::truncate);
  value_methods<yarn>(yarn_class);

  auto llama3_class = py::class_<llama3>(
      m, "Llama3", "HF \"llama3\": wavelengths above original_max_position / low_freq_factor are divided by "
                   "factor, those below original_max_position / high_freq_factor kept, the band between blended.");
  llama3_class
      .def(py::init([](loose<double> factor, loose<double> low_freq_factor, loose<double> high_freq_factor,
                       loose<std::int64_t> original_max_position) {
             return checked(llama3{factor.get("factor"), low_freq_factor.get("low_freq_factor"),
                                   high_freq_factor.get("high_freq_factor"),
                                   original_max_position.get("original_max_position")});
           }),
           "factor"_a = 8.0, "low_freq_factor"_a = 1.0, "high_freq_factor"_a = 4.0,
           "original_max_position"_a = 8192)
      .def_readonly("factor", &llama3::factor)
      .def_readonly("low_freq_factor", &llama3::low_freq_factor)
      .def_readonly("high_freq_factor", &llama3::high_freq_factor)
      .def_readonly("original_max_position", &llama3::original_max_position);
  value_methods<llama3>(llama3_class);

  auto longrope_class = py::class_<longrope>(
      m, "LongRoPE",
      "HF \"longrope\" (Phi-3): per-pair divisors, long_factor once seq_len exceeds original_max_position. "
      "One entry per rotated pair (rotary_dim // 2). attention_factor None derives "
      "sqrt(1 + ln factor / ln original_max_position).");
  longrope_class
      .def(py::init(&make_longrope), "short_factor"_a, "long_factor"_a, "factor"_a = 1.0,
           "original_max_position"_a = 4096, "attention_factor"_a = py::none())
      .def_readonly("short_factor", &longrope::short_factor)
      .def_readonly("long_factor", &longrope::long_factor)
      .def_readonly("factor", &longrope::factor)
      .def_readonly("original_max_position", &longrope::original_max_position)
      .def_property_readonly("attention_factor", [](const longrope& p) { return resolved_attention_factor(p); });
  value_methods<longrope>(longrope_class);

  py::class_<rope_config>(m, "RopeConfig", "Head geometry: head_dim, rotary_dim, base (rope_theta), layout.")
      .def_readonly("head_dim", &rope_config::head_dim)
      .def_property_readonly("rotary_dim", [](const rope_config& c) { return rotary_dim_of(c); })
      .def_readonly("base", &rope_config::base)
      .def_property_readonly("layout", [](const rope_config& c) { return layout_name(c.layout); })
      .def("__repr__", [](const rope_config& c) {
        return "RopeConfig(head_dim=" + std::to_string(c.head_dim) + ", rotary_dim=" +
               std::to_string(rotary_dim_of(c)) + ", base=" + float_repr(c.base) + ", layout='" + layout_name(c.layout) +
               "')";
      });
}

}  // namespace ropex::python
