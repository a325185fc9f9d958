// The HTTP layer against a scripted backend (no model): routes, response
// shapes, SSE framing, stop strings, limits and error mapping, concurrency and
// client disconnects. Expected texts are computed independently from the
// script (script_token) and the tokenizer.
#include "server/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <future>
#include <sstream>

#include "http_test_util.h"
#include "scripted_backend.h"
#include "util/log.h"

namespace parallm {
namespace {

using nlohmann::json;
using test::raw_http;

class HttpServerTest : public ::testing::Test {
 protected:
  void start(ServerOptions o = {}, std::chrono::milliseconds interval = std::chrono::milliseconds(1)) {
    std::signal(SIGPIPE, SIG_IGN);
    set_log_level(LogLevel::kWarn);  // no access-log line per request in the test output
    o.port = 0;
    o.served_model_name = "tiny";
    o.heartbeat_s = 0.2;
    backend_ = std::make_unique<ScriptedBackend>(interval);
    server_ = std::make_unique<HttpServer>(o);
    port_ = server_->bind();
    server_->start();
    server_->set_backend(backend_.get());
  }
  void TearDown() override {
    if (server_) server_->stop();
    server_.reset();
    backend_.reset();
  }
  httplib::Result post(const std::string& path, const std::string& body, const httplib::Headers& h = {}) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(30);
    return c.Post(path.c_str(), h, body, "application/json");
  }
  httplib::Result get(const std::string& path) {
    httplib::Client c("127.0.0.1", port_);
    return c.Get(path.c_str());
  }
  // The text the script produces for `seed` over n tokens: the pieces joined
  // (a continuation keeps its first piece's leading space).
  std::string expected_text(uint64_t seed, int64_t n) {
    std::string s;
    for (int64_t i = 0; i < n; ++i) s += backend_->tokenizer().token_to_piece(script_token(seed, i));
    return s;
  }

  // HTTP chunks of a chunked response: chunk-size lines, hex digits only
  // (SSE lines never are).
  static int count_http_chunks(const std::string& resp) {
    int n = 0;
    std::istringstream in(resp.substr(resp.find("\r\n\r\n") + 4));
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty() && line != "0" && line.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos) ++n;
    }
    return n;
  }

  std::unique_ptr<ScriptedBackend> backend_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

TEST_F(HttpServerTest, HealthIs503UntilReady) {
  ServerOptions o;
  o.port = 0;
  HttpServer s(o);
  const int port = s.bind();
  s.start();
  httplib::Client c("127.0.0.1", port);
  EXPECT_EQ(c.Get("/health")->status, 503);
  auto r = c.Post("/v1/completions", R"({"prompt":"a"})", "application/json");
  EXPECT_EQ(r->status, 503);
  ScriptedBackend b;
  s.set_backend(&b);
  EXPECT_EQ(c.Get("/health")->status, 200);
  s.stop();
}

// A browser's preflight is answered without the API key, and the answers
// themselves allow the page's origin.
TEST_F(HttpServerTest, CrossOriginPreflightAndHeaders) {
  ServerOptions o;
  o.api_key = "k";
  o.allowed_origins = {"*"};
  start(o);
  const std::string pre = raw_http(port_, "OPTIONS", "/v1/chat/completions", "",
                                   "Origin: http://example.com\r\nAccess-Control-Request-Method: POST\r\n"
                                   "Access-Control-Request-Headers: authorization, content-type\r\n");
  EXPECT_EQ(test::status_of(pre), 204) << pre;
  EXPECT_NE(pre.find("Access-Control-Allow-Origin: *"), std::string::npos) << pre;
  EXPECT_NE(pre.find("Access-Control-Allow-Methods: GET, POST, OPTIONS"), std::string::npos) << pre;
  EXPECT_NE(pre.find("Access-Control-Allow-Headers: authorization, content-type"), std::string::npos) << pre;
  auto r = post("/v1/completions", R"({"prompt":"Once","max_tokens":2})", {{"Authorization", "Bearer k"}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "*");
  auto denied = post("/v1/completions", R"({"prompt":"Once","max_tokens":2})");
  EXPECT_EQ(denied->status, 401);
  EXPECT_EQ(denied->get_header_value("Access-Control-Allow-Origin"), "*");  // the page can read the error
}

// vLLM's small routes, and a wrong method on a known route.
TEST_F(HttpServerTest, VersionPingAndMethodNotAllowed) {
  ServerOptions o;
  o.version = "9.8.7";
  start(o);
  auto v = get("/version");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->status, 200);
  EXPECT_EQ(json::parse(v->body)["version"], "9.8.7");
  EXPECT_EQ(get("/ping")->status, 200);
  EXPECT_EQ(post("/ping", "")->status, 200);
  httplib::Client c("127.0.0.1", port_);
  auto head = c.Head("/health");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
  auto wrong = c.Delete("/v1/completions");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 405);
  EXPECT_EQ(wrong->get_header_value("Allow"), "POST, OPTIONS");
  EXPECT_EQ(json::parse(wrong->body)["error"]["code"], "method_not_allowed");
  auto g = get("/v1/completions");
  EXPECT_EQ(g->status, 405);
  EXPECT_EQ(get("/nope")->status, 404);
}

