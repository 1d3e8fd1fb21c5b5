// The one place the test suite names Catch2: v3 (Debian 13, Ubuntu 24.04) or v2 (Debian 12,
// Ubuntu 22.04), chosen by tests/CMakeLists.txt through ROPEX_CATCH2_MAJOR. Test files include
// this header and use the spellings below, so they carry no version conditionals.
//   Approx                          Catch::Approx in v3, the global Approx in v2
//   contains_text(s)                string matcher: ContainsSubstring in v3, Contains in v2
//   ropex_test::string_matcher      base class of a custom std::string matcher
#pragma once

#if ROPEX_CATCH2_MAJOR >= 3
#include <catch2/catch_all.hpp>
using Catch::Approx;
#else
#include <catch2/catch.hpp>
#endif

#include <string>

namespace ropex_test {

#if ROPEX_CATCH2_MAJOR >= 3
using string_matcher = Catch::Matchers::MatcherBase<std::string>;
inline auto contains_text(const std::string& text) { return Catch::Matchers::ContainsSubstring(text); }
#else
using string_matcher = Catch::MatcherBase<std::string>;
inline auto contains_text(const std::string& text) { return Catch::Matchers::Contains(text); }
#endif

}  // namespace ropex_test

using ropex_test::contains_text;
