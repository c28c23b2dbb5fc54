// capnpc-kvrt: the Cap'n Proto compiler plugin that turns schema/*.capnp into
// kvrt's C++ value types and their codec, so that each message is declared
// once (in the schema) and everything else follows from that declaration.
//
// For every requested file F.capnp it writes, into the output directory:
//   F_types.hpp   the plain C++ types (structs, enums, variants), no Cap'n Proto
//   F_codec.hpp   encode()/decode<T>() of the file's messages, no Cap'n Proto
//   F_wire.hpp    the per-type write()/read() the codec of another file calls
//   F_codec.cpp   their definitions over the Cap'n Proto classes of F.capnp.h
//
// The mapping rules and annotations are documented in schema/annotations.capnp.
// The generated reader never throws: every pointer field is read under a
// ReadContext that names it, so a malformed message answers a typed Error
// naming the field ("AllocatorBatch.ops[3].append.rows"), and every enum
// and union discriminant is range-checked (schema/codec_support.hpp).
//
// Run by CMake (schema/CMakeLists.txt) as
//   capnp compile -o<this>:<out> --src-prefix=<schema dir> <files>
#include <capnp/schema.capnp.h>
#include <capnp/serialize.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace schema = capnp::schema;

// Annotation ids (schema/annotations.capnp).
constexpr uint64_t kTypeAnnotation = 0xecaea7a2fcdea507ull;
constexpr uint64_t kExistingAnnotation = 0xaf8e27c345f443f3ull;
constexpr uint64_t kHandwrittenAnnotation = 0xebbe05e73b7663b3ull;
constexpr uint64_t kMessageAnnotation = 0xed9b85049dbd67acull;
constexpr uint64_t kOptionalAnnotation = 0xe6f4207bc2e66a28ull;
constexpr uint64_t kInvalidAnnotation = 0xa47ea69405811b28ull;
constexpr uint64_t kIncludeAnnotation = 0xd1807fac4a3c1c98ull;
constexpr uint64_t kAnnotationsFileId = 0xa6c3cbf6bbfa9d06ull;

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

std::string str(capnp::Text::Reader t) { return std::string(t.begin(), t.end()); }

