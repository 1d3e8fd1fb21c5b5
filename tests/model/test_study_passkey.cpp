// The helpers of `ropex-study --model` (tools/ropex-study/model_study.hpp): passkey prompts and
// perplexity windows.
#include "catch.hpp"

#include <random>
#include <set>
#include <string>

#include "model_study.hpp"

using namespace ropex_study::model;

TEST_CASE("with_key replaces every placeholder and nothing else", "[study]") {
  CHECK(with_key(" @{key}. ", "48213") == " @48213. ");
  CHECK(with_key("{key}-{key}", "7") == "7-7");
  CHECK(with_key("no key", "123") == "no key");
  CHECK(with_key("{key}", "{key}") == "{key}");  // a key that looks like the placeholder is not re-expanded
}

TEST_CASE("random_key: the requested digits, no leading zero, varied", "[study]") {
  std::mt19937_64 rng(3);
  std::set<std::string> seen;
  for (int i = 0; i < 200; ++i) {
    const std::string k = random_key(rng, 5);
    REQUIRE(k.size() == 5);
    CHECK(k[0] != '0');
    for (char c : k) CHECK((c >= '0' && c <= '9'));
    seen.insert(k);
  }
  CHECK(seen.size() > 190);
  CHECK(random_key(rng, 1).size() == 1);
}

TEST_CASE("key_answered: the key first, after at most one space", "[study]") {
  CHECK(key_answered("48213.", "48213"));
  CHECK(key_answered(" 48213\n", "48213"));
  CHECK_FALSE(key_answered("x48213", "48213"));   // another byte before the key is a wrong answer
  CHECK_FALSE(key_answered("4821", "48213"));
  CHECK_FALSE(key_answered("  48213", "48213"));
  CHECK_FALSE(key_answered("", "48213"));
}

TEST_CASE("perplexity_windows: every length scores the same span", "[study]") {
  CHECK(perplexity_windows(16000, 2048, 128) == 16);  // 16 x 128 = the 2048 tokens the longest scores
  CHECK(perplexity_windows(16000, 2048, 2048) == 1);
  CHECK(perplexity_windows(1000, 2048, 128) == 7);    // a short text: its whole length
  CHECK(perplexity_windows(1000, 2048, 1000) == 1);
  CHECK(perplexity_windows(1000, 2048, 2048) == 0);   // does not fit: no window
  CHECK(perplexity_windows(1000, 2048, 1) == 0);      // one token predicts nothing
}