TEST_F(HttpServerTest, CompletionShapeAndText) {
  start();
  auto r =
      post("/v1/completions", R"({"model":"tiny","prompt":"Once upon","max_tokens":7,"seed":5,"temperature":0.7})");
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_TRUE(j["created"].is_number_integer());
  EXPECT_EQ(j["choices"][0]["text"], expected_text(5, 7));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  const int64_t n_prompt = static_cast<int64_t>(backend_->tokenizer().encode("Once upon", true).size());
  EXPECT_EQ(j["usage"]["prompt_tokens"], n_prompt);
  EXPECT_EQ(j["usage"]["completion_tokens"], 7);
  EXPECT_EQ(j["usage"]["total_tokens"], n_prompt + 7);

  auto c = post("/v1/chat/completions",
                R"({"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":4,"seed":9})");
  ASSERT_EQ(c->status, 200) << c->body;
  json k = json::parse(c->body);
  EXPECT_EQ(k["object"], "chat.completion");
  EXPECT_EQ(k["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(k["choices"][0]["message"]["content"], expected_text(9, 4));
  // The default template (stories260K has none) renders "<s>User: hi\nAssistant:".
  const auto& tok = backend_->tokenizer();
  EXPECT_EQ(k["usage"]["prompt_tokens"],
            tok.encode(tok.token_to_piece(tok.bos_id()) + "User: hi\nAssistant:", false, true).size());

  auto m = get("/v1/models");
  EXPECT_EQ(json::parse(m->body)["data"][0]["id"], "tiny");
}

// /v1/embeddings through the HTTP layer: inputs in order, each the backend's
// embedding for its tokens (text tokenized with BOS, ids as given), base64 as
// little-endian float32 bytes (decoded here from RFC 4648's alphabet by
// std::string search), usage, errors, a backend without embeddings.
TEST_F(HttpServerTest, EmbeddingsRoute) {
  start();
  auto none = post("/v1/embeddings", R"({"input":"hi"})");
  EXPECT_EQ(none->status, 400) << none->body;
  backend_->embed_size = 6;
  const auto& tok = backend_->tokenizer();
  auto r = post("/v1/embeddings", R"({"model":"tiny","input":["Once upon","a time"]})");
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["model"], "tiny");
  ASSERT_EQ(j["data"].size(), 2u);
  int64_t n_tokens = 0;
  for (size_t i = 0; i < 2; ++i) {
    const std::vector<int32_t> ids = tok.encode(i == 0 ? "Once upon" : "a time", true);
    n_tokens += static_cast<int64_t>(ids.size());
    EXPECT_EQ(j["data"][i]["object"], "embedding");
    EXPECT_EQ(j["data"][i]["index"], i);
    EXPECT_EQ(j["data"][i]["embedding"].get<std::vector<float>>(), script_embedding(ids, 6));
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], n_tokens);
  EXPECT_EQ(j["usage"]["total_tokens"], n_tokens);

  auto b = post("/v1/embeddings", R"({"input":[[5,6,7]],"encoding_format":"base64"})");
  ASSERT_EQ(b->status, 200) << b->body;
  const std::string enc = json::parse(b->body)["data"][0]["embedding"].get<std::string>();
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> bytes;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : enc) {
    if (c == '=') break;
    acc = (acc << 6) | static_cast<uint32_t>(alphabet.find(c));
    bits += 6;
    if (bits >= 8) bytes.push_back(static_cast<uint8_t>((acc >> (bits -= 8)) & 0xff));
  }
  ASSERT_EQ(bytes.size(), 6u * 4);
  const std::vector<float> want = script_embedding({5, 6, 7}, 6);
  for (size_t k = 0; k < 6; ++k) {
    const uint32_t u =
        bytes[4 * k] | (bytes[4 * k + 1] << 8) | (bytes[4 * k + 2] << 16) | (uint32_t{bytes[4 * k + 3]} << 24);
    float f;
    std::memcpy(&f, &u, 4);
    EXPECT_EQ(f, want[k]) << k;
  }
  EXPECT_EQ(post("/v1/embeddings", R"({"input":"hi","model":"other"})")->status, 404);
  EXPECT_EQ(post("/v1/embeddings", R"({"input":"hi","dimensions":5})")->status, 400);
  EXPECT_EQ(post("/v1/embeddings", R"({"input":"hi","dimensions":6})")->status, 200);
  auto wrong = get("/v1/embeddings");
  EXPECT_EQ(wrong->status, 405);
  EXPECT_EQ(wrong->get_header_value("Allow"), "POST, OPTIONS");
  backend_->refuse_ = true;
  EXPECT_EQ(post("/v1/embeddings", R"({"input":"hi"})")->status, 429);
  backend_->refuse_ = false;
}

TEST_F(HttpServerTest, StreamedEqualsNonStreamedAndEndsWithDone) {
  start();
  for (bool chat : {false, true}) {
    const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
    const std::string input = chat ? R"("messages":[{"role":"user","content":"x"}])" : R"("prompt":"x")";
    auto whole = post(path, "{" + input + R"(,"max_tokens":20,"seed":3})");
    const std::string resp =
        raw_http(port_, "POST", path,
                 "{" + input + R"(,"max_tokens":20,"seed":3,"stream":true,"stream_options":{"include_usage":true}})");
    ASSERT_EQ(test::status_of(resp), 200) << resp;
    EXPECT_NE(resp.find("Content-Type: text/event-stream"), std::string::npos);
    auto data = test::sse_data(resp);
    ASSERT_FALSE(data.empty());
    EXPECT_EQ(data.back(), "[DONE]");
    std::string finish;
    json usage;
    const std::string text = test::sse_text(data, &finish, &usage);
    json w = json::parse(whole->body);
    EXPECT_EQ(text, chat ? w["choices"][0]["message"]["content"] : w["choices"][0]["text"]);
    EXPECT_EQ(text, expected_text(3, 20));
    EXPECT_EQ(finish, "length");
    EXPECT_EQ(usage, w["usage"]);
    EXPECT_EQ(json::parse(data[data.size() - 2])["choices"].size(), 0u);  // the usage chunk
  }
}

// --stream-interval 5: every token is still its own SSE chunk, in order, but
// the HTTP thread writes them in groups (the first token at once), so the
// chunked body has far fewer HTTP chunks than tokens. Stop strings still end
// a grouped stream and a non-streamed request.
TEST_F(HttpServerTest, StreamIntervalGroupsWritesAndKeepsEveryToken) {
  ServerOptions o;
  o.stream_interval = 5;
  start(o);
  const std::string resp =
      raw_http(port_, "POST", "/v1/completions", R"({"prompt":"x","max_tokens":20,"seed":4,"stream":true})");
  ASSERT_EQ(test::status_of(resp), 200) << resp;
  auto data = test::sse_data(resp);
  ASSERT_EQ(data.size(), 22u);  // 20 tokens, the finish chunk, [DONE]
  std::string finish;
  EXPECT_EQ(test::sse_text(data, &finish), expected_text(4, 20));
  EXPECT_EQ(finish, "length");
  const int http_chunks = count_http_chunks(resp);
  EXPECT_GE(http_chunks, 2);
  EXPECT_LE(http_chunks, 12) << resp;  // 1 + 20/5 groups + the end (~6); every token alone would be ~21

  const std::string full = expected_text(11, 30);
  const std::string stop = full.substr(10, 3);
  auto r = post("/v1/completions", R"({"prompt":"a","max_tokens":30,"seed":11,"stop":[")" + stop + R"("]})");
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], full.substr(0, full.find(stop)));
  const std::string s = raw_http(port_, "POST", "/v1/completions",
                                 R"({"prompt":"a","max_tokens":30,"seed":11,"stream":true,"stop":")" + stop + R"("})");
  EXPECT_EQ(test::sse_text(test::sse_data(s), &finish), full.substr(0, full.find(stop)));
  EXPECT_EQ(finish, "stop");
}

// --stream-interval auto (the default): a stream alone gets every token in
// its own write; in steps that give 20 sequences a token each, tokens go out
// ceil(20 / 4) = 5 at a time. Either way every token is its own SSE chunk.
TEST_F(HttpServerTest, StreamIntervalAutoGroupsWritesOnlyUnderLoad) {
  start(ServerOptions{}, std::chrono::milliseconds(5));
  const std::string body = R"({"prompt":"x","max_tokens":20,"seed":4,"stream":true})";
  for (const int64_t others : {0, 19}) {
    backend_->other_step_tokens = others;
    const std::string resp = raw_http(port_, "POST", "/v1/completions", body);
    ASSERT_EQ(test::status_of(resp), 200) << resp;
    auto data = test::sse_data(resp);
    ASSERT_EQ(data.size(), 22u);
    EXPECT_EQ(test::sse_text(data, nullptr), expected_text(4, 20));
    const int http_chunks = count_http_chunks(resp);
    if (others == 0) {
      EXPECT_GE(http_chunks, 14) << resp;  // ~21: one per token and the end
    } else {
      EXPECT_LE(http_chunks, 10) << resp;  // ~6: the first token, 4 groups of 5, the end
    }
  }
}

