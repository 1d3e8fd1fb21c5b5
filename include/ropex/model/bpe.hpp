// Byte-level BPE from a Hugging Face tokenizer.json (needs nlohmann/json; CMake target
// ropex::model): the GPT-2 scheme used by GPT-2, Llama 3, Qwen2/3 and SmolLM/SmolLM2.
//
// encode(text):
//   1. added tokens ("<|endoftext|>", ...) are cut out first and map to their ids;
//   2. the rest is split by the pre-tokeniser: the GPT-2, Llama 3 or Qwen2 pattern (recognised
//      by its exact regex text and matched by hand below, because std::regex has no \p{L}),
//      optionally after HF's Digits splitter (SmolLM);
//   3. each piece's UTF-8 bytes become printable characters through GPT-2's bytes_to_unicode;
//   4. BPE merges the adjacent pair of lowest merge rank until none applies (Sennrich et al. 2016);
//   5. each symbol is looked up in the vocabulary.
// decode(ids) inverts 3 (and concatenates added tokens verbatim).
//
// The patterns are matched with the leftmost-first semantics of Oniguruma, which HF tokenizers
// uses: alternatives in order, each greedy with backtracking. \p{L} and \p{N} are the Unicode
// general categories L and N (detail/unicode_tables.hpp); \s is the Unicode White_Space property.
// A normalizer is not applied: NFC (Qwen2) is accepted and assumed of the input.
//
// Errors: std::invalid_argument naming the tokenizer.json key for a file this cannot run
// (another model type, an unknown pattern, a merge of unknown symbols), and for text whose
// pieces are missing from the vocabulary.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropex/config.hpp"  // detail::fail, ROPEX_INSIDE
#include "ropex/model/detail/unicode_tables.hpp"

