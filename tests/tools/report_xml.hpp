#pragma once
// A minimal XML well-formedness checker for the [report] tests: enough of
// XML 1.0 to reject what an SVG writer can get wrong (unbalanced or crossed
// tags, a raw '<' or a bare '&' in text or attributes, an unknown entity,
// duplicate attributes, malformed UTF-8, control characters, content after the
// root). It builds an element tree with entities decoded, so tests can read
// the plotted values back. No DTDs, CDATA or namespaces: the writer emits none.
#include <cctype>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvrt::report_test {

struct XmlElement {
  std::string name;
  std::map<std::string, std::string> attributes;  // decoded values
  std::string text;                               // decoded character data, concatenated
  std::vector<XmlElement> children;

  std::string attr(const std::string& key) const {
    auto it = attributes.find(key);
    return it == attributes.end() ? std::string() : it->second;
  }
  double number(const std::string& key) const { return std::stod(attributes.at(key)); }
  // Every descendant (depth first) with this element name and, if given, class.
  void collect(std::string_view element, std::string_view css_class, std::vector<const XmlElement*>& out) const {
    for (const auto& c : children) {
      if (c.name == element && (css_class.empty() || c.attr("class") == css_class)) out.push_back(&c);
      c.collect(element, css_class, out);
    }
  }
  std::vector<const XmlElement*> all(std::string_view element, std::string_view css_class = {}) const {
    std::vector<const XmlElement*> out;
    collect(element, css_class, out);
    return out;
  }
};

struct XmlDocument {
  std::optional<XmlElement> root;  // set when well formed
  std::string error;               // why not, with a byte offset
};

class XmlChecker {
 public:
  explicit XmlChecker(std::string_view doc) : s_(doc) {}

  XmlDocument parse() {
    XmlDocument out;
    if (auto e = check_characters(); !e.empty()) return fail(out, e);
    if (s_.substr(0, 5) == "<?xml") {
      const size_t end = s_.find("?>");
      if (end == std::string_view::npos) return fail(out, "unterminated XML declaration");
      i_ = end + 2;
    }
    skip_space();
    XmlElement root;
    if (!element(root)) return fail(out, error_);
    skip_space();
    if (i_ != s_.size()) return fail(out, "content after the root element");
    out.root = std::move(root);
    return out;
  }

 private:
  XmlDocument& fail(XmlDocument& d, const std::string& why) {
    d.error = why + " at byte " + std::to_string(i_);
    return d;
  }
  bool error(const std::string& why) {
    if (error_.empty()) error_ = why;
    return false;
  }

  // Well-formed UTF-8 (Unicode table 3-7) and only the C0 controls XML allows.
  std::string check_characters() {
    for (size_t i = 0; i < s_.size();) {
      const auto b = static_cast<uint8_t>(s_[i]);
      if (b < 0x20 && b != '\t' && b != '\n' && b != '\r') return "control character " + std::to_string(b);
      if (b < 0x80) {
        ++i;
        continue;
      }
      size_t len = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
      if (len == 0 || i + len > s_.size()) return "malformed UTF-8 lead byte";
      const auto b1 = static_cast<uint8_t>(s_[i + 1]);
      const uint8_t lo = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80;
      const uint8_t hi = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
      if (b1 < lo || b1 > hi) return "malformed UTF-8 second byte";
      for (size_t k = 2; k < len; ++k)
        if ((static_cast<uint8_t>(s_[i + k]) & 0xC0) != 0x80) return "malformed UTF-8 continuation";
      i += len;
    }
    return {};
  }

  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  static bool name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':' || c == '.';
  }
  std::string name() {
    const size_t start = i_;
    while (i_ < s_.size() && name_char(s_[i_])) ++i_;
    return std::string(s_.substr(start, i_ - start));
  }

  // Decodes character data up to one of `stops`; a raw '<' is an error.
  bool chars(std::string_view stops, std::string& out) {
    while (i_ < s_.size() && stops.find(s_[i_]) == std::string_view::npos) {
      const char c = s_[i_];
      if (c == '<') return error("raw '<' in character data");
      if (c != '&') {
        out.push_back(c);
        ++i_;
        continue;
      }
      const size_t semi = s_.find(';', i_);
      if (semi == std::string_view::npos) return error("bare '&'");
      const std::string_view entity = s_.substr(i_ + 1, semi - i_ - 1);
      static const std::map<std::string_view, char> kNamed = {
          {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
      if (auto it = kNamed.find(entity); it != kNamed.end()) {
        out.push_back(it->second);
      } else if (entity.size() > 1 && entity[0] == '#') {
        out += "?";  // numeric reference: accepted, not decoded (the writer emits none)
      } else {
        return error("unknown entity &" + std::string(entity) + ";");
      }
      i_ = semi + 1;
    }
    return true;
  }

  bool element(XmlElement& e) {
    if (i_ >= s_.size() || s_[i_] != '<') return error("expected '<'");
    ++i_;
    e.name = name();
    if (e.name.empty()) return error("empty element name");
    for (;;) {
      const size_t before = i_;
      skip_space();
      if (i_ >= s_.size()) return error("unterminated start tag");
      if (s_.substr(i_, 2) == "/>") {
        i_ += 2;
        return true;
      }
      if (s_[i_] == '>') {
        ++i_;
        break;
      }
      if (i_ == before) return error("attributes must be separated by space");
      std::string key = name();
      if (key.empty() || i_ >= s_.size() || s_[i_] != '=') return error("malformed attribute");
      ++i_;
      if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'')) return error("unquoted attribute value");
      const char quote = s_[i_++];
      std::string value;
      if (!chars(std::string_view(&quote, 1), value) || i_ >= s_.size()) return error("unterminated attribute");
      ++i_;
      if (!e.attributes.emplace(std::move(key), std::move(value)).second) return error("duplicate attribute");
    }
    for (;;) {  // content
      if (!chars("<", e.text)) return false;
      if (i_ >= s_.size()) return error("unclosed element <" + e.name + ">");
      if (s_.substr(i_, 4) == "<!--") {
        const size_t end = s_.find("-->", i_ + 4);
        if (end == std::string_view::npos) return error("unterminated comment");
        i_ = end + 3;
      } else if (s_.substr(i_, 2) == "</") {
        i_ += 2;
        if (name() != e.name) return error("end tag does not match <" + e.name + ">");
        skip_space();
        if (i_ >= s_.size() || s_[i_] != '>') return error("malformed end tag");
        ++i_;
        return true;
      } else {
        XmlElement child;
        if (!element(child)) return false;
        e.children.push_back(std::move(child));
      }
    }
  }

  std::string_view s_;
  size_t i_ = 0;
  std::string error_;
};

inline XmlDocument parse_xml(std::string_view doc) { return XmlChecker(doc).parse(); }

}  // namespace kvrt::report_test