// n choices per prompt and batches of prompts: choice p * n + j is prompt p's
// generation j, drawn with seed + j; usage counts each prompt once.
TEST_F(HttpServerTest, SeveralChoicesPerRequest) {
  start();
  const auto& tok = backend_->tokenizer();
  auto r = post("/v1/completions", R"({"prompt":"Once","max_tokens":4,"n":3,"seed":5})");
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  ASSERT_EQ(j["choices"].size(), 3u);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(j["choices"][c]["index"], c);
    EXPECT_EQ(j["choices"][c]["text"], expected_text(5 + static_cast<uint64_t>(c), 4));
    EXPECT_EQ(j["choices"][c]["finish_reason"], "length");
  }
  const int64_t n_once = static_cast<int64_t>(tok.encode("Once", true).size());
  EXPECT_EQ(j["usage"]["prompt_tokens"], n_once);
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);

  // A batch of a text prompt and a token-id prompt, two choices each, with echo.
  r = post("/v1/completions", R"({"prompt":["Once",[1,300,301]],"max_tokens":3,"n":2,"seed":7,"echo":true})");
  ASSERT_EQ(r->status, 200) << r->body;
  j = json::parse(r->body);
  ASSERT_EQ(j["choices"].size(), 4u);
  const std::string echoes[2] = {"Once", tok.decode({1, 300, 301})};
  for (int c = 0; c < 4; ++c) {
    EXPECT_EQ(j["choices"][c]["index"], c);
    EXPECT_EQ(j["choices"][c]["text"], echoes[c / 2] + expected_text(7 + static_cast<uint64_t>(c % 2), 3)) << c;
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], n_once + 3);
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);

  // Streamed chat, n = 2: each choice opens with its role, ends with its own
  // finish_reason, and carries its own text.
  const std::string resp = raw_http(port_, "POST", "/v1/chat/completions",
                                    R"({"messages":[{"role":"user","content":"x"}],"max_tokens":6,"n":2,"seed":11,)"
                                    R"("stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_EQ(test::status_of(resp), 200) << resp;
  auto data = test::sse_data(resp);
  ASSERT_FALSE(data.empty());
  EXPECT_EQ(data.back(), "[DONE]");
  std::string text[2];
  int roles[2] = {0, 0}, finishes[2] = {0, 0};
  json usage;
  for (const auto& d : data) {
    if (d == "[DONE]") break;
    json c = json::parse(d);
    if (!c["usage"].is_null()) usage = c["usage"];
    for (const auto& ch : c["choices"]) {
      const int i = ch["index"].get<int>();
      ASSERT_TRUE(i == 0 || i == 1) << d;
      if (ch["delta"].contains("role")) ++roles[i];
      if (ch["delta"].contains("content")) text[i] += ch["delta"]["content"].get<std::string>();
      if (!ch["finish_reason"].is_null()) ++finishes[i];
    }
  }
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(roles[i], 1);
    EXPECT_EQ(finishes[i], 1);
    EXPECT_EQ(text[i], expected_text(11 + static_cast<uint64_t>(i), 6));
  }
  EXPECT_EQ(usage["completion_tokens"], 12);
}

// logprobs in both formats, streamed and not, against the script's values.
TEST_F(HttpServerTest, LogprobsInCompletionAndChatFormats) {
  start();
  const auto& tok = backend_->tokenizer();
  const uint64_t seed = 4;
  const int64_t n = 5;
  auto piece = [&](int32_t id) { return tok.token_to_piece(id); };
  // Completions, logprobs = 2 (the script's top list starts with the sampled token).
  const std::string body = R"({"prompt":"Once","max_tokens":5,"seed":4,"logprobs":2)";
  auto r = post("/v1/completions", body + "}");
  ASSERT_EQ(r->status, 200) << r->body;
  const json lp = json::parse(r->body)["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), static_cast<size_t>(n)) << lp;
  int64_t offset = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t t = script_token(seed, i);
    EXPECT_EQ(lp["tokens"][i], piece(t));
    EXPECT_FLOAT_EQ(lp["token_logprobs"][i].get<float>(), script_logprob(seed, i));
    const json top = lp["top_logprobs"][i];
    ASSERT_EQ(top.size(), 2u) << top;
    EXPECT_FLOAT_EQ(top[piece(t)].get<float>(), script_logprob(seed, i));
    EXPECT_FLOAT_EQ(top[piece(t + 1)].get<float>(), script_logprob(seed, i) - 1.0f);
    EXPECT_EQ(lp["text_offset"][i], offset);
    offset += static_cast<int64_t>(piece(t).size());  // the script's pieces are ASCII
  }
  // Streamed: the chunks' logprobs, joined, are the same lists.
  const std::string resp = raw_http(port_, "POST", "/v1/completions", body + R"(,"stream":true})");
  json joined = {{"tokens", json::array()},
                 {"token_logprobs", json::array()},
                 {"top_logprobs", json::array()},
                 {"text_offset", json::array()}};
  for (const auto& d : test::sse_data(resp)) {
    if (d == "[DONE]") break;
    const json chunk = json::parse(d);  // named: a range-for over a temporary's member would dangle
    for (const auto& ch : chunk["choices"]) {
      if (ch["logprobs"].is_null()) continue;
      for (const char* f : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
        for (const auto& x : ch["logprobs"][f]) joined[f].push_back(x);
      }
    }
  }
  EXPECT_EQ(joined, lp);

  // Echo with logprobs: the prompt's tokens come first, the very first with null.
  const std::string echo_body = R"({"prompt":[1,300,301],"max_tokens":2,"seed":4,"logprobs":1,"echo":true)";
  auto er = post("/v1/completions", echo_body + "}");
  ASSERT_EQ(er->status, 200) << er->body;
  const json elp = json::parse(er->body)["choices"][0]["logprobs"];
  ASSERT_EQ(elp["tokens"].size(), 5u) << elp;
  const int32_t prompt_ids[3] = {1, 300, 301};
  int64_t eoff = 0;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(elp["tokens"][i], piece(prompt_ids[i]));
    EXPECT_EQ(elp["text_offset"][i], eoff);
    eoff += static_cast<int64_t>(piece(prompt_ids[i]).size());
  }
  EXPECT_TRUE(elp["token_logprobs"][0].is_null());
  EXPECT_TRUE(elp["top_logprobs"][0].is_null());
  EXPECT_FLOAT_EQ(elp["token_logprobs"][1].get<float>(), -0.5f);
  EXPECT_FLOAT_EQ(elp["token_logprobs"][2].get<float>(), -1.0f);
  EXPECT_EQ(elp["tokens"][3], piece(script_token(seed, 0)));
  EXPECT_FLOAT_EQ(elp["token_logprobs"][3].get<float>(), script_logprob(seed, 0));
  EXPECT_EQ(elp["text_offset"][3], eoff);
  json ejoined = {{"tokens", json::array()},
                  {"token_logprobs", json::array()},
                  {"top_logprobs", json::array()},
                  {"text_offset", json::array()}};
  for (const auto& d : test::sse_data(raw_http(port_, "POST", "/v1/completions", echo_body + R"(,"stream":true})"))) {
    if (d == "[DONE]") break;
    const json chunk = json::parse(d);
    for (const auto& ch : chunk["choices"]) {
      if (ch["logprobs"].is_null()) continue;
      for (const char* f : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
        for (const auto& x : ch["logprobs"][f]) ejoined[f].push_back(x);
      }
    }
  }
  EXPECT_EQ(ejoined, elp);

  // Chat: logprobs true, top_logprobs 3.
  const std::string chat =
      R"({"messages":[{"role":"user","content":"x"}],"max_tokens":5,"seed":4,"logprobs":true,"top_logprobs":3)";
  auto c = post("/v1/chat/completions", chat + "}");
  ASSERT_EQ(c->status, 200) << c->body;
  const json content = json::parse(c->body)["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), static_cast<size_t>(n)) << c->body;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t t = script_token(seed, i);
    const json& e = content[i];
    EXPECT_EQ(e["token"], piece(t));
    EXPECT_FLOAT_EQ(e["logprob"].get<float>(), script_logprob(seed, i));
    json bytes = json::array();
    for (unsigned char b : piece(t)) bytes.push_back(static_cast<int>(b));
    EXPECT_EQ(e["bytes"], bytes);
    ASSERT_EQ(e["top_logprobs"].size(), 3u);
    for (int a = 0; a < 3; ++a) {
      EXPECT_EQ(e["top_logprobs"][a]["token"], piece(t + a));
      EXPECT_FLOAT_EQ(e["top_logprobs"][a]["logprob"].get<float>(), script_logprob(seed, i) - static_cast<float>(a));
    }
  }
  json streamed = json::array();
  for (const auto& d : test::sse_data(raw_http(port_, "POST", "/v1/chat/completions", chat + R"(,"stream":true})"))) {
    if (d == "[DONE]") break;
    const json chunk = json::parse(d);
    for (const auto& ch : chunk["choices"]) {
      if (!ch["logprobs"].is_null()) {
        for (const auto& x : ch["logprobs"]["content"]) streamed.push_back(x);
      }
    }
  }
  EXPECT_EQ(streamed, content);
  // Without logprobs the field is null.
  auto plain = post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"max_tokens":2})");
  EXPECT_TRUE(json::parse(plain->body)["choices"][0]["logprobs"].is_null());
}