namespace ropex {

namespace detail::unicode {

template <std::size_t N>
inline bool in_ranges(const code_point_range (&table)[N], std::uint32_t cp) {
  const code_point_range* end = table + N;
  const code_point_range* it =
      std::upper_bound(table, end, cp, [](std::uint32_t c, const code_point_range& r) { return c < r.first; });
  return it != table && cp <= (it - 1)->last;
}

inline bool is_letter(std::uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return in_ranges(letter_ranges, cp);
}
inline bool is_number(std::uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return in_ranges(number_ranges, cp);
}
// Unicode White_Space (PropList.txt).
inline bool is_space(std::uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}
inline bool is_line_break(std::uint32_t cp) { return cp == '\r' || cp == '\n'; }

// UTF-8 -> code points. Invalid sequences become U+FFFD per byte, but keep their original
// bytes (`bytes` holds each code point's byte range) so byte-level BPE still sees the input.
struct decoded {
  std::vector<std::uint32_t> cps;
  std::vector<std::size_t> offsets;  // cps.size() + 1 entries: byte offset of each code point
};

inline decoded decode_utf8(const std::string& s) {
  decoded d;
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    std::uint32_t cp = 0xFFFD;
    std::size_t len = 1;
    auto cont = [&](std::size_t k) { return i + k < s.size() && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80; };
    auto at = [&](std::size_t k) { return static_cast<std::uint32_t>(static_cast<unsigned char>(s[i + k]) & 0x3F); };
    if (b0 < 0x80) {
      cp = b0;
    } else if (b0 >= 0xC2 && b0 < 0xE0 && cont(1)) {
      cp = ((b0 & 0x1Fu) << 6) | at(1);
      len = 2;
    } else if (b0 >= 0xE0 && b0 < 0xF0 && cont(1) && cont(2)) {
      const std::uint32_t c = ((b0 & 0x0Fu) << 12) | (at(1) << 6) | at(2);
      if (c >= 0x800 && (c < 0xD800 || c > 0xDFFF)) {
        cp = c;
        len = 3;
      }
    } else if (b0 >= 0xF0 && b0 < 0xF5 && cont(1) && cont(2) && cont(3)) {
      const std::uint32_t c = ((b0 & 0x07u) << 18) | (at(1) << 12) | (at(2) << 6) | at(3);
      if (c >= 0x10000 && c <= 0x10FFFF) {
        cp = c;
        len = 4;
      }
    }
    d.cps.push_back(cp);
    d.offsets.push_back(i);
    i += len;
  }
  d.offsets.push_back(s.size());
  return d;
}

inline void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace detail::unicode

// Which pre-tokenisation regex a tokenizer.json uses.
enum class pretokenizer_pattern {
  gpt2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  llama3,  // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  qwen2,   // as llama3 with \p{N} (one digit per piece)
};

namespace detail::bpe {

inline const char* const gpt2_regex = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
inline const char* const llama3_regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
inline const char* const qwen2_regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

using detail::unicode::is_letter;
using detail::unicode::is_line_break;
using detail::unicode::is_number;
using detail::unicode::is_space;

// Length of the contraction 's 't 're 've 'm 'll 'd at i (0 if none).
inline std::size_t contraction(const std::vector<std::uint32_t>& c, std::size_t i, bool ignore_case) {
  if (c[i] != '\'' || i + 1 >= c.size()) return 0;
  auto lower = [&](std::size_t k) -> std::uint32_t {
    if (k >= c.size()) return 0;
    return ignore_case && c[k] >= 'A' && c[k] <= 'Z' ? c[k] + 32 : c[k];
  };
  const std::uint32_t a = lower(i + 1), b = lower(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  return 0;
}

inline bool other(std::uint32_t cp) { return !is_space(cp) && !is_letter(cp) && !is_number(cp); }

// Length of the run from i of code points satisfying f.
template <class F>
std::size_t run(const std::vector<std::uint32_t>& c, std::size_t i, F f) {
  std::size_t j = i;
  while (j < c.size() && f(c[j])) ++j;
  return j - i;
}

// \s+(?!\S) then \s+: a whitespace run stops one short of a following non-space, so that the
// space joins the next word (" word"), unless that leaves nothing.
inline std::size_t whitespace(const std::vector<std::uint32_t>& c, std::size_t i) {
  const std::size_t n = run(c, i, is_space);
  if (n == 0) return 0;
  if (i + n == c.size() || n == 1) return n;
  return n - 1;
}

// Length of the piece starting at i (always >= 1 for i < c.size()).
inline std::size_t match(pretokenizer_pattern p, const std::vector<std::uint32_t>& c, std::size_t i) {
  const std::size_t rest = c.size() - i;
  const bool space_first = c[i] == ' ' && rest > 1;
  if (p == pretokenizer_pattern::gpt2) {
    if (std::size_t n = contraction(c, i, false)) return n;
    const std::size_t s = space_first ? 1 : 0;
    if (std::size_t n = run(c, i + s, is_letter)) return s + n;
    if (std::size_t n = run(c, i + s, is_number)) return s + n;
    if (std::size_t n = run(c, i + s, other)) return s + n;
  } else {
    if (std::size_t n = contraction(c, i, true)) return n;
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!is_line_break(c[i]) && !is_letter(c[i]) && !is_number(c[i]) && rest > 1)
      if (std::size_t n = run(c, i + 1, is_letter)) return 1 + n;
    if (std::size_t n = run(c, i, is_letter)) return n;
    if (std::size_t n = run(c, i, is_number)) return std::min<std::size_t>(n, p == pretokenizer_pattern::llama3 ? 3 : 1);
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
    const std::size_t s = space_first ? 1 : 0;
    if (std::size_t n = run(c, i + s, other)) return s + n + run(c, i + s + n, is_line_break);
    // \s*[\r\n]+ : the whitespace run up to and including its last line break.
    const std::size_t ws = run(c, i, is_space);
    for (std::size_t k = ws; k > 0; --k)
      if (is_line_break(c[i + k - 1])) return k;
  }
  if (std::size_t n = whitespace(c, i)) return n;
  return 1;  // unreachable: every code point is a letter, a number, a space or other
}

// GPT-2 bytes_to_unicode: printable bytes map to themselves, the other 68 to U+0100.. in order.
inline const std::array<std::uint32_t, 256>& byte_to_code_point() {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    std::uint32_t next = 256;
    for (std::uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = printable ? b : next++;
    }
    return t;
  }();
  return table;
}

}  // namespace detail::bpe

