#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "catch.hpp"
#include "ropex/model/bpe.hpp"

namespace {

nlohmann::json read_json(const std::string& name) {
  std::ifstream in(std::string(ROPEX_TEST_DATA_DIR) + "/bpe/" + name);
  return nlohmann::json::parse(in);
}

// tiny-tokenizer.json: the 256 byte symbols (id = byte value), nine merges, <|endoftext|> = 265.
nlohmann::json with_pre_tokenizer(nlohmann::json tok, const std::string& which) {
  const std::string regex = which == "gpt2"   ? ropex::detail::bpe::gpt2_regex
                            : which == "qwen2" ? ropex::detail::bpe::qwen2_regex
                                               : ropex::detail::bpe::llama3_regex;
  tok["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = regex;
  return tok;
}

}  // namespace

TEST_CASE("bpe: bytes_to_unicode is GPT-2's", "[bpe]") {
  const auto& t = ropex::detail::bpe::byte_to_code_point();
  CHECK(t['a'] == 'a');
  CHECK(t[' '] == 0x120);   // 'Ġ'
  CHECK(t['\n'] == 0x10A);  // 'Ċ'
  CHECK(t[0] == 0x100);
  CHECK(t[0xAD] == 0x143);  // soft hyphen, the last non-printable below 0xFF
  std::vector<std::uint32_t> sorted(t.begin(), t.end());
  std::sort(sorted.begin(), sorted.end());
  CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
}

TEST_CASE("bpe: the hand-written patterns split as the regex engine does", "[bpe]") {
  // Expected pieces were produced by the Python `regex` module from the patterns' text.
  const nlohmann::json cases = read_json("pretokenize-cases.json")["cases"];
  const nlohmann::json tok = read_json("tiny-tokenizer.json");
  for (const std::string which : {"gpt2", "llama3", "qwen2"}) {
    const auto t = ropex::bpe_tokenizer::from_json(with_pre_tokenizer(tok, which));
    for (const auto& c : cases[which]) {
      const std::string text = c[0].get<std::string>();
      INFO(which << ": \"" << text << "\"");
      CHECK(t.pre_tokenize(text) == c[1].get<std::vector<std::string>>());
    }
  }
}

TEST_CASE("bpe: merges, added tokens and decoding", "[bpe]") {
  const nlohmann::json tok = read_json("tiny-tokenizer.json");
  const auto t = ropex::bpe_tokenizer::load(std::string(ROPEX_TEST_DATA_DIR) + "/bpe/tiny-tokenizer.json");
  CHECK(t.pattern() == ropex::pretokenizer_pattern::llama3);
  CHECK(t.vocab_size() == 266);
  // "the" -> t + he (rank 1); " lower" merges through lo, low, er, lower to Ġlower; " the" to Ġthe;
  // " " stays Ġ (a lone space before digits); "123" -> 12 + 3.
  const std::string text = "the lower<|endoftext|> the 123";
  const std::vector<std::int64_t> want = {'t', 257, 263, 265, 258, ' ', 264, '3'};
  CHECK(t.encode(text) == want);
  CHECK(t.decode(want) == text);
  CHECK(t.encode("") == std::vector<std::int64_t>{});
  // Multi-byte text is byte-level: é = C3 A9, each byte its own symbol here.
  CHECK(t.encode("é") == std::vector<std::int64_t>{0xC3, 0xA9});
  const std::string mixed = "naïve 東京\n\n\t👍🏽 <|endoftext|><|endoftext|>x";
  CHECK(t.decode(t.encode(mixed)) == mixed);
  // Invalid UTF-8 still round-trips byte for byte.
  const std::string invalid = "a\xff\xc3(b";
  CHECK(t.decode(t.encode(invalid)) == invalid);

  // SmolLM: Digits(individual_digits) then ByteLevel with its own (GPT-2) pattern.
  nlohmann::json smol = tok;
  smol["pre_tokenizer"] = {{"type", "Sequence"},
                           {"pretokenizers",
                            {{{"type", "Digits"}, {"individual_digits", true}},
                             {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}}}};
  const auto s = ropex::bpe_tokenizer::from_json(smol);
  CHECK(s.pattern() == ropex::pretokenizer_pattern::gpt2);
  CHECK(s.pre_tokenize("ab 123x") == std::vector<std::string>{"ab", " ", "1", "2", "3", "x"});
  CHECK(s.encode(" 12") == std::vector<std::int64_t>{' ', '1', '2'});
  CHECK(ropex::bpe_tokenizer::from_json(with_pre_tokenizer(tok, "gpt2")).encode(" 12") ==
        std::vector<std::int64_t>{' ', 264});
}

TEST_CASE("bpe: files it cannot run name the key", "[bpe]") {
  const nlohmann::json tok = read_json("tiny-tokenizer.json");
  auto broken = tok;
  broken["model"]["type"] = "Unigram";
  CHECK_THROWS_WITH(ropex::bpe_tokenizer::from_json(broken), contains_text("model.type"));
  broken = tok;
  broken["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+";
  CHECK_THROWS_WITH(ropex::bpe_tokenizer::from_json(broken), contains_text("pattern.Regex"));
  broken = tok;
  broken["model"]["merges"][2] = 7;
  CHECK_THROWS_WITH(ropex::bpe_tokenizer::from_json(broken), contains_text("model.merges[2]"));
  broken = tok;
  broken["normalizer"] = {{"type", "NFKC"}};
  CHECK_THROWS_WITH(ropex::bpe_tokenizer::from_json(broken), contains_text("normalizer"));
  broken = tok;
  broken["model"]["vocab"].erase("a");
  CHECK_THROWS_WITH(ropex::bpe_tokenizer::from_json(broken).encode("a"), contains_text("has no symbol 'a'"));
  const auto t = ropex::bpe_tokenizer::from_json(tok);
  CHECK_THROWS_WITH(t.decode({5000}), contains_text("ids[0]"));
}

TEST_CASE("bpe: plain token-id files", "[bpe]") {
  CHECK(ropex::parse_token_ids("1, 2,3\n 4\t5 # comment 6\n7") == std::vector<std::int64_t>{1, 2, 3, 4, 5, 7});
  CHECK_THROWS_WITH(ropex::parse_token_ids("1\n2\nx"), contains_text("line 3"));
  CHECK_THROWS_WITH(ropex::parse_token_ids("1 -2"), contains_text("'-'"));
  CHECK_THROWS_WITH(ropex::parse_token_ids("99999999999999999999"), contains_text("too large"));
}
