// Lexer and recursive-descent parser of the Jinja subset (jinja.h).
// Lexing applies whitespace control as Hugging Face renders chat templates:
// `{%-`/`-%}` strip all whitespace on that side; otherwise trim_blocks drops
// the first newline after a block or comment tag and lstrip_blocks drops the
// spaces and tabs before one at the start of a line. Operator precedence follows
// Jinja2: inline if < or < and < not < comparisons/in < ~ < +,- < *,/,//,% <
// ** < filters and tests < unary sign < postfix (attribute, item, call); so
// -3 | abs is abs(-3) and -2 ** 2 is 4.
// Templates come from model files and --chat-template, so nesting is bounded
// (kMaxNesting): the parser's recursion (brackets, operators, nested blocks)
// and the height of every expression tree, which loops build without
// recursing (a.b.c..., x | f | g ..., 1 + 1 + ...) but the evaluator and the
// tree's destructor walk recursively.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>

#include "server/jinja/jinja.h"
#include "server/jinja/jinja_ast.h"
#include "tokenizer/unicode.h"
#include "util/check.h"

namespace parallm::jinja {
namespace {

enum class Tok { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  Tok kind;
  std::string s;
  int64_t i = 0;
  double f = 0;
  int line = 1;
};

constexpr int kMaxNesting = 256;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  std::vector<Token> run() {
    size_t p = 0;
    const size_t n = src_.size();
    while (p < n) {
      size_t q = p;
      while (q < n &&
             !(src_[q] == '{' && q + 1 < n && (src_[q + 1] == '{' || src_[q + 1] == '%' || src_[q + 1] == '#')))
        ++q;
      std::string text(src_.substr(p, q - p));
      if (q >= n) {
        emit_text(std::move(text));
        break;
      }
      const char kind = src_[q + 1];
      const char mod = q + 2 < n ? src_[q + 2] : '\0';
      if (mod == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if ((kind == '%' || kind == '#') && mod != '+') {
        // lstrip_blocks: spaces/tabs between the line start and the tag.
        size_t k = text.size();
        while (k > 0 && (text[k - 1] == ' ' || text[k - 1] == '\t')) --k;
        const bool line_start =
            (k > 0 && text[k - 1] == '\n') || (k == 0 && p == 0) || (k == 0 && p > 0 && src_[p - 1] == '\n');
        if (line_start) text.resize(k);
      }
      emit_text(std::move(text));
      line_ += count_lines(p, q);
      p = q + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
      bool strip_after = false;
      if (kind == '#') {
        const size_t e = src_.find("#}", p);
        if (e == std::string_view::npos) fail("unclosed comment");
        strip_after = e > p && src_[e - 1] == '-';
        line_ += count_lines(p, e);
        p = e + 2;
      } else {
        push(kind == '{' ? Tok::kVarBegin : Tok::kBlockBegin, "");
        p = lex_tag(p, kind == '{' ? '}' : '%', &strip_after);
        push(kind == '{' ? Tok::kVarEnd : Tok::kBlockEnd, "");
      }
      if (strip_after) {
        while (p < n && is_space(src_[p])) {
          if (src_[p] == '\n') ++line_;
          ++p;
        }
      } else if (kind != '{') {  // trim_blocks
        if (p < n && src_[p] == '\n') {
          ++p;
          ++line_;
        } else if (p + 1 < n && src_[p] == '\r' && src_[p + 1] == '\n') {
          p += 2;
          ++line_;
        }
      }
    }
    push(Tok::kEof, "");
    return std::move(toks_);
  }

 private:
  [[noreturn]] void fail(const std::string& m) const {
    throw InputError("chat template syntax error at line " + std::to_string(line_) + ": " + m);
  }
  int count_lines(size_t a, size_t b) const {
    int c = 0;
    for (size_t i = a; i < b && i < src_.size(); ++i) c += src_[i] == '\n';
    return c;
  }
  void push(Tok k, std::string s) { toks_.push_back(Token{k, std::move(s), 0, 0, line_}); }
  void emit_text(std::string t) {
    if (!t.empty()) push(Tok::kText, std::move(t));
  }

  // Tokens of one tag up to its closing `}}` / `%}`; returns the position after it.
  size_t lex_tag(size_t p, char close, bool* strip_after) {
    const size_t n = src_.size();
    while (true) {
      while (p < n && is_space(src_[p])) {
        if (src_[p] == '\n') ++line_;
        ++p;
      }
      if (p >= n) fail("unclosed tag");
      const char c = src_[p];
      if (c == '-' && p + 2 < n && src_[p + 1] == close && src_[p + 2] == '}') {
        *strip_after = true;
        return p + 3;
      }
      if (c == close && p + 1 < n && src_[p + 1] == '}') return p + 2;
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = p;
        while (e < n && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        push(Tok::kName, std::string(src_.substr(p, e - p)));
        p = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t e = p;
        while (e < n && std::isdigit(static_cast<unsigned char>(src_[e]))) ++e;
        const bool is_float = e + 1 < n && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]));
        if (is_float) {
          ++e;
          while (e < n && std::isdigit(static_cast<unsigned char>(src_[e]))) ++e;
        }
        std::string num(src_.substr(p, e - p));
        Token t{is_float ? Tok::kFloat : Tok::kInt, num, 0, 0, line_};
        if (is_float)
          t.f = std::strtod(num.c_str(), nullptr);
        else
          t.i = std::strtoll(num.c_str(), nullptr, 10);
        toks_.push_back(t);
        p = e;
      } else if (c == '\'' || c == '"') {
        p = lex_string(p);
      } else {
        static const char* two[] = {"==", "!=", "<=", ">=", "//", "**"};
        std::string op(1, c);
        for (const char* t : two) {
          if (src_.substr(p, 2) == t) op = t;
        }
        if (std::string("+-*/%~()[]{},.:|=<>!").find(c) == std::string::npos)
          fail(std::string("unexpected character '") + c + "'");
        push(Tok::kOp, op);
        p += op.size();
      }
    }
  }

  size_t lex_string(size_t p) {
    const char quote = src_[p++];
    std::string out;
    while (true) {
      if (p >= src_.size()) fail("unterminated string");
      char c = src_[p++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c == '\\' && p < src_.size()) {
        char e = src_[p++];
        switch (e) {
          case 'n':
            out += '\n';
            break;
          case 't':
            out += '\t';
            break;
          case 'r':
            out += '\r';
            break;
          case '\\':
            out += '\\';
            break;
          case '\'':
            out += '\'';
            break;
          case '"':
            out += '"';
            break;
          case 'x':
          case 'u':
          case 'U': {  // \xHH, \uHHHH, \UHHHHHHHH as Python reads them
            const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            size_t k = 0;
            for (; k < digits && p + k < src_.size() && std::isxdigit(static_cast<unsigned char>(src_[p + k])); ++k) {
              const char h = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[p + k])));
              cp = cp * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : h - 'a' + 10);
            }
            if (k != digits || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail("bad escape in a string");
            p += digits;
            utf8_append(out, cp);
            break;
          }
          default:
            out += '\\';
            out += e;
            break;
        }
        continue;
      }
      out += c;
    }
    push(Tok::kString, std::move(out));
    return p;
  }

  std::string_view src_;
  std::vector<Token> toks_;
  int line_ = 1;
};

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  std::unique_ptr<Template> run() {
    auto tpl = std::make_unique<Template>();
    std::string stop;
    tpl->body = parse_body({}, &stop);
    if (!stop.empty()) fail("unexpected '" + stop + "'");
    return tpl;
  }

 private:
  [[noreturn]] void fail(const std::string& m) const {
    throw InputError("chat template syntax error at line " + std::to_string(cur().line) + ": " + m);
  }
  const Token& cur() const { return t_[std::min(pos_, t_.size() - 1)]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(pos_ + k, t_.size() - 1)]; }
  bool is_op(const char* op) const { return cur().kind == Tok::kOp && cur().s == op; }
  bool is_name(const char* name) const { return cur().kind == Tok::kName && cur().s == name; }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(std::string("expected '") + op + "'");
    ++pos_;
  }
  void expect_name(const char* name) {
    if (!is_name(name)) fail(std::string("expected '") + name + "'");
    ++pos_;
  }
  std::string take_name() {
    if (cur().kind != Tok::kName) fail("expected a name");
    return t_[pos_++].s;
  }
  void expect(Tok k, const char* what) {
    if (cur().kind != k) fail(std::string("expected ") + what);
    ++pos_;
  }

  // Statements until a block tag whose keyword is in `stops` (consumed, name in *stop).
  Body parse_body(const std::vector<std::string>& stops, std::string* stop) {
    Body body;
    while (true) {
      const Token& tk = cur();
      if (tk.kind == Tok::kEof) {
        if (!stops.empty()) fail("missing '" + stops.back() + "'");
        stop->clear();
        return body;
      }
      if (tk.kind == Tok::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kText;
        s->text = tk.s;
        body.push_back(std::move(s));
        ++pos_;
      } else if (tk.kind == Tok::kVarBegin) {
        ++pos_;
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kOutput;
        s->expr = parse_expr();
        expect(Tok::kVarEnd, "'}}'");
        body.push_back(std::move(s));
      } else if (tk.kind == Tok::kBlockBegin) {
        ++pos_;
        const std::string kw = take_name();
        for (const auto& s : stops) {
          if (kw == s) {
            *stop = kw;
            return body;
          }
        }
        if (auto s = parse_statement(kw)) body.push_back(std::move(s));
      } else {
        fail("unexpected token");
      }
    }
  }

  std::unique_ptr<Stmt> parse_statement(const std::string& kw) {
    DepthGuard g(this);  // a block's body is parsed inside it
    auto s = std::make_unique<Stmt>();
    if (kw == "if") {
      s->kind = StmtKind::kIf;
      ExprPtr cond = parse_expr();
      expect(Tok::kBlockEnd, "'%}'");
      while (true) {
        std::string stop;
        Body b = parse_body({"elif", "else", "endif"}, &stop);
        s->branches.emplace_back(std::move(cond), std::move(b));
        if (stop == "elif") {
          cond = parse_expr();
          expect(Tok::kBlockEnd, "'%}'");
          continue;
        }
        expect(Tok::kBlockEnd, "'%}'");
        if (stop == "else") {
          s->else_body = parse_body({"endif"}, &stop);
          expect(Tok::kBlockEnd, "'%}'");
        }
        break;
      }
    } else if (kw == "for") {
      s->kind = StmtKind::kFor;
      s->targets.push_back(take_name());
      while (is_op(",")) {
        ++pos_;
        s->targets.push_back(take_name());
      }
      expect_name("in");
      s->expr = parse_expr(/*allow_cond=*/false);
      if (is_name("if")) {
        ++pos_;
        s->filter = parse_or();
      }
      expect(Tok::kBlockEnd, "'%}'");
      std::string stop;
      ++loop_depth_;
      s->body = parse_body({"else", "endfor"}, &stop);
      --loop_depth_;
      expect(Tok::kBlockEnd, "'%}'");
      if (stop == "else") {
        s->else_body = parse_body({"endfor"}, &stop);
        expect(Tok::kBlockEnd, "'%}'");
      }
    } else if (kw == "set") {
      s->targets.push_back(take_name());
      if (is_op(".")) {
        ++pos_;
        s->attr = take_name();
      }
      if (is_op("=")) {
        ++pos_;
        s->kind = StmtKind::kSet;
        s->expr = parse_expr();
        expect(Tok::kBlockEnd, "'%}'");
      } else {
        s->kind = StmtKind::kSetBlock;
        expect(Tok::kBlockEnd, "'%}'");
        std::string stop;
        s->body = parse_body({"endset"}, &stop);
        expect(Tok::kBlockEnd, "'%}'");
      }
    } else if (kw == "break" || kw == "continue") {
      if (loop_depth_ == 0) fail("'" + kw + "' outside a for loop");
      s->kind = kw == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      expect(Tok::kBlockEnd, "'%}'");
    } else if (kw == "macro") {
      s->kind = StmtKind::kMacro;
      s->text = take_name();
      expect_op("(");
      while (!is_op(")")) {
        std::string param = take_name();
        if (is_op("=")) {
          ++pos_;
          s->defaults.emplace_back(param, parse_expr());
        } else if (!s->defaults.empty()) {
          fail("macro parameter '" + param + "' without a default after one with a default");
        }
        s->targets.push_back(std::move(param));
        if (!is_op(",")) break;
        ++pos_;
      }
      expect_op(")");
      expect(Tok::kBlockEnd, "'%}'");
      std::string stop;
      const int outer_loops = loop_depth_;
      loop_depth_ = 0;  // a loop around the definition is not around the body
      s->body = parse_body({"endmacro"}, &stop);
      loop_depth_ = outer_loops;
      expect(Tok::kBlockEnd, "'%}'");
    } else if (kw == "filter") {
      s->kind = StmtKind::kFilterBlock;
      auto f = node(ExprKind::kFilter, take_name());
      f->args.push_back(nullptr);  // the body's text goes here
      if (is_op("(")) parse_args(f.get());
      s->expr = parse_filters(sealed(std::move(f)));
      expect(Tok::kBlockEnd, "'%}'");
      std::string stop;
      s->body = parse_body({"endfilter"}, &stop);
      expect(Tok::kBlockEnd, "'%}'");
    } else if (kw == "generation" || kw == "endgeneration") {
      expect(Tok::kBlockEnd, "'%}'");  // HF assistant-mask markers: no output of their own
      return nullptr;
    } else {
      fail("unsupported statement '" + kw + "'");
    }
    return s;
  }

  static ExprPtr node(ExprKind k, std::string name = {}) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->name = std::move(name);
    return e;
  }
  ExprPtr binary(std::string op, ExprPtr a, ExprPtr b) {
    auto e = node(ExprKind::kBinary, std::move(op));
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return sealed(std::move(e));
  }

  [[noreturn]] void too_deep() const {
    fail("nested deeper than the limit of " + std::to_string(kMaxNesting) + " levels");
  }

  // Every node is sealed once its children are in place: its height is one
  // more than its highest child's, and past kMaxNesting the template is refused.
  ExprPtr sealed(ExprPtr e) const {
    int below = 0;
    bool pure = e->kind != ExprKind::kCall;
    for (const auto& a : e->args) {
      if (a) below = std::max(below, a->height), pure = pure && a->pure;
    }
    for (const auto& [k, a] : e->kwargs) below = std::max(below, a->height), pure = pure && a->pure;
    e->height = below + 1;
    e->pure = pure;
    if (e->height > kMaxNesting) too_deep();
    return e;
  }

  struct DepthGuard {
    Parser* p;
    explicit DepthGuard(Parser* parser) : p(parser) {
      if (++p->depth_ > kMaxNesting) p->too_deep();
    }
    ~DepthGuard() { --p->depth_; }
  };

  ExprPtr parse_expr(bool allow_cond = true) {
    DepthGuard g(this);
    ExprPtr e = parse_or();
    if (allow_cond && is_name("if")) {
      ++pos_;
      auto c = node(ExprKind::kCond);
      c->args.push_back(std::move(e));
      c->args.push_back(parse_or());
      if (is_name("else")) {
        ++pos_;
        c->args.push_back(parse_expr());
      } else {
        c->args.push_back(nullptr);
      }
      return sealed(std::move(c));
    }
    return e;
  }
  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      ++pos_;
      e = binary("or", std::move(e), parse_and());
    }
    return e;
  }
  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      ++pos_;
      e = binary("and", std::move(e), parse_not());
    }
    return e;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard g(this);
      ++pos_;
      auto e = node(ExprKind::kUnary, "not");
      e->args.push_back(parse_not());
      return sealed(std::move(e));
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr e = parse_concat();
    while (true) {
      std::string op;
      if (cur().kind == Tok::kOp && (cur().s == "==" || cur().s == "!=" || cur().s == "<" || cur().s == ">" ||
                                     cur().s == "<=" || cur().s == ">=")) {
        op = cur().s;
        ++pos_;
      } else if (is_name("in")) {
        op = "in";
        ++pos_;
      } else if (is_name("not") && peek().kind == Tok::kName && peek().s == "in") {
        op = "not in";
        pos_ += 2;
      } else {
        return e;
      }
      e = binary(op, std::move(e), parse_concat());
    }
  }
  ExprPtr parse_concat() {
    ExprPtr e = parse_add();
    while (is_op("~")) {
      ++pos_;
      e = binary("~", std::move(e), parse_add());
    }
    return e;
  }
  ExprPtr parse_add() {
    ExprPtr e = parse_mul();
    while (is_op("+") || is_op("-")) {
      std::string op = t_[pos_++].s;
      e = binary(op, std::move(e), parse_mul());
    }
    return e;
  }
  ExprPtr parse_mul() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = t_[pos_++].s;
      e = binary(op, std::move(e), parse_pow());
    }
    return e;
  }
  // As Jinja2 (not Python): ** binds looser than a unary minus, -2 ** 2 == 4.
  ExprPtr parse_pow() {
    ExprPtr e = parse_unary();
    while (is_op("**")) {
      ++pos_;
      e = binary("**", std::move(e), parse_unary());
    }
    return e;
  }
  // As Jinja2: a sign applies before the filters, so -3 | abs is abs(-3).
  ExprPtr parse_unary(bool with_filters = true) {
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      DepthGuard g(this);
      e = node(ExprKind::kUnary, t_[pos_++].s);
      e->args.push_back(parse_unary(/*with_filters=*/false));
      e = sealed(std::move(e));
    } else {
      e = parse_postfix(parse_primary());
    }
    return with_filters ? parse_filters(std::move(e)) : std::move(e);
  }
  ExprPtr parse_filters(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        ++pos_;
        auto f = node(ExprKind::kFilter, take_name());
        f->args.push_back(std::move(e));
        if (is_op("(")) parse_args(f.get());
        e = sealed(std::move(f));
      } else if (is_name("is")) {
        ++pos_;
        auto t = node(ExprKind::kTest);
        if (is_name("not")) {
          ++pos_;
          t->negated = true;
        }
        t->name = take_name();
        t->args.push_back(std::move(e));
        if (is_op("(")) {
          parse_args(t.get());
        } else if (cur().kind == Tok::kString || cur().kind == Tok::kInt || cur().kind == Tok::kFloat) {
          t->args.push_back(parse_primary());  // `is divisibleby 3`
        }
        e = sealed(std::move(t));
      } else {
        return e;
      }
    }
  }
  void parse_args(Expr* call) {
    expect_op("(");
    while (!is_op(")")) {
      if (cur().kind == Tok::kName && peek().kind == Tok::kOp && peek().s == "=") {
        std::string k = take_name();
        ++pos_;
        call->kwargs.emplace_back(std::move(k), parse_expr());
      } else {
        call->args.push_back(parse_expr());
      }
      if (!is_op(",")) break;
      ++pos_;
    }
    expect_op(")");
  }
  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        ++pos_;
        auto a = node(ExprKind::kGetAttr, take_name());
        a->args.push_back(std::move(e));
        e = sealed(std::move(a));
      } else if (is_op("[")) {
        ++pos_;
        ExprPtr lo, hi, step;
        if (!is_op(":")) lo = parse_expr();
        if (is_op(":")) {
          ++pos_;
          if (!is_op("]") && !is_op(":")) hi = parse_expr();
          if (is_op(":")) {
            ++pos_;
            if (!is_op("]")) step = parse_expr();
          }
          auto s = node(ExprKind::kSlice);
          s->args.push_back(std::move(e));
          s->args.push_back(std::move(lo));
          s->args.push_back(std::move(hi));
          s->args.push_back(std::move(step));
          e = sealed(std::move(s));
        } else {
          auto g = node(ExprKind::kGetItem);
          g->args.push_back(std::move(e));
          g->args.push_back(std::move(lo));
          e = sealed(std::move(g));
        }
        expect_op("]");
      } else if (is_op("(")) {
        auto c = node(ExprKind::kCall);
        c->args.push_back(std::move(e));
        parse_args(c.get());
        e = sealed(std::move(c));
      } else {
        return e;
      }
    }
  }
  ExprPtr parse_primary() {
    DepthGuard g(this);
    const Token& tk = cur();
    if (tk.kind == Tok::kString) {
      std::string s;
      while (cur().kind == Tok::kString) s += t_[pos_++].s;  // adjacent literals concatenate
      auto e = node(ExprKind::kLiteral);
      e->literal = s;
      return e;
    }
    if (tk.kind == Tok::kInt || tk.kind == Tok::kFloat) {
      auto e = node(ExprKind::kLiteral);
      if (tk.kind == Tok::kInt)
        e->literal = tk.i;
      else
        e->literal = tk.f;
      ++pos_;
      return e;
    }
    if (tk.kind == Tok::kName) {
      const std::string n = tk.s;
      ++pos_;
      auto e = node(ExprKind::kLiteral);
      if (n == "true" || n == "True")
        e->literal = true;
      else if (n == "false" || n == "False")
        e->literal = false;
      else if (n == "none" || n == "None")
        e->literal = nullptr;
      else
        return node(ExprKind::kName, n);
      return e;
    }
    if (is_op("(")) {
      ++pos_;
      ExprPtr first = parse_expr();
      if (is_op(",")) {  // a tuple: a list here
        auto l = node(ExprKind::kList);
        l->args.push_back(std::move(first));
        while (is_op(",")) {
          ++pos_;
          if (is_op(")")) break;
          l->args.push_back(parse_expr());
        }
        expect_op(")");
        return sealed(std::move(l));
      }
      expect_op(")");
      return first;
    }
    if (is_op("[")) {
      ++pos_;
      auto l = node(ExprKind::kList);
      while (!is_op("]")) {
        l->args.push_back(parse_expr());
        if (!is_op(",")) break;
        ++pos_;
      }
      expect_op("]");
      return sealed(std::move(l));
    }
    if (is_op("{")) {
      ++pos_;
      auto d = node(ExprKind::kDict);
      while (!is_op("}")) {
        d->args.push_back(parse_expr());
        expect_op(":");
        d->args.push_back(parse_expr());
        if (!is_op(",")) break;
        ++pos_;
      }
      expect_op("}");
      return sealed(std::move(d));
    }
    fail("unexpected '" + tk.s + "' in an expression");
  }

  std::vector<Token> t_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;  // for bodies being parsed: break / continue need one
};

}  // namespace

std::unique_ptr<Template> parse_template(std::string_view source) { return Parser(Lexer(source).run()).run(); }

}  // namespace parallm::jinja