class bpe_tokenizer {
 public:
  static bpe_tokenizer from_json(const nlohmann::json& root) {
    using detail::fail;
    bpe_tokenizer t;
    if (!root.is_object()) fail("tokenizer.json", "must be a JSON object");
    const auto model = root.find("model");
    if (model == root.end() || !model->is_object()) fail("model", "must be an object");
    const auto type = model->find("type");
    if (type != model->end() && !(type->is_string() && type->get<std::string>() == "BPE"))
      fail("model.type", "must be \"BPE\"");
    if (model->value("byte_fallback", false)) fail("model.byte_fallback", "is not supported (a SentencePiece-style BPE)");
    const auto vocab = model->find("vocab");
    if (vocab == model->end() || !vocab->is_object()) fail("model.vocab", "must be an object");
    for (auto it = vocab->begin(); it != vocab->end(); ++it) {
      if (!it->is_number_integer() || it->get<std::int64_t>() < 0 || it->get<std::int64_t>() > std::numeric_limits<std::int32_t>::max())
        fail("model.vocab." + it.key(), "must be a non-negative integer id");
      t.add_token(it.key(), it->get<std::int64_t>());
    }
    const auto merges = model->find("merges");
    if (merges == model->end() || !merges->is_array()) fail("model.merges", "must be an array");
    for (std::size_t r = 0; r < merges->size(); ++r) {
      const auto& m = (*merges)[r];
      const std::string field = "model.merges[" + std::to_string(r) + "]";
      std::string a, b;
      if (m.is_string()) {  // "a b" (older files)
        const std::string s = m.get<std::string>();
        const std::size_t space = s.find(' ');
        if (space == std::string::npos || space == 0 || space + 1 == s.size()) fail(field, "must be \"left right\"");
        a = s.substr(0, space);
        b = s.substr(space + 1);
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {  // ["a", "b"]
        a = m[0].get<std::string>();
        b = m[1].get<std::string>();
      } else {
        fail(field, "must be \"left right\" or [left, right]");
      }
      t.ranks_.emplace(a + ' ' + b, static_cast<int>(r));  // the first rank of a duplicate wins
    }
    if (const auto added = root.find("added_tokens"); added != root.end() && added->is_array())
      for (std::size_t i = 0; i < added->size(); ++i) {
        const auto& a = (*added)[i];
        const std::string field = "added_tokens[" + std::to_string(i) + "]";
        if (!a.is_object() || !a.contains("content") || !a["content"].is_string() || !a.contains("id") ||
            !a["id"].is_number_integer() || a["id"].get<std::int64_t>() < 0)
          fail(field, "must hold a string content and an integer id");
        const std::string content = a["content"].get<std::string>();
        if (content.empty()) fail(field + ".content", "must not be empty");
        t.added_.emplace_back(content, a["id"].get<std::int64_t>());
        t.add_token(content, a["id"].get<std::int64_t>());
      }
    // Longest first, so "<|a|>x" never loses to a prefix "<|a|>".
    std::stable_sort(t.added_.begin(), t.added_.end(),
                     [](const auto& x, const auto& y) { return x.first.size() > y.first.size(); });
    t.read_pre_tokenizer(root);
    if (const auto norm = root.find("normalizer"); norm != root.end() && !norm->is_null()) {
      const std::string ntype = norm->is_object() ? norm->value("type", "") : "";
      if (ntype != "NFC") fail("normalizer", "of type '" + ntype + "' is not supported (none or NFC)");
    }
    return t;
  }

  static bpe_tokenizer load(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("ropex: " + path.string() + " cannot be opened");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      detail::fail(path.string(), std::string("is not valid JSON: ") + e.what());
    }
    try {
      return from_json(j);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(path.string() + ": " + e.what());
    }
  }

  pretokenizer_pattern pattern() const { return pattern_; }
  std::size_t vocab_size() const { return token_of_id_.size(); }

  // The pre-tokenised pieces of `text` (added tokens are not split out here).
  std::vector<std::string> pre_tokenize(const std::string& text) const {
    std::vector<std::string> pieces;
    const std::string input = add_prefix_space_ && !text.empty() && text[0] != ' ' ? " " + text : text;
    const auto d = detail::unicode::decode_utf8(input);
    auto emit = [&](std::size_t a, std::size_t b) { pieces.push_back(input.substr(d.offsets[a], d.offsets[b] - d.offsets[a])); };
    // HF Digits(individual_digits) runs first: every digit is its own span, the text between
    // digits is pre-tokenised on its own.
    std::size_t begin = 0;
    auto split_span = [&](std::size_t a, std::size_t b) {
      std::vector<std::uint32_t> span(d.cps.begin() + static_cast<std::ptrdiff_t>(a), d.cps.begin() + static_cast<std::ptrdiff_t>(b));
      for (std::size_t i = 0; i < span.size();) {
        const std::size_t n = detail::bpe::match(pattern_, span, i);
        emit(a + i, a + i + n);
        i += n;
      }
    };
    for (std::size_t i = 0; i < d.cps.size(); ++i)
      if (individual_digits_ && detail::unicode::is_number(d.cps[i])) {
        split_span(begin, i);
        emit(i, i + 1);
        begin = i + 1;
      }
    split_span(begin, d.cps.size());
    return pieces;
  }