// Tools: a template that asks for Hermes-style <tool_call> blocks gets the
// request's tools, and an answer holding such blocks comes back as
// tool_calls (streamed: content until the block, then one tool_calls delta).
TEST_F(HttpServerTest, HermesToolCallsAreParsed) {
  ServerOptions o;
  o.chat_template =
      "{% for m in messages %}{{ m.content }}{% endfor %}{% if tools %}{{ tools | tojson }}<tool_call>{% endif %}";
  start(o);
  const auto& tok = backend_->tokenizer();
  const std::string answer =
      "Sure.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  backend_->fixed_tokens = tok.encode(answer, false, false);
  // As streamed (SentencePiece keeps the first piece's space): the content before the block.
  std::string full;
  StreamDecoder dec(tok);
  for (int32_t t : backend_->fixed_tokens) full += dec.push(t);
  full += dec.flush();
  ASSERT_EQ(full.substr(full.find("Sure.")), answer);
  const std::string before = full.substr(0, full.find("<tool_call>"));
  const std::string tools =
      R"("tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])";
  const std::string req = R"({"messages":[{"role":"user","content":"Weather?"}],"max_tokens":100,)" + tools;
  auto r = post("/v1/chat/completions", req + "}");
  ASSERT_EQ(r->status, 200) << r->body;
  json c = json::parse(r->body)["choices"][0];
  EXPECT_EQ(c["finish_reason"], "tool_calls");
  EXPECT_EQ(c["message"]["content"], before);
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u) << c;
  const json call = c["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()), json::parse(R"({"city":"Paris"})"));
  // The template saw the tools in the request's key order ("type" before "function").
  const int64_t with_tools = json::parse(r->body)["usage"]["prompt_tokens"];
  const std::string rendered =
      std::string("Weather?") +
      R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]<tool_call>)";
  EXPECT_EQ(with_tools, static_cast<int64_t>(tok.encode(rendered, false, true).size()));

  // Streamed.
  const std::string resp = raw_http(port_, "POST", "/v1/chat/completions", req + R"(,"stream":true})");
  std::string content, finish;
  json streamed_calls;
  for (const auto& d : test::sse_data(resp)) {
    if (d == "[DONE]") break;
    const json chunk = json::parse(d);
    for (const auto& ch : chunk["choices"]) {
      if (ch["delta"].contains("content")) content += ch["delta"]["content"].get<std::string>();
      if (ch["delta"].contains("tool_calls")) streamed_calls = ch["delta"]["tool_calls"];
      if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
    }
  }
  EXPECT_EQ(content, before);
  EXPECT_EQ(finish, "tool_calls");
  ASSERT_EQ(streamed_calls.size(), 1u) << resp;
  EXPECT_EQ(streamed_calls[0]["index"], 0);
  EXPECT_EQ(streamed_calls[0]["function"]["name"], "get_weather");

  // Without tools (or with tool_choice "none") the answer is plain content.
  for (const std::string& body :
       {std::string(R"({"messages":[{"role":"user","content":"Weather?"}]})"), req + R"(,"tool_choice":"none"})"}) {
    auto p = post("/v1/chat/completions", body);
    ASSERT_EQ(p->status, 200) << p->body;
    json pc = json::parse(p->body)["choices"][0];
    EXPECT_EQ(pc["message"]["content"], full);
    EXPECT_FALSE(pc["message"].contains("tool_calls"));
    EXPECT_EQ(pc["finish_reason"], "stop");
  }
  // Unsupported tool choices and malformed tools are 400s (checked below), and
  // a Llama-style template gets its JSON calls parsed too.
  server_->set_backend(nullptr);
  {
    ServerOptions lo;
    lo.port = 0;
    lo.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}<|python_tag|>";
    HttpServer llama(lo);
    const int lport = llama.bind();
    llama.start();
    backend_->fixed_tokens =
        tok.encode("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", false, false);
    llama.set_backend(backend_.get());
    httplib::Client lc("127.0.0.1", lport);
    auto lr = lc.Post("/v1/chat/completions", req + "}", "application/json");
    ASSERT_TRUE(lr);
    ASSERT_EQ(lr->status, 200) << lr->body;
    const json lch = json::parse(lr->body)["choices"][0];
    EXPECT_EQ(lch["finish_reason"], "tool_calls");
    EXPECT_TRUE(lch["message"]["content"].is_null()) << lch;
    ASSERT_EQ(lch["message"]["tool_calls"].size(), 1u);
    EXPECT_EQ(json::parse(lch["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
              json::parse(R"({"city":"Oslo"})"));
    llama.set_backend(nullptr);
    llama.stop();
    backend_->fixed_tokens = tok.encode(answer, false, false);
  }
  server_->set_backend(backend_.get());
  // tool_choice "required" and named functions are constrained (structured_output_test.py);
  // naming a function that is not in tools, or "required" without tools, is a 400.
  for (const std::string& body :
       {req + R"(,"tool_choice":{"type":"function","function":{"name":"not_a_tool"}}})",
        std::string(R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"required"})"),
        std::string(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})"),
        std::string(
            R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":""}}]})")}) {
    EXPECT_EQ(post("/v1/chat/completions", body)->status, 400) << body;
  }
}

