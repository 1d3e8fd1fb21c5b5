// RotaryEmbedding: ropex::rotary_embedding over borrowed NumPy / DLPack arrays, in place.
//
// A tensor is [..., tokens, heads, head_dim] with head_dim contiguous. Leading dimensions are
// folded into the token dimension wherever their strides allow it (one C++ call for a contiguous
// batch); the rest are looped over, one tensor_view per index (a head-major [batch, heads, tokens,
// head_dim] tensor seen through .transpose(1, 2) is `batch` head-major views). Everything that can
// be wrong is checked before the first element is written.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>

#include "arguments.hpp"
#include "arrays.hpp"
#include "bindings.hpp"

namespace ropex::python {

using detail::overlap_result;
using detail::row_set;
using detail::rows_overlap;
using detail::rows_repeat;

namespace {

enum class operation { apply, inverse, shift };

// Largest |position| rotary_embedding accepts (exact in double); checked here for every call up front.
constexpr std::int64_t max_position_magnitude = std::int64_t{1} << 53;

// Python's spelling of a shape: "(3, 32)", "(32,)".
std::string shape_string(const borrowed_array& a, int first, int last) {
  std::string s = "(";
  for (int i = first; i < last; ++i) s += (i > first ? ", " : "") + std::to_string(a.shape[static_cast<std::size_t>(i)]);
  return s + (last - first == 1 ? ",)" : ")");
}

// Shape, stride and writability checks of one rotated tensor.
void check_tensor(const borrowed_array& a, const char* name, int head_dim) {
  if (a.ndim < 3)
    raise(PyExc_ValueError, std::string(name) + " must have shape [..., tokens, heads, head_dim] (got shape " +
                                shape_string(a, 0, a.ndim) + ")");
  const auto last = static_cast<std::size_t>(a.ndim - 1);
  if (a.shape[last] != head_dim)
    raise(PyExc_ValueError, std::string(name) + ".shape[-1] must equal head_dim " + std::to_string(head_dim) +
                                " (got " + std::to_string(a.shape[last]) + ")");
  if (a.strides[last] != 1)
    raise(PyExc_ValueError, std::string(name) + " must be contiguous in its last dimension (stride " +
                                std::to_string(a.strides[last]) + " elements)");
  for (int i = 0; i < a.ndim; ++i) {
    const auto d = static_cast<std::size_t>(i);
    if (a.shape[d] > 1 && a.strides[d] < 0)
      raise(PyExc_ValueError, std::string(name) + " has a negative stride in dimension " + std::to_string(i) +
                                  "; pass a copy");
  }
  if (!a.writable) raise(PyExc_ValueError, std::string(name) + " is read-only; ropex rotates in place");
}

// "q[3, 1]": the row of `a` (all but the last dimension) at `index`.
std::string row_string(const char* name, const std::array<std::int64_t, max_dims>& index, int dims) {
  std::string s = std::string(name) + "[";
  for (int i = 0; i < dims; ++i) s += (i ? ", " : "") + std::to_string(index[static_cast<std::size_t>(i)]);
  return s + "]";
}

// q and k must not share an element: it would be rotated twice. Their byte ranges are compared
// first (disjoint for separate tensors, in O(ndim)); only when those interleave, as for slices of
// one fused qkv tensor, are the rows themselves searched (ropex/detail/rows_overlap.hpp). Both are checked
// (check_tensor) and of one element type, so both are aligned to it and their distance is a whole
// number of elements.
void check_disjoint(const borrowed_array& q, const borrowed_array& k) {
  const auto extent = [](const borrowed_array& a) {  // elements from the first to one past the last
    std::int64_t last = 0;
    for (int i = 0; i < a.ndim; ++i) {
      const auto d = static_cast<std::size_t>(i);
      if (a.shape[d] == 0) return std::int64_t{0};
      last += (a.shape[d] - 1) * a.strides[d];
    }
    return last + 1;
  };
  const std::int64_t q_extent = extent(q), k_extent = extent(k);
  if (q_extent == 0 || k_extent == 0) return;
  const auto q_begin = reinterpret_cast<std::uintptr_t>(q.data), k_begin = reinterpret_cast<std::uintptr_t>(k.data);
  const auto item = static_cast<std::uintptr_t>(q.itemsize);
  if (q_begin + static_cast<std::uintptr_t>(q_extent) * item <= k_begin ||
      k_begin + static_cast<std::uintptr_t>(k_extent) * item <= q_begin)
    return;
  const int dims = q.ndim - 1;  // rows: every dimension but the contiguous head_dim
  const auto distance = static_cast<std::int64_t>(q_begin - k_begin) / q.itemsize;  // wraps, then converts back
  const row_set rows_q{distance, dims, q.shape.data(), q.strides.data()};
  const row_set rows_k{0, dims, k.shape.data(), k.strides.data()};
  const auto answer = rows_overlap<max_dims>(rows_q, rows_k, q.shape[static_cast<std::size_t>(dims)]);
  if (answer.result == overlap_result::found)
    raise(PyExc_ValueError, "q and k overlap in memory: rows " + row_string("q", answer.index_a, dims) + " and " +
                                row_string("k", answer.index_b, dims) +
                                " share elements, which would be rotated twice; pass separate tensors");
  if (answer.result == overlap_result::undecided)
    raise(PyExc_ValueError,
          "q and k may overlap in memory: their byte ranges interleave with strides too irregular to check "
          "row by row; pass a copy of k");
}

// Leading dimensions are looped over (or folded into tokens) outside the C++ view checks, so a
// view whose leading strides bring rows of different indices together (as_strided with a batch
// stride smaller than a batch) is caught here. Only for more than three dimensions: the C++ call
// checks the rows of one [tokens, heads] view itself.
void check_rows_distinct(const borrowed_array& a, const char* name) {
  if (a.ndim <= 3) return;
  const int dims = a.ndim - 1;
  const row_set rows{0, dims, a.shape.data(), a.strides.data()};
  const auto answer = rows_repeat<max_dims>(rows, a.shape[static_cast<std::size_t>(dims)]);
  if (answer.result == overlap_result::found)
    raise(PyExc_ValueError, std::string(name) + " has rows that overlap in memory: " +
                                row_string(name, answer.index_a, dims) + " and " + row_string(name, answer.index_b, dims) +
                                " share elements, which would be rotated twice");
  if (answer.result == overlap_result::undecided)
    raise(PyExc_ValueError, std::string(name) + " may have rows that overlap in memory: its strides are too "
                                                "irregular to check row by row; pass a copy");
}

// The loop over one or two tensors with the same token dimensions: an inner run of `tokens`
// tokens (one tensor_view) and outer dimensions iterated one index at a time.
struct call_plan {
  std::int64_t tokens = 1;
  std::int64_t token_stride[2] = {0, 0};
  int outer = 0;
  // The first `outer` entries are set (the rest are not cleared on every call).
  std::int64_t outer_size[max_dims], outer_stride[2][max_dims], outer_position_stride[max_dims];
  std::int64_t groups = 1;
};

// broadcast: positions index the tokens dimension only and repeat over the leading ones.
call_plan plan_call(const borrowed_array* const* arrays, int n, bool broadcast, const char* name) {
  const int token_dims = arrays[0]->ndim - 2;
  call_plan p;
  const auto inner = static_cast<std::size_t>(token_dims - 1);
  p.tokens = arrays[0]->shape[inner];
  for (int a = 0; a < n; ++a) p.token_stride[a] = arrays[a]->strides[inner];
  bool folding = !broadcast;
  std::int64_t position_stride = p.tokens;  // row-major index step of dimension i over positions
  for (int i = token_dims - 2; i >= 0; --i) {
    const auto d = static_cast<std::size_t>(i);
    const std::int64_t size = arrays[0]->shape[d];
    const std::int64_t this_position_stride = broadcast ? 0 : position_stride;
    position_stride *= size;
    if (size == 1) continue;
    bool foldable = folding;
    for (int a = 0; a < n && foldable; ++a)
      foldable = p.tokens == 1 || arrays[a]->strides[d] == p.token_stride[a] * p.tokens;
    if (foldable) {
      if (p.tokens == 1)
        for (int a = 0; a < n; ++a) p.token_stride[a] = arrays[a]->strides[d];
      p.tokens *= size;
      continue;
    }
    folding = false;
    for (int a = 0; a < n; ++a)
      if (arrays[a]->strides[d] == 0)
        raise(PyExc_ValueError, std::string(a == 0 ? name : "k") + " has stride 0 in dimension " + std::to_string(i) +
                                    " (a broadcast view): its rows would be rotated more than once");
    p.outer_size[p.outer] = size;
    for (int a = 0; a < n; ++a) p.outer_stride[a][p.outer] = arrays[a]->strides[d];
    p.outer_position_stride[p.outer] = this_position_stride;
    p.groups *= size;
    ++p.outer;
  }
  return p;
}

template <class T>
tensor_view<T> view_of(const borrowed_array& a, std::int64_t offset, const call_plan& p, int which) {
  const auto heads = static_cast<std::size_t>(a.ndim - 2);
  return {static_cast<T*>(a.data) + offset, p.tokens, a.shape[heads], p.token_stride[which], a.strides[heads]};
}

template <class T>
void run(const rotary_embedding& rope, const borrowed_array* const* arrays, int n, const call_plan& p,
         const std::int64_t* positions, operation op, std::int64_t delta) {
  std::int64_t index[max_dims], offset[2] = {0, 0}, position_offset = 0;
  for (int o = 0; o < p.outer; ++o) index[o] = 0;
  for (std::int64_t g = 0; g < p.groups; ++g) {
    const tensor_view<T> x = view_of<T>(*arrays[0], offset[0], p, 0);
    const std::int64_t* pos = positions ? positions + position_offset : nullptr;
    if (n == 2)
      rope.apply(x, view_of<T>(*arrays[1], offset[1], p, 1), pos);
    else if (op == operation::apply)
      rope.apply(x, pos);
    else if (op == operation::inverse)
      rope.apply_inverse(x, pos);
    else
      rope.shift(x, delta);
    // Odometer over the outer dimensions.
    for (int o = 0; o < p.outer; ++o) {
      for (int a = 0; a < n; ++a) offset[a] += p.outer_stride[a][o];
      position_offset += p.outer_position_stride[o];
      if (++index[o] < p.outer_size[o]) break;
      for (int a = 0; a < n; ++a) offset[a] -= p.outer_stride[a][o] * p.outer_size[o];
      position_offset -= p.outer_position_stride[o] * p.outer_size[o];
      index[o] = 0;
    }
  }
}

// One rotation call from Python: x alone, or q and k (positions required unless shifting).
void rotate(const rope_object& self, py::handle x, py::handle k, py::handle positions, operation op,
            std::int64_t delta) {
  const bool pair = k.ptr() != nullptr;
  const char* x_name = pair ? "q" : "x";
  const int head_dim = self.rope.config().head_dim;
  borrowed_array a, b;
  borrow_floating(x, x_name, a);
  check_tensor(a, x_name, head_dim);
  check_rows_distinct(a, x_name);
  const borrowed_array* arrays[2] = {&a, &b};
  if (pair) {
    borrow_floating(k, "k", b);
    check_tensor(b, "k", head_dim);
    check_rows_distinct(b, "k");
    if (b.type != a.type)
      raise(PyExc_TypeError, "k must have the element type of q (got " + b.type_name(k) + " and " + a.type_name(x) + ")");
    bool same = a.ndim == b.ndim;
    for (int i = 0; same && i < a.ndim - 2; ++i) same = a.shape[static_cast<std::size_t>(i)] == b.shape[static_cast<std::size_t>(i)];
    if (!same)
      raise(PyExc_ValueError, "k.shape[:-2] must equal q.shape[:-2] (got " + shape_string(b, 0, b.ndim - 2) + " and " +
                                  shape_string(a, 0, a.ndim - 2) + ")");
    check_disjoint(a, b);
  }

  const int token_dims = a.ndim - 2;
  std::int64_t tokens = 1;
  for (int i = 0; i < token_dims; ++i) tokens *= a.shape[static_cast<std::size_t>(i)];
  const std::int64_t last_tokens = a.shape[static_cast<std::size_t>(token_dims - 1)];

  bool broadcast = false;
  const std::int64_t* position_data = nullptr;
  std::optional<positions_ref> pos;
  if (op != operation::shift) {
    pos.emplace(positions, "positions");
    if (pos->size() != tokens) {
      broadcast = token_dims > 1 && pos->size() == last_tokens;
      if (!broadcast)
        raise(PyExc_ValueError, "positions has " + std::to_string(pos->size()) + " entries; " + x_name + " has " +
                                    std::to_string(tokens) + " tokens (" + x_name + ".shape[:-2] = " +
                                    shape_string(a, 0, token_dims) + ")" +
                                    (token_dims > 1 ? ", or give " + std::to_string(last_tokens) +
                                                          " to use the same positions for every leading index"
                                                    : std::string()));
    }
    position_data = pos->data();
    // The C++ call checks the positions it is given before writing; with several calls a bad
    // entry in a later one would come after earlier writes, so check them all first.
    for (std::int64_t t = 0; t < pos->size(); ++t)
      if (position_data[t] < -max_position_magnitude || position_data[t] > max_position_magnitude)
        raise(PyExc_ValueError, "positions[" + std::to_string(t) + "] magnitude must be <= 2^53 (got " +
                                    std::to_string(position_data[t]) + ")");
  }
  if (tokens == 0) return;

  const int n = pair ? 2 : 1;
  const call_plan plan = plan_call(arrays, n, broadcast, x_name);
  // Every group has the same shape and strides, so the C++ view checks either fail on the first
  // group, before anything is written, or pass for all of them.
  py::gil_scoped_release release;
  switch (a.type) {
    case dtype::float32: run<float>(self.rope, arrays, n, plan, position_data, op, delta); break;
    case dtype::float16: run<float16>(self.rope, arrays, n, plan, position_data, op, delta); break;
    case dtype::bfloat16: run<bfloat16>(self.rope, arrays, n, plan, position_data, op, delta); break;
    default: break;  // borrow_floating admits nothing else
  }
}

}  // namespace

rope_object make_rope(const rope_config& config, const scaling& policy, std::int64_t seq_len) {
  return rope_object{rotary_embedding(config, policy, seq_len), policy, seq_len};
}

void bind_rope(py::module_& m) {
  // The methods that take x and positions and return x.
  const auto rotates_x = [](operation op) {
    return [op](const rope_object& r, py::object x, py::object positions) {
      rotate(r, x, py::handle(), positions, op, 0);
      return x;
    };
  };
  py::class_<rope_object>(m, "RotaryEmbedding", R"doc(
RoPE for one head geometry and scaling policy, applied in place to NumPy arrays (float32,
float16) and CPU tensors with __dlpack__ (PyTorch float32, float16, bfloat16) without a copy.

Tensors are [..., tokens, heads, head_dim]; leading dimensions count as more tokens. The last
dimension must be contiguous; tokens and heads may have any non-negative strides that keep rows
apart, so q and k can be slices of a fused qkv tensor and head-major tensors can be passed as
x.transpose(-3, -2). positions are integers, one per token (x.shape[:-2] elements), or
x.shape[-3] of them to reuse the same positions for every leading index. q and k of one call
must not share an element (slices of one fused qkv tensor are fine).

Angles are exact: the error of a rotated float32 value is a few ulps at every position up to
2^24 and beyond. Wrong dtype, shape, device or a read-only array raise TypeError / ValueError
naming the argument before anything is written. The GIL is released while the kernel runs.
)doc")
      .def(py::init([](loose<int> head_dim, py::object policy, loose<double> base, loose<std::optional<int>> rotary_dim,
                       loose<std::string> layout, loose<std::int64_t> seq_len) {
             const std::optional<int> rotary = rotary_dim.get("rotary_dim");
             // C++ reads rotary_dim 0 as "all of head_dim"; Python spells that None.
             if (rotary && *rotary == 0)
               raise(PyExc_ValueError, "ropex: rotary_dim must be > 0 (got 0); None rotates all of head_dim");
             const rope_config config{head_dim.get("head_dim"), rotary.value_or(0), base.get("base"),
                                      to_layout(layout.get("layout"))};
             return make_rope(config, to_scaling(policy), seq_len.get("seq_len"));
           }),
           py::arg("head_dim"), py::arg("policy") = py::none(), py::arg("base") = 10000.0,
           py::arg("rotary_dim") = py::none(), py::arg("layout") = "half", py::arg("seq_len") = 0,
           R"doc(head_dim: channels per head. policy: Plain() (None), Linear, NTK, DynamicNTK, Yarn, Llama3
or LongRoPE. base: rope_theta. rotary_dim: rotated channels (None = head_dim; the rest pass
through). layout: "half" (GPT-NeoX, HF rotate_half) or "interleaved" (GPT-J, Meta, DeepSeek).
seq_len: sequence length that selects the DynamicNTK base and the LongRoPE factor list.)doc")
      .def_property_readonly("head_dim", [](const rope_object& r) { return r.rope.config().head_dim; })
      .def_property_readonly("rotary_dim", [](const rope_object& r) { return r.rope.rotary_dim(); })
      .def_property_readonly("base", [](const rope_object& r) { return r.rope.config().base; })
      .def_property_readonly("layout", [](const rope_object& r) { return layout_name(r.rope.config().layout); })
      .def_property_readonly("policy", [](const rope_object& r) { return from_scaling(r.policy); })
      .def_property_readonly("seq_len", [](const rope_object& r) { return r.seq_len; })
      .def_property_readonly(
          "inv_freq",
          [](const rope_object& r) {
            const std::vector<double>& f = r.rope.freqs().inv_freq;
            return py::array_t<double>(static_cast<py::ssize_t>(f.size()), f.data());
          },
          "Radians per position of each rotated pair (float64, rotary_dim // 2 entries).")
      .def_property_readonly(
          "attention_factor", [](const rope_object& r) { return r.rope.freqs().attention_factor; },
          "Factor on cos and sin (YaRN / LongRoPE magnitude; 1 for the other policies).")
      .def("apply", rotates_x(operation::apply), py::arg("x"), py::arg("positions"),
           "Rotates x in place by its positions; returns x.")
      .def(
          "apply",
          [](const rope_object& r, py::object q, py::object k, py::object positions) {
            rotate(r, q, k, positions, operation::apply, 0);
            return py::make_tuple(q, k);
          },
          py::arg("q"), py::arg("k"), py::arg("positions"),
          "Rotates q and k of the same tokens in place in one pass (their head counts may differ); returns (q, k).")
      .def("apply_inverse", rotates_x(operation::inverse), py::arg("x"), py::arg("positions"),
           "Undoes apply: rotates by -position and divides by attention_factor, in place; returns x.")
      .def(
          "shift",
          [](const rope_object& r, py::object x, loose<std::int64_t> delta) {
            // Read before x is borrowed: a wrong delta fails first, naming delta.
            rotate(r, x, py::handle(), py::handle(), operation::shift, delta.get("delta"));
            return x;
          },
          py::arg("x"), py::arg("delta"),
          "Re-rotates cached keys from position p to p + delta (delta may be negative), in place; the "
          "attention factor is not applied again. Returns x.")
      .def("__repr__", [](const rope_object& r) {
        const rope_config& c = r.rope.config();
        return "RotaryEmbedding(head_dim=" + std::to_string(c.head_dim) +
               ", policy=" + std::string(py::repr(from_scaling(r.policy))) + ", base=" + float_repr(c.base) +
               ", rotary_dim=" + std::to_string(r.rope.rotary_dim()) + ", layout='" + layout_name(c.layout) +
               "', seq_len=" + std::to_string(r.seq_len) +
               ", attention_factor=" + float_repr(r.rope.freqs().attention_factor) + ")";
      });
}

}  // namespace ropex::python