  std::vector<std::int64_t> encode(const std::string& text) const {
    std::vector<std::int64_t> ids;
    std::size_t pos = 0;
    while (pos < text.size()) {
      // The earliest added token (longest at a tie) cuts the text.
      std::size_t best = std::string::npos, which = 0;
      for (std::size_t a = 0; a < added_.size(); ++a) {
        const std::size_t at = text.find(added_[a].first, pos);
        if (at < best) {
          best = at;
          which = a;
        }
      }
      const std::size_t end = best == std::string::npos ? text.size() : best;
      if (end > pos) encode_ordinary(text.substr(pos, end - pos), ids);
      if (best == std::string::npos) break;
      ids.push_back(added_[which].second);
      pos = best + added_[which].first.size();
    }
    return ids;
  }

  std::string decode(const std::vector<std::int64_t>& ids) const {
    static const auto inverse = [] {
      std::unordered_map<std::uint32_t, unsigned char> m;
      const auto& t = detail::bpe::byte_to_code_point();
      for (int b = 0; b < 256; ++b) m[t[static_cast<std::size_t>(b)]] = static_cast<unsigned char>(b);
      return m;
    }();
    std::string out;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const std::int64_t id = ids[i];
      if (id < 0 || static_cast<std::size_t>(id) >= token_of_id_.size() || token_of_id_[static_cast<std::size_t>(id)].empty())
        detail::fail("ids[" + std::to_string(i) + "]", "is not in the vocabulary (" + std::to_string(id) + ")");
      const std::string& token = token_of_id_[static_cast<std::size_t>(id)];
      if (is_added(id)) {
        out += token;
        continue;
      }
      for (std::uint32_t cp : detail::unicode::decode_utf8(token).cps) {
        const auto it = inverse.find(cp);
        if (it == inverse.end()) {
          detail::unicode::append_utf8(out, cp);  // not a byte-level symbol: keep it
        } else {
          out += static_cast<char>(it->second);
        }
      }
    }
    return out;
  }

 private:
  void add_token(const std::string& token, std::int64_t id) {
    id_of_token_[token] = id;
    if (static_cast<std::size_t>(id) >= token_of_id_.size()) token_of_id_.resize(static_cast<std::size_t>(id) + 1);
    token_of_id_[static_cast<std::size_t>(id)] = token;
  }

  bool is_added(std::int64_t id) const {
    for (const auto& a : added_)
      if (a.second == id) return true;
    return false;
  }

  void read_pre_tokenizer(const nlohmann::json& root) {
    using detail::fail;
    const auto pre = root.find("pre_tokenizer");
    if (pre == root.end() || !pre->is_object()) fail("pre_tokenizer", "must be an object (ByteLevel or a Sequence)");
    std::vector<const nlohmann::json*> steps;
    if (pre->value("type", "") == "Sequence") {
      const auto list = pre->find("pretokenizers");
      if (list == pre->end() || !list->is_array()) fail("pre_tokenizer.pretokenizers", "must be an array");
      for (const auto& s : *list) steps.push_back(&s);
    } else {
      steps.push_back(&*pre);
    }
    bool byte_level = false, have_pattern = false;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const nlohmann::json& s = *steps[i];
      const std::string type = s.is_object() ? s.value("type", "") : "";
      const std::string field = "pre_tokenizer" + (steps.size() > 1 ? ".pretokenizers[" + std::to_string(i) + "]" : "");
      if (type == "Split") {
        const auto pattern = s.find("pattern");
        const std::string regex = pattern != s.end() && pattern->is_object() && pattern->contains("Regex") &&
                                          (*pattern)["Regex"].is_string()
                                      ? (*pattern)["Regex"].get<std::string>()
                                      : "";
        if (regex == detail::bpe::llama3_regex) pattern_ = pretokenizer_pattern::llama3;
        else if (regex == detail::bpe::qwen2_regex) pattern_ = pretokenizer_pattern::qwen2;
        else if (regex == detail::bpe::gpt2_regex) pattern_ = pretokenizer_pattern::gpt2;
        else fail(field + ".pattern.Regex", "is not one of the GPT-2, Llama 3 or Qwen2 patterns");
        if (s.value("behavior", "Isolated") != "Isolated") fail(field + ".behavior", "must be \"Isolated\"");
        have_pattern = true;
      } else if (type == "ByteLevel") {
        byte_level = true;
        add_prefix_space_ = s.value("add_prefix_space", false);
        if (s.value("use_regex", true)) {
          if (have_pattern) fail(field + ".use_regex", "must be false after a Split");
          pattern_ = pretokenizer_pattern::gpt2;
          have_pattern = true;
        }
      } else if (type == "Digits") {
        if (have_pattern) fail(field, "must come before the pattern");
        individual_digits_ = s.value("individual_digits", false);
        if (!individual_digits_) fail(field + ".individual_digits", "must be true");
      } else {
        fail(field + ".type", "'" + type + "' is not supported (Split, ByteLevel, Digits)");
      }
    }
    if (!byte_level) fail("pre_tokenizer", "has no ByteLevel step: not a byte-level BPE");
    if (!have_pattern) fail("pre_tokenizer", "has no splitting pattern");
  }

  void encode_ordinary(const std::string& text, std::vector<std::int64_t>& ids) const {
    const auto& table = detail::bpe::byte_to_code_point();
    for (const std::string& piece : pre_tokenize(text)) {
      std::vector<std::string> symbols;
      for (const char ch : piece) {
        std::string s;
        detail::unicode::append_utf8(s, table[static_cast<unsigned char>(ch)]);
        symbols.push_back(std::move(s));
      }
      merge(symbols);
      for (const std::string& s : symbols) {
        const auto it = id_of_token_.find(s);
        if (it == id_of_token_.end()) detail::fail("model.vocab", "has no symbol '" + s + "' (from the text \"" + piece + "\")");
        ids.push_back(it->second);
      }
    }
  }

  // Repeatedly merges every occurrence (left to right) of the adjacent pair of lowest rank.
  void merge(std::vector<std::string>& symbols) const {
    while (symbols.size() > 1) {
      int best = std::numeric_limits<int>::max();
      std::size_t at = 0;
      for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
        const auto it = ranks_.find(symbols[i] + ' ' + symbols[i + 1]);
        if (it != ranks_.end() && it->second < best) {
          best = it->second;
          at = i;
        }
      }
      if (best == std::numeric_limits<int>::max()) return;
      const std::string left = symbols[at], right = symbols[at + 1];
      std::vector<std::string> out;
      out.reserve(symbols.size());
      for (std::size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
          out.push_back(left + right);
          ++i;
        } else {
          out.push_back(symbols[i]);
        }
      }
      symbols = std::move(out);
    }
  }

  std::unordered_map<std::string, std::int64_t> id_of_token_;
  std::vector<std::string> token_of_id_;
  std::unordered_map<std::string, int> ranks_;
  std::vector<std::pair<std::string, std::int64_t>> added_;
  pretokenizer_pattern pattern_ = pretokenizer_pattern::gpt2;
  bool add_prefix_space_ = false, individual_digits_ = false;
};