// --reasoning-parser qwen3: the thinking goes to reasoning_content, streamed
// as its own deltas, and what follows it still becomes tool calls.
TEST_F(HttpServerTest, ReasoningContentIsSplitOff) {
  ServerOptions o;
  o.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}{% if tools %}<tool_call>{% endif %}";
  o.reasoning_format = ReasoningFormat::kQwen3;
  start(o);
  const auto& tok = backend_->tokenizer();
  backend_->fixed_tokens = tok.encode(
      "<think>Check the weather first.</think>\n<tool_call>\n{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
      false, false);
  const std::string tools = R"("tools":[{"type":"function","function":{"name":"get_weather"}}])";
  const std::string req = R"({"messages":[{"role":"user","content":"Weather?"}],"max_tokens":100,)" + tools;
  auto r = post("/v1/chat/completions", req + "}");
  ASSERT_EQ(r->status, 200) << r->body;
  const json m = json::parse(r->body)["choices"][0]["message"];
  EXPECT_EQ(m["reasoning_content"], "Check the weather first.");
  EXPECT_TRUE(m["content"].is_null()) << m;
  ASSERT_EQ(m["tool_calls"].size(), 1u);
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");

  std::string reasoning, content;
  int calls = 0;
  for (const auto& d : test::sse_data(raw_http(port_, "POST", "/v1/chat/completions", req + R"(,"stream":true})"))) {
    if (d == "[DONE]") break;
    const json chunk = json::parse(d);
    for (const auto& ch : chunk["choices"]) {
      if (ch["delta"].contains("reasoning_content")) reasoning += ch["delta"]["reasoning_content"].get<std::string>();
      if (ch["delta"].contains("content")) content += ch["delta"]["content"].get<std::string>();
      if (ch["delta"].contains("tool_calls")) calls += static_cast<int>(ch["delta"]["tool_calls"].size());
    }
  }
  EXPECT_EQ(reasoning, "Check the weather first.");
  EXPECT_EQ(content.find_first_not_of(" \n"), std::string::npos) << content;  // the role chunk's "" and whitespace
  EXPECT_EQ(calls, 1);

  // An answer that does not think is all content, and reasoning_content is null.
  backend_->fixed_tokens = tok.encode("Just sunny.", false, false);
  auto p = post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"Weather?"}]})");
  const json pm = json::parse(p->body)["choices"][0]["message"];
  EXPECT_TRUE(pm["reasoning_content"].is_null()) << pm;
  EXPECT_NE(pm["content"].get<std::string>().find("Just sunny."), std::string::npos);
}

// vLLM's /tokenize and /detokenize, and GET /v1/models/{id}.
TEST_F(HttpServerTest, TokenizerRoutesAndModelCard) {
  start();
  const auto& tok = backend_->tokenizer();
  auto r = post("/tokenize", R"({"prompt":"Once upon a time","return_token_strs":true})");
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  const auto ids = tok.encode("Once upon a time", true);
  EXPECT_EQ(j["tokens"], json(ids));
  EXPECT_EQ(j["count"], ids.size());
  EXPECT_EQ(j["max_model_len"], 512);
  ASSERT_EQ(j["token_strs"].size(), ids.size());
  EXPECT_EQ(j["token_strs"][1], tok.token_to_piece(ids[1]));
  EXPECT_EQ(json::parse(post("/tokenize", R"({"prompt":"Once","add_special_tokens":false})")->body)["tokens"],
            json(tok.encode("Once", false)));
  // A chat body counts what a chat completion's prompt holds.
  const std::string messages = R"("messages":[{"role":"user","content":"hi there"}])";
  j = json::parse(post("/tokenize", "{" + messages + "}")->body);
  EXPECT_TRUE(j["token_strs"].is_null());
  auto c = post("/v1/chat/completions", "{" + messages + R"(,"max_tokens":1})");
  EXPECT_EQ(j["count"], json::parse(c->body)["usage"]["prompt_tokens"]);
  // Round trip.
  r = post("/detokenize", json({{"tokens", tok.encode("Once upon a time", false)}}).dump());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["prompt"], "Once upon a time");
  for (const auto& [path, body] :
       std::vector<std::pair<std::string, std::string>>{{"/tokenize", "{}"},
                                                        {"/tokenize", R"({"prompt":5})"},
                                                        {"/tokenize", "nope"},
                                                        {"/tokenize", R"({"messages":"x"})"},
                                                        {"/tokenize", R"({"prompt":"a","add_special_tokens":1})"},
                                                        {"/detokenize", R"({"tokens":[1,-1]})"},
                                                        {"/detokenize", R"({"tokens":[99999]})"},
                                                        {"/detokenize", "{}"}}) {
    EXPECT_EQ(post(path, body)->status, 400) << path << " " << body;
  }
  EXPECT_EQ(post("/tokenize", R"({"model":"other","prompt":"a"})")->status, 404);

  auto m = get("/v1/models/tiny");
  ASSERT_EQ(m->status, 200) << m->body;
  EXPECT_EQ(json::parse(m->body)["id"], "tiny");
  EXPECT_EQ(json::parse(m->body)["object"], "model");
  auto missing = get("/v1/models/other");
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(json::parse(missing->body)["error"]["code"], "model_not_found");
}

TEST_F(HttpServerTest, StopStringsEndGenerationAndAreNotIncluded) {
  start();
  const std::string full = expected_text(11, 30);
  ASSERT_GT(full.size(), 20u);
  const std::string stop = full.substr(10, 3);
  const std::string want = full.substr(0, full.find(stop));
  auto r = post("/v1/completions", R"({"prompt":"a","max_tokens":30,"seed":11,"stop":[")" + stop + R"(","zzzzqqq"]})");
  json j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["text"], want);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_LT(j["usage"]["completion_tokens"].get<int>(), 30);
  const std::string s = raw_http(port_, "POST", "/v1/completions",
                                 R"({"prompt":"a","max_tokens":30,"seed":11,"stream":true,"stop":")" + stop + R"("})");
  std::string finish;
  EXPECT_EQ(test::sse_text(test::sse_data(s), &finish), want);
  EXPECT_EQ(finish, "stop");
  // vLLM's include_stop_str_in_output: the text goes on to the end of the stop string.
  for (const char* stream : {"false", "true"}) {
    const std::string inc =
        raw_http(port_, "POST", "/v1/completions",
                 R"({"prompt":"a","max_tokens":30,"seed":11,"include_stop_str_in_output":true,"stop":")" + stop +
                     R"(","stream":)" + stream + "}");
    const std::string body = inc.substr(inc.find("\r\n\r\n") + 4);
    const std::string text = std::string(stream) == "true" ? test::sse_text(test::sse_data(inc))
                                                           : json::parse(body)["choices"][0]["text"].get<std::string>();
    EXPECT_EQ(text, want + stop) << stream;
  }
}