// camelCase -> snake_case ("promptRows" -> "prompt_rows", "kvRows" -> "kv_rows",
// "sha256" stays, "xxh3Bits128" -> "xxh3_bits128").
std::string snake(const std::string& camel) {
  std::string out;
  for (size_t i = 0; i < camel.size(); ++i) {
    const char c = camel[i];
    if (std::isupper(static_cast<unsigned char>(c))) {
      if (i > 0) out += '_';
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out;
}

// camelCase -> UPPER_SNAKE, as capnpc-c++ names enumerants and union tags.
std::string upper_snake(const std::string& camel) {
  std::string s = snake(camel);
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// camelCase -> CamelCase for accessor names (getFoo, setFoo, initFoo, hasFoo).
std::string title(const std::string& camel) {
  std::string s = camel;
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

const std::set<std::string>& cxx_keywords() {
  static const std::set<std::string> k = {
      "alignas", "alignof", "and", "asm", "auto", "bool", "break", "case", "catch", "char", "class", "const",
      "constexpr", "continue", "default", "delete", "do", "double", "else", "enum", "explicit", "export",
      "extern", "false", "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable",
      "namespace", "new", "noexcept", "not", "nullptr", "operator", "or", "private", "protected", "public",
      "register", "return", "short", "signed", "sizeof", "static", "struct", "switch", "template", "this",
      "throw", "true", "try", "typedef", "typename", "union", "unsigned", "using", "virtual", "void",
      "volatile", "while", "xor"};
  return k;
}

// The C++ identifier of a member or enumerant (a keyword gets a trailing _).
std::string ident(const std::string& camel) {
  std::string s = snake(camel);
  if (cxx_keywords().count(s)) s += '_';
  return s;
}

std::string file_stem(const std::string& filename) {
  std::string s = filename;
  const size_t slash = s.rfind('/');
  if (slash != std::string::npos) s = s.substr(slash + 1);
  const size_t dot = s.rfind(".capnp");
  if (dot != std::string::npos) s = s.substr(0, dot);
  return s;
}

std::string indent_comment(const std::string& doc, const std::string& indent) {
  if (doc.empty()) return "";
  std::string out;
  std::istringstream in(doc);
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += indent + (line.empty() ? "//" : "// " + line) + "\n";
  }
  return out;
}

// One line of a field's doc comment, for a trailing `// ...` after the member.
std::string trailing_comment(const std::string& doc) {
  if (doc.empty()) return "";
  std::string s = doc;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.find('\n') != std::string::npos) return "";  // long comments go above the member
  return "  // " + s;
}

class Generator {
 public:
  explicit Generator(schema::CodeGeneratorRequest::Reader request) : request_(request) {
    for (auto node : request.getNodes()) nodes_.emplace(node.getId(), node);
    for (auto info : request.getSourceInfo()) infos_.emplace(info.getId(), info);
  }

  void run() {
    for (auto file : request_.getRequestedFiles()) {
      if (file.getId() == kAnnotationsFileId) continue;
      generate_file(file);
    }
  }

 private:
  // ---- schema queries --------------------------------------------------------

  schema::Node::Reader node(uint64_t id) const {
    auto it = nodes_.find(id);
    if (it == nodes_.end()) fail("unknown node id " + std::to_string(id));
    return it->second;
  }

  static std::optional<schema::Value::Reader> annotation(capnp::List<schema::Annotation>::Reader list,
                                                         uint64_t id) {
    for (auto a : list)
      if (a.getId() == id) return a.getValue();
    return std::nullopt;
  }
  static bool has_annotation(capnp::List<schema::Annotation>::Reader list, uint64_t id) {
    return annotation(list, id).has_value();
  }
  static std::string text_annotation(capnp::List<schema::Annotation>::Reader list, uint64_t id) {
    auto v = annotation(list, id);
    return v ? str(v->getText()) : std::string();
  }

  std::string short_name(schema::Node::Reader n) const {
    const std::string display = str(n.getDisplayName());
    return display.substr(n.getDisplayNamePrefixLength());
  }

  std::string doc_of(uint64_t id) const {
    auto it = infos_.find(id);
    return it == infos_.end() ? std::string() : str(it->second.getDocComment());
  }
  std::string member_doc(uint64_t id, uint32_t index) const {
    auto it = infos_.find(id);
    if (it == infos_.end()) return "";
    auto members = it->second.getMembers();
    return index < members.size() ? str(members[index].getDocComment()) : std::string();
  }

  // The C++ type name of a struct or enum node.
  std::string cxx_name(schema::Node::Reader n) const {
    std::string existing = text_annotation(n.getAnnotations(), kExistingAnnotation);
    return existing.empty() ? short_name(n) : existing;
  }
  // The Cap'n Proto class of a node, fully qualified ("wire::AllocatorBatch").
  std::string wire_name(schema::Node::Reader n) const { return "wire::" + short_name(n); }

  bool is_existing(schema::Node::Reader n) const { return has_annotation(n.getAnnotations(), kExistingAnnotation); }
  bool is_handwritten(schema::Node::Reader n) const {
    return has_annotation(n.getAnnotations(), kHandwrittenAnnotation);
  }

  // A struct that is only an unnamed union of struct-typed members: a variant.
  bool is_variant(schema::Node::Reader n) const {
    if (!n.isStruct()) return false;
    auto s = n.getStruct();
    if (s.getDiscriminantCount() == 0 || s.getIsGroup()) return false;
    for (auto f : s.getFields())
      if (f.getDiscriminantValue() == schema::Field::NO_DISCRIMINANT) return false;
    return true;
  }

  // A union group { none :Void; value :T }: an optional.
  bool is_optional_group(schema::Node::Reader g) const {
    if (!g.isStruct() || !g.getStruct().getIsGroup()) return false;
    auto s = g.getStruct();
    auto fields = s.getFields();
    if (s.getDiscriminantCount() != 2 || fields.size() != 2) return false;
    auto first = ordered_union_fields(g)[0];
    return first.isSlot() && first.getSlot().getType().isVoid() && str(first.getName()) == "none";
  }

  std::vector<schema::Field::Reader> ordered_fields(schema::Node::Reader n) const {
    std::vector<schema::Field::Reader> out;
    for (auto f : n.getStruct().getFields()) out.push_back(f);
    std::sort(out.begin(), out.end(), [](auto a, auto b) { return a.getCodeOrder() < b.getCodeOrder(); });
    return out;
  }
  std::vector<schema::Field::Reader> ordered_union_fields(schema::Node::Reader n) const {
    std::vector<schema::Field::Reader> out;
    for (auto f : n.getStruct().getFields())
      if (f.getDiscriminantValue() != schema::Field::NO_DISCRIMINANT) out.push_back(f);
    std::sort(out.begin(), out.end(), [](auto a, auto b) { return a.getCodeOrder() < b.getCodeOrder(); });
    return out;
  }
  // The index of a field in its struct's field list (source info members).
  static uint32_t field_index(schema::Node::Reader n, schema::Field::Reader f) {
    uint32_t i = 0;
    for (auto g : n.getStruct().getFields()) {
      if (g.getCodeOrder() == f.getCodeOrder() && g.getDiscriminantValue() == f.getDiscriminantValue() &&
          str(g.getName()) == str(f.getName()))
        return i;
      ++i;
    }
    fail("field not found");
  }

  // ---- C++ types -----------------------------------------------------------------

  static bool is_integer(schema::Type::Reader t) {
    switch (t.which()) {
      case schema::Type::INT8:
      case schema::Type::INT16:
      case schema::Type::INT32:
      case schema::Type::INT64:
      case schema::Type::UINT8:
      case schema::Type::UINT16:
      case schema::Type::UINT32:
      case schema::Type::UINT64:
        return true;
      default:
        return false;
    }
  }
  static bool is_float(schema::Type::Reader t) { return t.isFloat32() || t.isFloat64(); }
  static std::string primitive(schema::Type::Reader t) {
    switch (t.which()) {
      case schema::Type::BOOL: return "bool";
      case schema::Type::INT8: return "int8_t";
      case schema::Type::INT16: return "int16_t";
      case schema::Type::INT32: return "int32_t";
      case schema::Type::INT64: return "int64_t";
      case schema::Type::UINT8: return "uint8_t";
      case schema::Type::UINT16: return "uint16_t";
      case schema::Type::UINT32: return "uint32_t";
      case schema::Type::UINT64: return "uint64_t";
      case schema::Type::FLOAT32: return "float";
      case schema::Type::FLOAT64: return "double";
      default: fail("not a primitive type");
    }
  }

  // The C++ type of a value of wire type t; `custom` is the field's $type.
  std::string cxx_type(schema::Type::Reader t, const std::string& custom) const {
    switch (t.which()) {
      case schema::Type::BOOL:
      case schema::Type::FLOAT32:
      case schema::Type::FLOAT64:
        return primitive(t);
      case schema::Type::TEXT:
        return "std::string";
      case schema::Type::DATA:
        return custom.empty() ? "std::vector<uint8_t>" : custom;
      case schema::Type::LIST:
        return "std::vector<" + cxx_type(t.getList().getElementType(), custom) + ">";
      case schema::Type::ENUM:
        return cxx_name(node(t.getEnum().getTypeId()));
      case schema::Type::STRUCT:
        return cxx_name(node(t.getStruct().getTypeId()));
      default:
        if (is_integer(t)) return custom.empty() ? primitive(t) : custom;
        fail("unsupported field type");
    }
  }

  // Whether equality of a value of this type must compare float bits.
  bool has_float_list(schema::Type::Reader t) const {
    return t.isList() && (is_float(t.getList().getElementType()) || has_float_list(t.getList().getElementType()));
  }

  std::string default_initializer(schema::Field::Reader f, const std::string& custom) const {
    auto slot = f.getSlot();
    auto t = slot.getType();
    auto v = slot.getDefaultValue();
    switch (t.which()) {
      case schema::Type::BOOL:
        return v.getBool() ? " = true" : " = false";
      case schema::Type::FLOAT32:
        return " = " + std::to_string(v.getFloat32()) + "f";
      case schema::Type::FLOAT64:
        return " = " + std::to_string(v.getFloat64());
      case schema::Type::ENUM: {
        auto e = node(t.getEnum().getTypeId());
        auto enumerants = e.getEnum().getEnumerants();
        const uint16_t which = v.getEnum();
        if (which >= enumerants.size()) fail("enum default out of range");
        return " = " + cxx_name(e) + "::" + ident(str(enumerants[which].getName()));
      }
      default:
        break;
    }
    if (is_integer(t)) {
      std::string value;
      switch (t.which()) {
        case schema::Type::INT8: value = std::to_string(v.getInt8()); break;
        case schema::Type::INT16: value = std::to_string(v.getInt16()); break;
        case schema::Type::INT32: value = std::to_string(v.getInt32()); break;
        case schema::Type::INT64: value = std::to_string(v.getInt64()); break;
        case schema::Type::UINT8: value = std::to_string(v.getUint8()); break;
        case schema::Type::UINT16: value = std::to_string(v.getUint16()); break;
        case schema::Type::UINT32: value = std::to_string(v.getUint32()); break;
        case schema::Type::UINT64: value = std::to_string(v.getUint64()); break;
        default: break;
      }
      if (!custom.empty()) return value == "0" ? "" : "{" + value + "}";
      return " = " + value;
    }
    return "";
  }

  // ---- ordering: every type a definition uses is defined before it ------------

  void collect_deps(schema::Type::Reader t, uint64_t file, std::vector<uint64_t>& out) const {
    if (t.isList()) return collect_deps(t.getList().getElementType(), file, out);
    uint64_t id = 0;
    if (t.isStruct()) id = t.getStruct().getTypeId();
    if (t.isEnum()) id = t.getEnum().getTypeId();
    if (id != 0 && node(id).getScopeId() == file) out.push_back(id);
  }
  std::vector<uint64_t> deps_of(schema::Node::Reader n, uint64_t file) const {
    std::vector<uint64_t> out;
    if (!n.isStruct()) return out;
    for (auto f : n.getStruct().getFields()) {
      if (f.isSlot()) {
        collect_deps(f.getSlot().getType(), file, out);
      } else {
        auto g = node(f.getGroup().getTypeId());
        for (uint64_t d : deps_of(g, file)) out.push_back(d);
      }
    }
    return out;
  }
  void visit(uint64_t id, uint64_t file, std::set<uint64_t>& done, std::set<uint64_t>& active,
             std::vector<uint64_t>& order) const {
    if (done.count(id)) return;
    if (active.count(id)) fail("types depend on each other in a cycle: " + short_name(node(id)));
    active.insert(id);
    for (uint64_t d : deps_of(node(id), file)) visit(d, file, done, active, order);
    active.erase(id);
    done.insert(id);
    order.push_back(id);
  }

  // ---- per file ----------------------------------------------------------------

  void generate_file(schema::CodeGeneratorRequest::RequestedFile::Reader file) {
    const std::string filename = str(file.getFilename());
    const std::string stem = file_stem(filename);
    auto file_node = node(file.getId());

    // Only files that import the annotations are kvrt message files (the
    // Envelope's own file, kvrt.capnp, is read by the codec by hand).
    bool annotated = false;
    for (auto imp : file.getImports()) annotated = annotated || imp.getId() == kAnnotationsFileId;
    if (!annotated) return;
    std::vector<std::string> imported_stems;
    for (auto imp : file.getImports()) {
      const std::string name = str(imp.getName());
      if (name.rfind("/capnp/", 0) == 0 || imp.getId() == kAnnotationsFileId) continue;
      imported_stems.push_back(file_stem(name));
    }
    std::vector<std::string> includes;
    if (auto inc = annotation(file_node.getAnnotations(), kIncludeAnnotation))
      for (auto t : inc->getList().template getAs<capnp::List<capnp::Text>>()) includes.push_back(str(t));

    std::vector<uint64_t> top;
    for (auto nested : file_node.getNestedNodes()) {
      auto n = node(nested.getId());
      if (n.isStruct() || n.isEnum()) top.push_back(n.getId());
      else if (!n.isConst() && !n.isAnnotation()) fail(short_name(n) + ": only structs, enums and constants are supported");
    }
    std::set<uint64_t> done, active;
    std::vector<uint64_t> order;
    for (uint64_t id : top) visit(id, file.getId(), done, active, order);

    types_.str("");
    wire_.str("");
    codec_h_.str("");
    codec_.str("");
    for (uint64_t id : order) {
      auto n = node(id);
      if (n.isEnum()) {
        emit_enum(n);
      } else if (is_variant(n)) {
        emit_variant(n);
      } else {
        emit_struct(n);
      }
    }

    write_types_header(stem, imported_stems, includes);
    write_wire_header(stem, imported_stems);
    write_codec_header(stem, imported_stems);
    write_codec_source(stem, filename);
  }

  // ---- enums -----------------------------------------------------------------

  void emit_enum(schema::Node::Reader n) {
    const std::string name = cxx_name(n);
    auto enumerants = n.getEnum().getEnumerants();
    if (is_existing(n)) {
      // Every enumerant must keep its value on both sides.
      for (uint32_t i = 0; i < enumerants.size(); ++i) {
        auto e = enumerants[i];
        if (has_annotation(e.getAnnotations(), kInvalidAnnotation)) continue;
        codec_ << "static_assert(uint16_t(" << wire_name(n) << "::" << upper_snake(str(e.getName()))
               << ") == uint16_t(" << name << "::" << ident(str(e.getName())) << "), \"" << short_name(n)
               << " enumerant values differ between the schema and C++\");\n";
      }
    } else {
      types_ << indent_comment(doc_of(n.getId()), "");
      types_ << "enum class " << name << " : " << (enumerants.size() > 256 ? "uint16_t" : "uint8_t") << " {\n";
      for (uint32_t i = 0; i < enumerants.size(); ++i) {
        auto e = enumerants[i];
        const std::string doc = member_doc(n.getId(), i);
        const std::string trailing = trailing_comment(doc);
        if (trailing.empty()) types_ << indent_comment(doc, "  ");
        types_ << "  " << ident(str(e.getName())) << " = " << i << "," << trailing << "\n";
      }
      types_ << "};\n";
      types_ << "inline constexpr uint8_t k" << name << "Max = " << enumerants.size() - 1 << ";\n\n";
    }
    // Which raw wire values decode: every enumerant but those marked invalid.
    wire_ << "bool valid_" << short_name(n) << "(uint16_t raw);\n";
    codec_ << "bool valid_" << short_name(n) << "(uint16_t raw) {\n  switch (raw) {\n";
    bool any = false;
    for (uint32_t i = 0; i < enumerants.size(); ++i) {
      if (has_annotation(enumerants[i].getAnnotations(), kInvalidAnnotation)) continue;
      codec_ << "    case " << i << ":\n";
      any = true;
    }
    if (any) codec_ << "      return true;\n";
    codec_ << "    default:\n      return false;\n  }\n}\n\n";
  }

  // ---- variants ----------------------------------------------------------------

  std::string alternative_type(schema::Field::Reader f) const {
    if (!f.isSlot() || !f.getSlot().getType().isStruct())
      fail(str(f.getName()) + ": a variant's members must be structs (declare an empty struct for a bare case)");
    return cxx_name(node(f.getSlot().getType().getStruct().getTypeId()));
  }

  void emit_variant(schema::Node::Reader n) {
    const std::string name = short_name(n);
    auto members = ordered_union_fields(n);
    std::set<std::string> seen;
    std::string alternatives;
    for (auto f : members) {
      const std::string t = alternative_type(f);
      if (!seen.insert(t).second) fail(name + ": two members of the same type " + t + " cannot form a variant");
      alternatives += (alternatives.empty() ? "" : ", ") + t;
    }
    types_ << indent_comment(doc_of(n.getId()), "");
    types_ << "using " << name << " = std::variant<" << alternatives << ">;\n\n";

    // Writer: one put per alternative (std::visit); reader: switch on which().
    wire_ << "void write(" << wire_name(n) << "::Builder b, const " << name << "& v);\n";
    wire_ << "Status read(ReadContext& ctx, " << wire_name(n) << "::Reader r, " << name << "& out);\n";
    codec_ << "void write(" << wire_name(n) << "::Builder b, const " << name << "& v) {\n";
    codec_ << "  switch (v.index()) {\n";
    for (size_t i = 0; i < members.size(); ++i) {
      const std::string member = str(members[i].getName());
      codec_ << "    case " << i << ":\n      write(b.init" << title(member) << "(), std::get<" << i
             << ">(v));\n      return;\n";
    }
    codec_ << "  }\n}\n";
    codec_ << "Status read(ReadContext& ctx, " << wire_name(n) << "::Reader r, " << name << "& out) {\n";
    codec_ << "  switch (r.which()) {\n";
    for (size_t i = 0; i < members.size(); ++i) {
      const std::string member = str(members[i].getName());
      codec_ << "    case " << wire_name(n) << "::" << upper_snake(member) << ":\n";
      codec_ << "      return read_member(ctx, \"" << snake(member) << "\", [&](ReadContext& c) { return read(c, r.get"
             << title(member) << "(), out.emplace<" << i << ">()); });\n";
    }
    codec_ << "  }\n";
    codec_ << "  return unknown_kind(ctx, \"" << name << "\", static_cast<unsigned>(r.which()));\n}\n\n";
  }

  // ---- structs -------------------------------------------------------------------

  struct Member {
    schema::Field::Reader field;
    std::string name;    // C++ member name
    std::string wire;    // capnp field name (camelCase)
    std::string type;    // C++ type
    std::string custom;  // $type
    std::string doc;
    std::string owner_wire{};  // the Cap'n Proto class of the struct the member is in
    enum Kind { slot, optional_pointer, optional_group } kind = slot;
    schema::Field::Reader group_value{};  // optional_group: the value member
  };

  std::vector<Member> members_of(schema::Node::Reader n) const {
    std::vector<Member> out;
    for (auto f : ordered_fields(n)) {
      Member m{f, ident(str(f.getName())), str(f.getName()), "", "", member_doc(n.getId(), field_index(n, f))};
      m.custom = text_annotation(f.getAnnotations(), kTypeAnnotation);
      m.owner_wire = wire_name(n);
      if (f.isGroup()) {
        auto g = node(f.getGroup().getTypeId());
        if (!is_optional_group(g))
          fail(short_name(n) + "." + m.wire + ": a group must be a union { none :Void; value :T }");
        m.kind = Member::optional_group;
        m.group_value = ordered_union_fields(g)[1];
        const std::string custom = text_annotation(m.group_value.getAnnotations(), kTypeAnnotation);
        m.custom = custom;
        m.type = "std::optional<" + cxx_type(m.group_value.getSlot().getType(), custom) + ">";
      } else {
        auto t = f.getSlot().getType();
        if (t.isVoid() || t.isAnyPointer() || t.isInterface())
          fail(short_name(n) + "." + m.wire + ": unsupported field type");
        m.type = cxx_type(t, m.custom);
        if (has_annotation(f.getAnnotations(), kOptionalAnnotation)) {
          if (!(t.isStruct() || t.isText() || t.isData()))
            fail(short_name(n) + "." + m.wire + ": $optional needs a struct, Text or Data field");
          m.kind = Member::optional_pointer;
          m.type = "std::optional<" + m.type + ">";
        }
      }
      out.push_back(m);
    }
    return out;
  }

  void emit_struct(schema::Node::Reader n) {
    if (n.getStruct().getDiscriminantCount() > 0)
      fail(short_name(n) + ": a struct with fields beside its union is not supported");
    const std::string name = cxx_name(n);
    const std::vector<Member> members = members_of(n);
    if (!is_existing(n)) {
      types_ << indent_comment(doc_of(n.getId()), "");
      types_ << "struct " << name << " {\n";
      bool floats = false;
      for (const Member& m : members) {
        const std::string trailing = trailing_comment(m.doc);
        if (trailing.empty()) types_ << indent_comment(m.doc, "  ");
        std::string init;
        if (m.kind == Member::slot) init = default_initializer(m.field, m.custom);
        if (m.kind != Member::optional_group && has_float_list(m.field.getSlot().getType())) floats = true;
        // Every member is initialised, so an aggregate initialiser that
        // names only the leading members leaves no member indeterminate (and
        // -Wmissing-field-initializers quiet).
        if (init.empty()) init = "{}";
        types_ << "  " << m.type << " " << m.name << init << ";" << trailing << "\n";
      }
      if (floats) {
        // Float payloads compare bit for bit: a NaN equals itself and +0 and
        // -0 differ (exactness is about bits).
        types_ << "  friend bool operator==(const " << name << "& a, const " << name << "& b) {\n    return true";
        for (const Member& m : members) types_ << "\n        && same_bits(a." << m.name << ", b." << m.name << ")";
        types_ << ";\n  }\n";
      } else {
        types_ << "  friend bool operator==(const " << name << "&, const " << name << "&) = default;\n";
      }
      types_ << "};\n\n";
    } else {
      codec_ << "static_assert(field_count<" << name << ">() == " << members.size() << ", \"" << name
             << ": the C++ type and schema/" << short_name(n) << " have different members\");\n";
    }

    wire_ << "void write(" << wire_name(n) << "::Builder b, const " << name << "& v);\n";
    wire_ << "Status read(ReadContext& ctx, " << wire_name(n) << "::Reader r, " << name << "& out);\n";
    if (has_annotation(n.getAnnotations(), kMessageAnnotation)) messages_.push_back(n.getId());
    if (is_handwritten(n)) return;

    codec_ << "void write(" << wire_name(n) << "::Builder b, const " << name << "& v) {\n";
    if (members.empty()) codec_ << "  (void)b;\n  (void)v;\n";
    for (const Member& m : members) emit_write_member(m);
    codec_ << "}\n";
    codec_ << "Status read(ReadContext& ctx, " << wire_name(n) << "::Reader r, " << name << "& out) {\n";
    if (members.empty()) codec_ << "  (void)ctx;\n  (void)r;\n  (void)out;\n";
    for (const Member& m : members) emit_read_member(m);
    codec_ << "  return Status::success();\n}\n\n";
  }

  // ---- writers ---------------------------------------------------------------------

  // The wire value of a scalar (integer, bool, float, enum) C++ expression.
  std::string scalar_out(schema::Type::Reader t, const std::string& custom, const std::string& expr) const {
    if (t.isEnum()) return "static_cast<" + wire_name(node(t.getEnum().getTypeId())) + ">(" + expr + ")";
    if (is_integer(t) && !custom.empty()) return expr + ".value";
    return expr;
  }

  void emit_write_member(const Member& m) {
    const std::string v = "v." + m.name;
    const std::string acc = title(m.wire);
    if (m.kind == Member::optional_group) {
      auto value = m.group_value;
      auto t = value.getSlot().getType();
      codec_ << "  if (" << v << ") b.get" << acc << "().set" << title(str(value.getName())) << "("
             << scalar_out(t, m.custom, "(*" + v + ")") << ");\n";
      codec_ << "  else b.get" << acc << "().setNone();\n";
      return;
    }
    auto t = m.field.getSlot().getType();
    if (m.kind == Member::optional_pointer) {
      codec_ << "  if (" << v << ") {\n";
      emit_write_value(t, m.custom, acc, "(*" + v + ")", "    ");
      codec_ << "  }\n";
      return;
    }
    emit_write_value(t, m.custom, acc, v, "  ");
  }

  void emit_write_value(schema::Type::Reader t, const std::string& custom, const std::string& acc,
                        const std::string& v, const std::string& in) {
    switch (t.which()) {
      case schema::Type::TEXT:
        codec_ << in << "b.set" << acc << "(text(" << v << "));\n";
        return;
      case schema::Type::DATA:
        if (custom.empty())
          codec_ << in << "b.set" << acc << "(capnp::Data::Reader(" << v << ".data(), " << v << ".size()));\n";
        else
          codec_ << in << "b.set" << acc << "(data(" << v << "));\n";
        return;
      case schema::Type::STRUCT:
        codec_ << in << "write(b.init" << acc << "(), " << v << ");\n";
        return;
      case schema::Type::LIST:
        codec_ << in << "{\n" << in << "  auto list = b.init" << acc << "(list_size(" << v << ".size()));\n";
        emit_write_list(t.getList().getElementType(), custom, "list", v, in + "  ", 0);
        codec_ << in << "}\n";
        return;
      default:
        codec_ << in << "b.set" << acc << "(" << scalar_out(t, custom, v) << ");\n";
    }
  }

  void emit_write_list(schema::Type::Reader e, const std::string& custom, const std::string& list,
                       const std::string& v, const std::string& in, int depth) {
    const std::string i = "i" + std::to_string(depth);
    codec_ << in << "for (unsigned " << i << " = 0; " << i << " < " << list << ".size(); ++" << i << ") {\n";
    const std::string item = v + "[" + i + "]";
    switch (e.which()) {
      case schema::Type::TEXT:
        codec_ << in << "  " << list << ".set(" << i << ", text(" << item << "));\n";
        break;
      case schema::Type::DATA:
        if (custom.empty())
          codec_ << in << "  " << list << ".set(" << i << ", capnp::Data::Reader(" << item << ".data(), " << item
                 << ".size()));\n";
        else
          codec_ << in << "  " << list << ".set(" << i << ", data(" << item << "));\n";
        break;
      case schema::Type::STRUCT:
        codec_ << in << "  write(" << list << "[" << i << "], " << item << ");\n";
        break;
      case schema::Type::LIST: {
        const std::string inner = "inner" + std::to_string(depth);
        codec_ << in << "  auto " << inner << " = " << list << ".init(" << i << ", list_size(" << item
               << ".size()));\n";
        emit_write_list(e.getList().getElementType(), custom, inner, item, in + "  ", depth + 1);
        break;
      }
      default:
        codec_ << in << "  " << list << ".set(" << i << ", " << scalar_out(e, custom, item) << ");\n";
    }
    codec_ << in << "}\n";
  }

  // ---- readers ---------------------------------------------------------------------

  // The C++ value of a scalar wire expression (an enum is checked separately).
  std::string scalar_in(schema::Type::Reader t, const std::string& custom, const std::string& expr) const {
    if (is_integer(t) && !custom.empty()) return custom + "{" + expr + "}";
    return expr;
  }

  std::string enum_check(schema::Type::Reader t, const std::string& field, const std::string& raw,
                         const std::string& out) const {
    auto e = node(t.getEnum().getTypeId());
    return "KVRT_TRY(read_enum(ctx, \"" + field + "\", static_cast<uint16_t>(" + raw + "), valid_" + short_name(e) +
           ", " + out + "));";
  }

  void emit_read_member(const Member& m) {
    const std::string field = snake(m.wire);
    const std::string acc = title(m.wire);
    const std::string out = "out." + m.name;
    if (m.kind == Member::optional_group) {
      auto value = m.group_value;
      auto t = value.getSlot().getType();
      const std::string group_wire = m.owner_wire + "::" + title(m.wire);
      codec_ << "  switch (r.get" << acc << "().which()) {\n";
      codec_ << "    case " << group_wire << "::NONE:\n      " << out << ".reset();\n      break;\n";
      codec_ << "    case " << group_wire << "::" << upper_snake(str(value.getName())) << ":\n";
      if (t.isEnum()) {
        codec_ << "      " << out << ".emplace();\n      "
               << enum_check(t, field, "r.get" + acc + "().get" + title(str(value.getName())) + "()", "*" + out)
               << "\n";
      } else {
        codec_ << "      " << out << " = " << scalar_in(t, m.custom, "r.get" + acc + "().get" + title(str(value.getName())) + "()")
               << ";\n";
      }
      codec_ << "      break;\n    default:\n      return unknown_member(ctx, \"" << field
             << "\", static_cast<unsigned>(r.get" << acc << "().which()));\n  }\n";
      return;
    }
    auto t = m.field.getSlot().getType();
    if (m.kind == Member::optional_pointer) {
      codec_ << "  ctx.at(\"" << field << "\");\n";
      codec_ << "  if (r.has" << acc << "()) {\n    " << out << ".emplace();\n";
      emit_read_value(t, m.custom, field, acc, "(*" + out + ")", "    ");
      codec_ << "  }\n";
      return;
    }
    emit_read_value(t, m.custom, field, acc, out, "  ");
  }

  void emit_read_value(schema::Type::Reader t, const std::string& custom, const std::string& field,
                       const std::string& acc, const std::string& out, const std::string& in) {
    const std::string get = "r.get" + acc + "()";
    switch (t.which()) {
      case schema::Type::TEXT:
        codec_ << in << "ctx.at(\"" << field << "\");\n" << in << out << " = to_string(" << get << ");\n";
        return;
      case schema::Type::DATA:
        codec_ << in << "ctx.at(\"" << field << "\");\n";
        if (custom.empty())
          codec_ << in << "{\n" << in << "  auto d = " << get << ";\n" << in << "  " << out
                 << ".assign(d.begin(), d.end());\n" << in << "}\n";
        else
          codec_ << in << "KVRT_TRY(read_data(ctx, \"" << field << "\", " << get << ", " << out << "));\n";
        return;
      case schema::Type::STRUCT:
        codec_ << in << "ctx.at(\"" << field << "\");\n";
        codec_ << in << "KVRT_TRY(read_member(ctx, \"" << field << "\", [&](ReadContext& c) { return read(c, " << get
               << ", " << out << "); }));\n";
        return;
      case schema::Type::ENUM:
        codec_ << in << enum_check(t, field, get, out) << "\n";
        return;
      case schema::Type::LIST:
        codec_ << in << "ctx.at(\"" << field << "\");\n" << in << "{\n" << in << "  auto list = " << get << ";\n";
        emit_read_list(t.getList().getElementType(), custom, field, "list", out, in + "  ", 0);
        codec_ << in << "}\n";
        return;
      default:
        codec_ << in << out << " = " << scalar_in(t, custom, get) << ";\n";
    }
  }

  void emit_read_list(schema::Type::Reader e, const std::string& custom, const std::string& field,
                      const std::string& list, const std::string& out, const std::string& in, int depth) {
    const std::string i = "i" + std::to_string(depth);
    if (e.isStruct()) codec_ << in << "KVRT_TRY(check_element_size(ctx, \"" << field << "\", " << list << "));\n";
    codec_ << in << out << ".clear();\n" << in << out << ".reserve(" << list << ".size());\n";
    codec_ << in << "for (unsigned " << i << " = 0; " << i << " < " << list << ".size(); ++" << i << ") {\n";
    switch (e.which()) {
      case schema::Type::TEXT:
        codec_ << in << "  " << out << ".push_back(to_string(" << list << "[" << i << "]));\n";
        break;
      case schema::Type::DATA:
        if (custom.empty()) {
          codec_ << in << "  auto d = " << list << "[" << i << "];\n";
          codec_ << in << "  " << out << ".emplace_back(d.begin(), d.end());\n";
        } else {
          codec_ << in << "  KVRT_TRY(read_data(ctx, \"" << field << "\", " << list << "[" << i << "], " << out
                 << ".emplace_back()));\n";
        }
        break;
      case schema::Type::STRUCT:
        codec_ << in << "  KVRT_TRY(read_element(ctx, \"" << field << "\", " << i
               << ", [&](ReadContext& c) { return read(c, " << list << "[" << i << "], " << out
               << ".emplace_back()); }));\n";
        break;
      case schema::Type::ENUM:
        codec_ << in << "  " << enum_check(e, field, list + "[" + i + "]", out + ".emplace_back()") << "\n";
        break;
      case schema::Type::LIST: {
        // A list of lists: each inner list is read under its own element
        // context, so its elements are named "field[i][j]".
        const std::string inner = "inner" + std::to_string(depth);
        const std::string inner_out = "inner_out" + std::to_string(depth);
        codec_ << in << "  KVRT_TRY(read_element(ctx, \"" << field << "\", " << i
               << ", [&](ReadContext& ctx) -> Status {\n";
        codec_ << in << "    auto " << inner << " = " << list << "[" << i << "];\n";
        codec_ << in << "    auto& " << inner_out << " = " << out << ".emplace_back();\n";
        emit_read_list(e.getList().getElementType(), custom, "", inner, inner_out, in + "    ", depth + 1);
        codec_ << in << "    return Status::success();\n" << in << "  }));\n";
        break;
      }
      default:
        codec_ << in << "  " << out << ".push_back(" << scalar_in(e, custom, list + "[" + i + "]") << ");\n";
    }
    codec_ << in << "}\n";
  }

  // ---- files ---------------------------------------------------------------------

  // Writes only when the content changed, so that a schema edit rebuilds
  // only what includes the files it changed (ninja's restat).
  static void write_file(const std::string& path, const std::string& content) {
    {
      std::ifstream in(path);
      if (in) {
        std::ostringstream old;
        old << in.rdbuf();
        if (old.str() == content) return;
      }
    }
    std::ofstream out(path);
    if (!out) fail("cannot write " + path);
    out << content;
  }

  static std::string banner(const std::string& filename) {
    return "// Generated by capnpc-kvrt from schema/" + filename +
           ". Do not edit: change the schema (schema/annotations.capnp says how).\n";
  }

  void write_types_header(const std::string& stem, const std::vector<std::string>& imports,
                          const std::vector<std::string>& includes) {
    std::ostringstream h;
    h << "#pragma once\n" << banner(stem + ".capnp");
    h << "#include <cstdint>\n#include <optional>\n#include <string>\n#include <variant>\n#include <vector>\n\n";
    h << "#include \"schema/float_bits.hpp\"\n";
    for (const auto& i : imports) h << "#include \"schema/" << i << "_types.hpp\"\n";
    for (const auto& i : includes) h << "#include \"" << i << "\"\n";
    h << "\nnamespace kvrt {\n\n" << types_.str() << "}  // namespace kvrt\n";
    write_file(stem + "_types.hpp", h.str());
  }

  void write_wire_header(const std::string& stem, const std::vector<std::string>& imports) {
    std::ostringstream h;
    h << "#pragma once\n" << banner(stem + ".capnp");
    h << "// Internal to the codec: the per-type writers and readers of this file's\n"
         "// types, for the codec of files that import it.\n";
    h << "#include \"schema/" << stem << ".capnp.h\"\n#include \"schema/" << stem << "_types.hpp\"\n";
    h << "#include \"schema/codec_support.hpp\"\n";
    for (const auto& i : imports) h << "#include \"schema/" << i << "_wire.hpp\"\n";
    h << "\nnamespace kvrt::codec::detail {\n\n" << wire_.str() << "\n}  // namespace kvrt::codec::detail\n";
    write_file(stem + "_wire.hpp", h.str());
  }

  void write_codec_header(const std::string& stem, const std::vector<std::string>& imports) {
    std::ostringstream h;
    h << "#pragma once\n" << banner(stem + ".capnp");
    h << "// encode() and decode<T>() of the messages this file declares\n"
         "// (schema/codec.hpp has the contract). No Cap'n Proto here.\n";
    h << "#include \"schema/codec.hpp\"\n#include \"schema/" << stem << "_types.hpp\"\n";
    (void)imports;
    h << "\nnamespace kvrt::codec {\n\n";
    for (uint64_t id : messages_) {
      auto n = node(id);
      const std::string name = cxx_name(n);
      h << "std::vector<uint8_t> encode(const " << name << "& value);\n";
      h << "template <>\nResult<" << name << "> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits);\n";
    }
    h << "\n}  // namespace kvrt::codec\n";
    write_file(stem + "_codec.hpp", h.str());
  }

  void write_codec_source(const std::string& stem, const std::string& filename) {
    std::ostringstream c;
    c << banner(filename);
    c << "#include \"schema/" << stem << "_codec.hpp\"\n#include \"schema/" << stem << "_wire.hpp\"\n";
    c << "#include \"schema/field_count.hpp\"\n\n";
    c << "namespace kvrt::codec {\nnamespace detail {\n\n";
    c << codec_.str();
    c << "}  // namespace detail\n\n";
    for (uint64_t id : messages_) {
      auto n = node(id);
      const std::string name = cxx_name(n);
      c << "std::vector<uint8_t> encode(const " << name << "& value) {\n";
      c << "  return detail::encode_envelope<" << wire_name(n) << ">([&](" << wire_name(n)
        << "::Builder body) { detail::write(body, value); });\n}\n";
      c << "template <>\nResult<" << name << "> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {\n";
      c << "  return detail::decode_envelope<" << name << ", " << wire_name(n) << ">(\n      bytes, limits, \""
        << short_name(n) << "\", [](detail::ReadContext& ctx, " << wire_name(n) << "::Reader body, " << name
        << "& out) { return detail::read(ctx, body, out); });\n}\n";
    }
    c << "\nnamespace detail {\n// The names of this file's messages, for \"expected a X, got a Y\".\n";
    c << "const MessageNames " << stem << "_message_names{{\n";
    for (uint64_t id : messages_) {
      auto n = node(id);
      c << "    {capnp::typeId<" << wire_name(n) << ">(), \"" << short_name(n) << "\"},\n";
    }
    c << "}};\n}  // namespace detail\n\n}  // namespace kvrt::codec\n";
    write_file(stem + "_codec.cpp", c.str());
    messages_.clear();
  }

  schema::CodeGeneratorRequest::Reader request_;
  std::map<uint64_t, schema::Node::Reader> nodes_;
  std::map<uint64_t, schema::Node::SourceInfo::Reader> infos_;
  std::ostringstream types_, wire_, codec_h_, codec_;
  std::vector<uint64_t> messages_;
};

}  // namespace

int main() {
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = uint64_t{1} << 30;
    capnp::StreamFdMessageReader reader(STDIN_FILENO, options);
    Generator(reader.getRoot<schema::CodeGeneratorRequest>()).run();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "capnpc-kvrt: " << e.what() << "\n";
    return 1;
  } catch (const kj::Exception& e) {
    std::cerr << "capnpc-kvrt: " << e.getDescription().cStr() << "\n";
    return 1;
  }
}
