// The README / docs/attention.md snippet, compiled and checked so it cannot rot.
#include "catch.hpp"

#include <cmath>
#include <vector>

#include <ropex/attention.hpp>

TEST_CASE("README attention snippet", "[attention][readme]") {
  // --- snippet begin --- (README.md; tests/readme_snippet.cmake checks it)
  std::vector<float> row = {2.0f, 1.0f, -INFINITY, 0.5f};
  ropex::softmax(row.data(), 4);                    // stable; the masked logit becomes exactly 0
  double h = ropex::entropy(row.data(), 4);         // nats
  std::vector<float> uniform(4, 0.25f);
  double js = ropex::js_divergence(row.data(), uniform.data(), 4);  // 0 <= js <= ln 2
  // --- snippet end ---
  CHECK(row[2] == 0.0f);
  CHECK(h > 0);
  CHECK(h < std::log(3.0));
  CHECK(js > 0);
  CHECK(js < std::log(2.0));
}