TEST_F(HttpServerTest, BadRequestCorpusThenHealthy) {
  ServerOptions o;
  o.api_key = "sekret";
  o.max_body_bytes = 64 * 1024;
  start(o);
  const std::string auth = "Authorization: Bearer sekret\r\n";
  struct Case {
    std::string path, body, headers;
    int status;
  };
  const std::string huge_prompt(600 * 6, 'a');
  std::string bad_utf8 = R"({"prompt":"ab)";
  bad_utf8 += "\xff\xfe";
  bad_utf8 += R"(","max_tokens":2})";
  std::vector<Case> cases = {
      {"/v1/completions", R"({"prompt":"a"})", "", 401},
      {"/v1/completions", R"({"prompt":"a"})", "Authorization: Bearer wrong\r\n", 401},
      {"/v1/completions", R"({"prompt":"a"})", "Authorization: sekret\r\n", 401},
      {"/v1/completions", R"({"prompt": "a",)", auth, 400},
      {"/v1/completions", "not json at all", auth, 400},
      {"/v1/completions", "[1,2,3]", auth, 400},
      {"/v1/completions", R"({"max_tokens":3})", auth, 400},
      {"/v1/completions", R"({"prompt":42})", auth, 400},
      {"/v1/completions", R"({"prompt":[]})", auth, 400},
      {"/v1/completions", R"({"prompt":[1,-2]})", auth, 400},
      {"/v1/completions", R"({"prompt":[1,99999]})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","max_tokens":"5"})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","max_tokens":0})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","max_tokens":100000})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","temperature":"hot"})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","temperature":-1})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","top_p":2})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","stop":5})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","stop":[""]})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","n":0})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","n":129})", auth, 400},
      {"/v1/completions", R"({"prompt":["a","b"],"n":65})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","n":2,"best_of":3})", auth, 400},
      {"/v1/completions", R"({"prompt":["a",[1,2]]})", auth, 200},  // a batch may mix text and ids
      {"/v1/completions", R"({"prompt":["a",5]})", auth, 400},
      {"/v1/completions", R"({"prompt":[[1,2],[]]})", auth, 400},
      {"/v1/completions", R"({"prompt":[[1,2],[3,99999]]})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","logprobs":21})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","logprobs":true})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","suffix":"b"})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","logit_bias":{"x":1}})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","logit_bias":{"-1":1}})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","logit_bias":{"5":101}})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","logit_bias":{"5":"up"}})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","logit_bias":{"99999":1}})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","logit_bias":[1]})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","response_format":{"type":"json_schema"}})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","response_format":"json"})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","max_tokens":4,"min_tokens":5})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","min_tokens":-1})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","stop_token_ids":[1,-2]})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","stop_token_ids":[99999]})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","stop_token_ids":5})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","skip_special_tokens":"no"})", auth, 400},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", auth, 400},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":30})",
       auth, 400},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"logprobs":1})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","stream":"yes"})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","stream_options":{"include_usage":true}})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","seed":1.5})", auth, 400},
      {"/v1/completions", R"({"prompt":"a","model":"other"})", auth, 404},
      {"/v1/completions", bad_utf8, auth, 400},
      {"/v1/completions", R"({"prompt":")" + huge_prompt + R"("})", auth, 400},
      {"/v1/completions", R"({"prompt":")" + std::string(100 * 1024, 'a') + R"("})", auth, 413},
      {"/v1/chat/completions", R"({"prompt":"a"})", auth, 400},
      {"/v1/chat/completions", R"({"messages":"hi"})", auth, 400},
      {"/v1/chat/completions", R"({"messages":[]})", auth, 400},
      {"/v1/chat/completions", R"({"messages":[{"role":"user"}]})", auth, 400},
      {"/v1/chat/completions", R"({"messages":[{"role":"robot","content":"x"}]})", auth, 400},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":{"a":1}}]})", auth, 400},
      {"/v1/nope", "{}", auth, 404},
  };
  int accepted = 0;
  for (const auto& c : cases) {
    if (c.status == 200) {
      ++accepted;
      const std::string resp = raw_http(port_, "POST", c.path, c.body, c.headers);
      EXPECT_EQ(test::status_of(resp), 200) << c.body << resp;
      continue;
    }
    const std::string resp = raw_http(port_, "POST", c.path, c.body, c.headers);
    EXPECT_EQ(test::status_of(resp), c.status) << c.body.substr(0, 200);
    const size_t b = resp.find("\r\n\r\n");
    ASSERT_NE(b, std::string::npos);
    json j = json::parse(resp.substr(b + 4), nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << resp;
    for (const char* f : {"message", "type", "param", "code"}) EXPECT_TRUE(j["error"].contains(f)) << f << " " << resp;
  }
  EXPECT_EQ(backend_->submitted.load(), 2 * accepted);  // the batches of two prompts
  EXPECT_EQ(get("/health")->status, 200);
  const std::string ok = raw_http(port_, "POST", "/v1/completions", R"({"prompt":"a","max_tokens":2})", auth);
  EXPECT_EQ(test::status_of(ok), 200) << ok;
}

TEST_F(HttpServerTest, QueueFullAndRateLimitGive429) {
  ServerOptions o;
  o.rate_limit_per_minute = 3;
  start(o);
  backend_->refuse_ = true;
  auto r = post("/v1/completions", R"({"prompt":"a"})");
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  backend_->refuse_ = false;
  EXPECT_EQ(post("/v1/completions", R"({"prompt":"a","max_tokens":1})")->status, 200);
  EXPECT_EQ(post("/v1/completions", R"({"prompt":"a","max_tokens":1})")->status, 200);
  auto limited = post("/v1/completions", R"({"prompt":"a","max_tokens":1})");
  EXPECT_EQ(limited->status, 429);
  EXPECT_GE(std::stoi(limited->get_header_value("Retry-After")), 1);
  // Without configured keys a bearer token buys no bucket of its own: the
  // client's address is the key (random tokens used to bypass the limit).
  EXPECT_EQ(post("/v1/completions", R"({"prompt":"a","max_tokens":1})", {{"Authorization", "Bearer other"}})->status,
            429);
}

// With keys configured, each (verified) key has its own bucket, and an
// unknown key is refused before it reaches the limiter.
TEST_F(HttpServerTest, RateLimitIsPerVerifiedKey) {
  ServerOptions o;
  o.rate_limit_per_minute = 2;
  o.api_keys = {"key-a", "key-b"};
  start(o);
  const std::string body = R"({"prompt":"a","max_tokens":1})";
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(post("/v1/completions", body, {{"Authorization", "Bearer key-a"}})->status, 200);
  EXPECT_EQ(post("/v1/completions", body, {{"Authorization", "Bearer key-a"}})->status, 429);
  EXPECT_EQ(post("/v1/completions", body, {{"Authorization", "Bearer key-b"}})->status, 200);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(post("/v1/completions", body, {{"Authorization", "Bearer guess-" + std::to_string(i)}})->status, 401);
  }
}

TEST_F(HttpServerTest, SixtyFourConcurrentStreams) {
  start({}, std::chrono::milliseconds(2));
  std::vector<std::future<std::string>> fs;
  for (int i = 0; i < 64; ++i) {
    fs.push_back(std::async(std::launch::async, [this, i] {
      return raw_http(port_, "POST", "/v1/completions",
                      R"({"prompt":"a","stream":true,"max_tokens":32,"seed":)" + std::to_string(i) + "}");
    }));
  }
  for (int i = 0; i < 64; ++i) {
    const std::string resp = fs[static_cast<size_t>(i)].get();
    auto data = test::sse_data(resp);
    ASSERT_FALSE(data.empty()) << i;
    EXPECT_EQ(data.back(), "[DONE]");
    EXPECT_EQ(test::sse_text(data), expected_text(static_cast<uint64_t>(i), 32)) << i;
  }
}