// A plain token-id file (the input for models whose tokenizer is not byte-level BPE): integers
// separated by whitespace or commas; '#' starts a comment to the end of the line.
inline std::vector<std::int64_t> parse_token_ids(const std::string& text, const std::string& label = "token ids") {
  std::vector<std::int64_t> ids;
  std::size_t line = 1, i = 0;
  while (i < text.size()) {
    const char ch = text[i];
    if (ch == '\n') {
      ++line;
      ++i;
    } else if (ch == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (ch == ' ' || ch == '\t' || ch == '\r' || ch == ',') {
      ++i;
    } else if (ch >= '0' && ch <= '9') {
      std::int64_t v = 0;
      while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
        if (v > (std::numeric_limits<std::int64_t>::max() - 9) / 10)
          detail::fail(label + " line " + std::to_string(line), "holds a number too large");
        v = v * 10 + (text[i++] - '0');
      }
      ids.push_back(v);
    } else {
      detail::fail(label + " line " + std::to_string(line), std::string("holds '") + ch + "', not a token id");
    }
  }
  return ids;
}

inline std::vector<std::int64_t> load_token_ids(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("ropex: " + path.string() + " cannot be opened");
  std::ostringstream s;
  s << in.rdbuf();
  return parse_token_ids(s.str(), path.string());
}

}  // namespace ropex