// The issue's "at least 512 concurrent streaming connections": 512 streams
// of ~1 s each, opened at once, are all held open together (the backend sees
// 512 requests in flight) and each gets its whole text and [DONE].
TEST_F(HttpServerTest, FiveHundredTwelveStreamsAreHeldOpenTogether) {
  constexpr int kStreams = 512, kTokens = 40;
  start({}, std::chrono::milliseconds(25));
  std::vector<std::future<std::string>> fs;
  for (int i = 0; i < kStreams; ++i) {
    fs.push_back(std::async(std::launch::async, [this, i] {
      return raw_http(port_, "POST", "/v1/completions",
                      R"({"prompt":"a","stream":true,"max_tokens":40,"seed":)" + std::to_string(i) + "}");
    }));
  }
  for (int i = 0; i < kStreams; ++i) {
    const std::string resp = fs[static_cast<size_t>(i)].get();
    auto data = test::sse_data(resp);
    ASSERT_FALSE(data.empty()) << i;
    EXPECT_EQ(data.back(), "[DONE]") << i;
    EXPECT_EQ(test::sse_text(data), expected_text(static_cast<uint64_t>(i), kTokens)) << i;
  }
  EXPECT_EQ(backend_->peak_running.load(), kStreams);
  EXPECT_EQ(get("/health")->status, 200);
}

TEST_F(HttpServerTest, DisconnectMidStreamAbortsTheRequest) {
  start({}, std::chrono::milliseconds(5));
  const std::string part =
      raw_http(port_, "POST", "/v1/completions",
               R"({"prompt":"a","stream":true,"max_tokens":100000000,"ignore_eos":true})", "", 600);
  EXPECT_EQ(test::status_of(part), 400);  // max_tokens over the model length
  const std::string part2 = raw_http(port_, "POST", "/v1/completions",
                                     R"({"prompt":"a","stream":true,"max_tokens":500,"ignore_eos":true})", "", 800);
  EXPECT_EQ(test::status_of(part2), 200);
  for (int i = 0; i < 200 && backend_->aborted.load() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(backend_->aborted.load(), 1);
  const std::string metrics = get("/metrics")->body;
  EXPECT_EQ(test::metric(metrics, "parallm:num_requests_running"), 0);
  EXPECT_EQ(test::metric(metrics, "parallm:kv_cache_usage_perc{device=\"cpu:0\"}"), 0);
}

TEST_F(HttpServerTest, MetricsExposition) {
  start();
  ASSERT_EQ(post("/v1/completions", R"({"prompt":"a","max_tokens":5})")->status, 200);
  const std::string m = get("/metrics")->body;
  for (const char* name :
       {"parallm:num_requests_running", "parallm:num_requests_waiting", "parallm:prefix_cache_hit_rate",
        "parallm:num_preemptions_total", "parallm:prompt_tokens_total", "parallm:generation_tokens_total",
        "parallm:time_to_first_token_seconds_count", "parallm:time_per_output_token_seconds_count",
        "parallm:e2e_request_latency_seconds_count"}) {
    EXPECT_GE(test::metric(m, name), 0) << name;
  }
  EXPECT_EQ(test::metric(m, "parallm:e2e_request_latency_seconds_count"), 1);
  EXPECT_EQ(test::metric(m, "parallm:e2e_request_latency_seconds_bucket{le=\"+Inf\"}"), 1);
  EXPECT_EQ(test::metric(m, "parallm:generation_tokens_total"), 5);
  EXPECT_EQ(test::metric(m, "parallm:device_memory_used_bytes{device=\"cpu:0\"}"), 12345);
  EXPECT_NE(m.find("# TYPE parallm:time_to_first_token_seconds histogram"), std::string::npos);
}

// vLLM's families after a mix of requests: streamed and not, n = 2, a stop
// string, and a stream whose client hangs up. Every family exists with
// model_name, histograms are cumulative, per-request histograms count each
// delivered choice once, and the hung-up request is no success.
TEST_F(HttpServerTest, VllmMetricFamilies) {
  start({}, std::chrono::milliseconds(2));
  const auto& tok = backend_->tokenizer();
  const int64_t n_once = static_cast<int64_t>(tok.encode("Once", true).size());
  int64_t prompt_sum = 0, generation_sum = 0;  // over delivered choices
  // Not streamed, n = 2: two choices ending by length.
  auto r = post("/v1/completions", R"({"prompt":"Once","max_tokens":5,"n":2,"seed":1})");
  ASSERT_EQ(r->status, 200) << r->body;
  prompt_sum += 2 * n_once;
  generation_sum += json::parse(r->body)["usage"]["completion_tokens"].get<int64_t>();
  // Streamed completion, one choice.
  std::string resp =
      raw_http(port_, "POST", "/v1/completions",
               R"({"prompt":"Once","max_tokens":4,"seed":2,"stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_EQ(test::status_of(resp), 200) << resp;
  json usage;
  test::sse_text(test::sse_data(resp), nullptr, &usage);
  prompt_sum += usage["prompt_tokens"].get<int64_t>();
  generation_sum += usage["completion_tokens"].get<int64_t>();
  // Streamed chat, n = 2.
  resp = raw_http(port_, "POST", "/v1/chat/completions",
                  R"({"messages":[{"role":"user","content":"x"}],"max_tokens":3,"n":2,"seed":3,)"
                  R"("stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_EQ(test::status_of(resp), 200) << resp;
  test::sse_text(test::sse_data(resp), nullptr, &usage);
  prompt_sum += 2 * usage["prompt_tokens"].get<int64_t>();
  generation_sum += usage["completion_tokens"].get<int64_t>();
  // A stop string made of tokens 3 and 4 of seed 7's script: finish "stop" after 5 tokens.
  const std::string stop_str = tok.token_to_piece(script_token(7, 3)) + tok.token_to_piece(script_token(7, 4));
  ASSERT_EQ(expected_text(7, 4).find(stop_str), std::string::npos);
  r = post("/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 20}, {"seed", 7}, {"stop", stop_str}}.dump());
  ASSERT_EQ(r->status, 200) << r->body;
  ASSERT_EQ(json::parse(r->body)["choices"][0]["finish_reason"], "stop") << r->body;
  prompt_sum += n_once;
  generation_sum += json::parse(r->body)["usage"]["completion_tokens"].get<int64_t>();
  EXPECT_EQ(json::parse(r->body)["usage"]["completion_tokens"], 5);
  // A stream whose client hangs up after some tokens: aborted, never a success.
  const std::string part = raw_http(port_, "POST", "/v1/completions",
                                    R"({"prompt":"Once","stream":true,"max_tokens":400,"ignore_eos":true})", "", 800);
  ASSERT_EQ(test::status_of(part), 200);
  // Aborted in the backend: the stop string's sequence and the hung-up one.
  for (int i = 0; i < 250 && backend_->aborted.load() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(backend_->aborted.load(), 2);
  constexpr int kDelivered = 6;  // choices of delivered responses: 2 + 1 + 2 + 1
  constexpr int kLength = 5, kStop = 1;

  // The success counter is updated once each response is out: wait for it.
  test::PromText m;
  std::string text;
  for (int i = 0; i < 250; ++i) {
    text = get("/metrics")->body;
    m = test::PromText::parse(text);
    double ok = 0;
    for (const test::PromSample* s : m.find("vllm:request_success_total")) ok += s->value;
    if (ok >= kDelivered && m.value("parallm:request_success_total") >= 4) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(m.error.empty()) << "unparsed line: " << m.error;

  // Every vllm: sample carries model_name="tiny" and belongs to a family with # TYPE and # HELP.
  for (const test::PromSample& s : m.samples) {
    if (s.name.rfind("vllm:", 0) != 0) continue;
    EXPECT_EQ(s.labels.count("model_name"), 1u) << s.name;
    if (s.labels.count("model_name")) {
      EXPECT_EQ(s.labels.at("model_name"), "tiny") << s.name;
    }
    const std::string fam = m.family(s.name);
    EXPECT_TRUE(m.types.count(fam)) << "no # TYPE for " << s.name;
    EXPECT_TRUE(m.helps.count(fam)) << "no # HELP for " << s.name;
  }
  const std::map<std::string, std::string> families = {
      {"vllm:num_requests_running", "gauge"},
      {"vllm:num_requests_waiting", "gauge"},
      {"vllm:kv_cache_usage_perc", "gauge"},
      {"vllm:gpu_cache_usage_perc", "gauge"},
      {"vllm:num_preemptions_total", "counter"},
      {"vllm:prompt_tokens_total", "counter"},
      {"vllm:generation_tokens_total", "counter"},
      {"vllm:prefix_cache_queries_total", "counter"},
      {"vllm:prefix_cache_hits_total", "counter"},
      {"vllm:request_success_total", "counter"},
      {"vllm:time_to_first_token_seconds", "histogram"},
      {"vllm:inter_token_latency_seconds", "histogram"},
      {"vllm:time_per_output_token_seconds", "histogram"},
      {"vllm:e2e_request_latency_seconds", "histogram"},
      {"vllm:request_queue_time_seconds", "histogram"},
      {"vllm:request_prefill_time_seconds", "histogram"},
      {"vllm:request_decode_time_seconds", "histogram"},
      {"vllm:request_prompt_tokens", "histogram"},
      {"vllm:request_generation_tokens", "histogram"},
      {"vllm:request_time_per_output_token_seconds", "histogram"},
      {"vllm:request_max_num_generation_tokens", "histogram"},
  };
  for (const auto& [name, type] : families) {
    ASSERT_TRUE(m.types.count(name)) << "no # TYPE line for " << name;
    EXPECT_EQ(m.types.at(name), type) << name;
    if (type == "counter") {
      EXPECT_EQ(name.substr(name.size() - 6), "_total") << name;
    }
    if (type != "histogram") {
      EXPECT_FALSE(m.find(name).empty()) << name;
      continue;
    }
    // Buckets: bounds ascending, counts cumulative, +Inf last and equal to _count.
    auto buckets = m.find(name + "_bucket");
    ASSERT_GE(buckets.size(), 2u) << name;
    double prev_le = -1, prev_count = 0;
    for (const test::PromSample* b : buckets) {
      ASSERT_TRUE(b->labels.count("le")) << name;
      const std::string& le = b->labels.at("le");
      const double bound = le == "+Inf" ? INFINITY : std::stod(le);
      EXPECT_GT(bound, prev_le) << name << " le=" << le;
      EXPECT_GE(b->value, prev_count) << name << " le=" << le;
      prev_le = bound;
      prev_count = b->value;
    }
    EXPECT_EQ(buckets.back()->labels.at("le"), "+Inf") << name;
    EXPECT_EQ(buckets.back()->value, m.value(name + "_count")) << name;
    EXPECT_GE(m.value(name + "_sum"), 0) << name;
  }

  auto success = [&](const std::string& reason) {
    for (const test::PromSample* s : m.find("vllm:request_success_total")) {
      if (s->labels.count("finished_reason") && s->labels.at("finished_reason") == reason) return s->value;
    }
    return -1.0;
  };
  EXPECT_EQ(success("length"), kLength);
  EXPECT_EQ(success("stop"), kStop);
  EXPECT_EQ(success("abort"), 0);                          // the hung-up stream was not delivered
  EXPECT_EQ(m.value("parallm:request_success_total"), 4);  // responses, not choices
  // Per-request histograms: one observation per delivered choice.
  for (const char* name :
       {"vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds",
        "vllm:request_decode_time_seconds", "vllm:request_prompt_tokens", "vllm:request_generation_tokens",
        "vllm:time_per_output_token_seconds", "vllm:request_time_per_output_token_seconds"}) {
    EXPECT_EQ(m.value(std::string(name) + "_count"), kDelivered) << name;
  }
  // Once per delivered response, its longest choice: no more than all tokens, no less than the mean choice.
  EXPECT_EQ(m.value("vllm:request_max_num_generation_tokens_count"), m.value("parallm:request_success_total"));
  EXPECT_LE(m.value("vllm:request_max_num_generation_tokens_sum"), static_cast<double>(generation_sum));
  EXPECT_GE(m.value("vllm:request_max_num_generation_tokens_sum") * kDelivered, static_cast<double>(generation_sum));
  EXPECT_EQ(m.value("vllm:request_prompt_tokens_sum"), static_cast<double>(prompt_sum));
  EXPECT_EQ(m.value("vllm:request_generation_tokens_sum"), static_cast<double>(generation_sum));
  // The engine's queue and prefill times came through (the script's are fixed).
  EXPECT_NEAR(m.value("vllm:request_queue_time_seconds_sum"), kDelivered * kScriptQueueS, 1e-6);
  EXPECT_NEAR(m.value("vllm:request_prefill_time_seconds_sum"), kDelivered * kScriptPrefillS, 1e-6);
  // Per-token histograms: every first token seen (the hung-up stream's too), one gap per later token.
  const double ttft_count = m.value("vllm:time_to_first_token_seconds_count");
  const double itl_count = m.value("vllm:inter_token_latency_seconds_count");
  EXPECT_EQ(ttft_count, kDelivered + 1);
  EXPECT_GE(itl_count, static_cast<double>(generation_sum - kDelivered));
  EXPECT_LE(ttft_count + itl_count, m.value("parallm:generation_tokens_total"));
  // Gauges and counters: the engine's values, replica-wide.
  EXPECT_EQ(m.value("vllm:num_requests_running"), 0);
  EXPECT_EQ(m.value("vllm:num_requests_waiting"), 0);
  EXPECT_EQ(m.value("vllm:kv_cache_usage_perc"), 0);
  EXPECT_EQ(m.value("vllm:gpu_cache_usage_perc"), m.value("vllm:kv_cache_usage_perc"));
  EXPECT_EQ(m.value("vllm:generation_tokens_total"), m.value("parallm:generation_tokens_total"));
  EXPECT_EQ(m.value("vllm:prompt_tokens_total"), m.value("parallm:prompt_tokens_total"));
  EXPECT_EQ(m.value("vllm:prompt_tokens_total"), static_cast<double>(prompt_sum + n_once));  // + the hung-up one
  EXPECT_EQ(m.value("vllm:prefix_cache_queries_total"), m.value("vllm:prompt_tokens_total"));
  EXPECT_GT(m.value("vllm:prefix_cache_hits_total"), 0);
  EXPECT_LT(m.value("vllm:prefix_cache_hits_total"), m.value("vllm:prefix_cache_queries_total"));
  EXPECT_EQ(m.value("vllm:num_preemptions_total"), 0);
  // The parallm: families are still there.
  EXPECT_EQ(m.types.at("parallm:num_preemptions_total"), "counter");
  EXPECT_EQ(m.value("parallm:e2e_request_latency_seconds_count"), kDelivered);
}

}  // namespace
}  // namespace parallm
