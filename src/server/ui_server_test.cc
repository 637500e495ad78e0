// The UI server over real HTTP on 127.0.0.1: the API and the app's files answer, the
// Host check and the token hold, hostile and malformed requests get 4xx (and the server
// keeps serving), and docs/ui-openapi.json names exactly the routes the server has.
#include "server/ui_server.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "server/server_test_fixtures.hpp"
#include "server/static_files.hpp"

namespace opsight::server {
namespace {

using nlohmann::json;

class UiServerTest : public ::testing::Test {
 protected:
  UiServerTest() : store_(::testing::UnitTest::GetInstance()->current_test_info()->name()) {
    store_.add_two_runs();
    web_root_ = store_.folder() / "web";
    std::filesystem::create_directories(web_root_ / "assets");
    std::ofstream(web_root_ / "index.html") << "<!doctype html><title>opsight</title>";
    std::ofstream(web_root_ / "assets/app.js") << "console.log(1)";
    std::ofstream(store_.folder() / "secret.txt") << "TOP-SECRET-CONTENT";
  }

  std::unique_ptr<UiServer> start(const std::string& host = "127.0.0.1") {
    UiServerOptions options;
    options.host = host;
    options.web_root = web_root_;
    options.api.store_path = store_.path();
    auto server = std::make_unique<UiServer>(options);
    std::string problem = server->start();
    EXPECT_EQ(problem, "");
    return server;
  }

  // Sends `request` as is on a new connection and returns what came back.
  static std::string raw_exchange(int port, const std::string& request) {
    int socket_fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(socket_fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      ::close(socket_fd);
      return "connect failed";
    }
    timeval timeout{2, 0};  // a request the server waits on for more bytes ends here
    ::setsockopt(socket_fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    (void)::send(socket_fd, request.data(), request.size(), MSG_NOSIGNAL);
    std::string reply;
    char buffer[4096];
    ssize_t got = 0;
    while ((got = ::recv(socket_fd, buffer, sizeof(buffer), 0)) > 0)
      reply.append(buffer, static_cast<size_t>(got));
    ::close(socket_fd);
    return reply;
  }

  testing::TemporaryStore store_;
  std::filesystem::path web_root_;
};

TEST_F(UiServerTest, ServesTheApiAndTheApp) {
  auto server = start();
  httplib::Client client("127.0.0.1", server->port());
  auto runs = client.Get("/api/runs", {{"Accept-Encoding", "gzip, deflate, br"}});
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->status, 200);
  EXPECT_EQ(json::parse(runs->body)["runs"].size(), 2u);
  EXPECT_EQ(runs->get_header_value("Content-Type"), "application/json; charset=utf-8");
  EXPECT_EQ(runs->get_header_value("Content-Encoding"), "");  // never compressed: see api.hpp
  auto index = client.Get("/");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);
  EXPECT_EQ(index->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(index->get_header_value("Content-Security-Policy").find("default-src 'self'"),
            std::string::npos);
  auto script = client.Get("/assets/app.js");
  ASSERT_TRUE(script);
  EXPECT_EQ(script->body, "console.log(1)");
  // A larger script goes gzip-compressed once (never Brotli-compressed per request),
  // and as it is to a client that does not take gzip.
  std::string big;
  for (int i = 0; i < 500; ++i) big += "console.log(" + std::to_string(i) + ");\n";
  std::ofstream(web_root_ / "assets/big.js") << big;
  httplib::Client raw("127.0.0.1", server->port());
  raw.set_decompress(false);
  for (int repeat = 0; repeat < 2; ++repeat) {
    auto compressed = raw.Get("/assets/big.js", {{"Accept-Encoding", "gzip, deflate, br"}});
    ASSERT_TRUE(compressed);
    EXPECT_EQ(compressed->status, 200);
    EXPECT_EQ(compressed->get_header_value("Content-Encoding"), "gzip");
    EXPECT_EQ(compressed->get_header_value("Vary"), "Accept-Encoding");
    EXPECT_EQ(compressed->body, gzip_compress(big));
  }
  auto plain = raw.Get("/assets/big.js", {{"Accept-Encoding", "br"}});
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->get_header_value("Content-Encoding"), "");
  EXPECT_EQ(plain->body, big);
  auto decoded = client.Get("/assets/big.js", {{"Accept-Encoding", "gzip"}});
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->body, big);
  EXPECT_EQ(server->url("/runs"), "http://127.0.0.1:" + std::to_string(server->port()) + "/#/runs");
  EXPECT_TRUE(server->access_token().empty());
}

TEST_F(UiServerTest, NoPathLeavesTheAppFolder) {
  auto server = start();
  for (const char* path : {"/%2e%2e/secret.txt", "/assets/%2e%2e/%2e%2e/secret.txt",
                           "/..%2fsecret.txt", "/assets%5c..%5c..%5csecret.txt"}) {
    std::string reply = raw_exchange(server->port(), std::string("GET ") + path +
                                                         " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                                         "Connection: close\r\n\r\n");
    EXPECT_EQ(reply.find("TOP-SECRET-CONTENT"), std::string::npos) << path << ": " << reply;
    EXPECT_TRUE(reply.starts_with("HTTP/1.1 404") || reply.starts_with("HTTP/1.1 400"))
        << path << ": " << reply;
  }
}

TEST_F(UiServerTest, ALoopbackServerRefusesForeignHostNames) {
  auto server = start();
  std::string reply =
      raw_exchange(server->port(),
                   "GET /api/runs HTTP/1.1\r\nHost: evil.example:80\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 403")) << reply;
  EXPECT_NE(reply.find("127.0.0.1 or localhost only"), std::string::npos);
}

TEST_F(UiServerTest, AnyOtherAddressNeedsTheToken) {
  auto server = start("0.0.0.0");
  const std::string& token = server->access_token();
  ASSERT_EQ(token.size(), 32u);
  EXPECT_NE(server->url().find("?token=" + token), std::string::npos);
  httplib::Client client("127.0.0.1", server->port());
  auto refused = client.Get("/api/runs");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  EXPECT_NE(refused->body.find("access token"), std::string::npos);
  auto wrong = client.Get("/api/runs", {{"Authorization", "Bearer " + std::string(32, '0')}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto by_header = client.Get("/api/runs", {{"Authorization", "Bearer " + token}});
  ASSERT_TRUE(by_header);
  EXPECT_EQ(by_header->status, 200);
  auto by_query = client.Get(("/api/runs?token=" + token).c_str());
  ASSERT_TRUE(by_query);
  EXPECT_EQ(by_query->status, 200);
  auto app = client.Get("/");  // the app's files are not secret; its data is
  ASSERT_TRUE(app);
  EXPECT_EQ(app->status, 200);
  // RFC 6750: the scheme is case-insensitive.
  auto lowercase = client.Get("/api/runs", {{"Authorization", "bearer " + token}});
  ASSERT_TRUE(lowercase);
  EXPECT_EQ(lowercase->status, 200);
  // The Host is checked in token mode too: a DNS name nobody allowed is refused, with the
  // token or without, for the API and the app alike.
  for (const std::string& path : {"/api/runs?token=" + token, std::string("/")}) {
    std::string reply = raw_exchange(server->port(), "GET " + path +
                                                         " HTTP/1.1\r\nHost: evil.example:80\r\n"
                                                         "Connection: close\r\n\r\n");
    EXPECT_TRUE(reply.starts_with("HTTP/1.1 403")) << reply;
    EXPECT_NE(reply.find("--allow-host"), std::string::npos) << reply;
  }
}

TEST_F(UiServerTest, ANameAllowedByTheUserIsAnsweredInTokenMode) {
  UiServerOptions options;
  options.host = "0.0.0.0";
  options.web_root = web_root_;
  options.allowed_hosts = {"ui.example"};
  options.api.store_path = store_.path();
  UiServer server(options);
  ASSERT_EQ(server.start(), "");
  std::string reply = raw_exchange(server.port(),
                                   "GET /api/runs HTTP/1.1\r\nHost: UI.example:8080"
                                   "\r\nAuthorization: BEARER " +
                                       server.access_token() + "\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 200")) << reply;
}

// Every answer, the API's and its errors included, carries the headers docs/ui.md promises.
TEST_F(UiServerTest, EveryAnswerCarriesNosniffTheCspAndNoReferrer) {
  auto server = start();
  httplib::Client client("127.0.0.1", server->port());
  for (const char* path : {"/api/runs", "/api/runs/999999", "/", "/assets/app.js", "/missing"}) {
    auto answer = client.Get(path);
    ASSERT_TRUE(answer) << path;
    EXPECT_EQ(answer->get_header_value("X-Content-Type-Options"), "nosniff") << path;
    EXPECT_NE(answer->get_header_value("Content-Security-Policy").find("default-src 'self'"),
              std::string::npos)
        << path;
    EXPECT_EQ(answer->get_header_value("Referrer-Policy"), "no-referrer") << path;
  }
}

// A wrong method is 405 with Allow, an oversized body 413, a long request line 414, and a
// malformed request 400: each message names the cause.
TEST_F(UiServerTest, RefusalsNameTheirCause) {
  auto server = start();
  auto exchange = [&](const std::string& head, const std::string& rest = "") {
    return raw_exchange(server->port(), head + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + rest +
                                            "Connection: close\r\n\r\n");
  };
  for (const char* head : {"POST /", "PUT /index.html", "DELETE /assets/app.js", "OPTIONS /",
                           "OPTIONS /api/runs", "TRACE /"}) {
    std::string reply = exchange(head, "Content-Length: 0\r\n");
    EXPECT_TRUE(reply.starts_with("HTTP/1.1 405")) << head << " -> " << reply;
    EXPECT_NE(reply.find("is not allowed on /"), std::string::npos) << head << " -> " << reply;
    EXPECT_NE(reply.find("Allow: "), std::string::npos) << head << " -> " << reply;
  }
  EXPECT_NE(exchange("POST /", "Content-Length: 0\r\n").find("Allow: GET, HEAD"),
            std::string::npos);
  std::string too_big =
      raw_exchange(server->port(),
                   "PUT /api/runs/1/tags/k HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: "
                   "70000\r\nConnection: close\r\n\r\n" +
                       std::string(70000, 'x'));
  EXPECT_TRUE(too_big.starts_with("HTTP/1.1 413")) << too_big;
  EXPECT_NE(too_big.find("larger than 65536 bytes"), std::string::npos) << too_big;
  std::string too_long = exchange("GET /" + std::string(20000, 'a'));
  EXPECT_TRUE(too_long.starts_with("HTTP/1.1 414")) << too_long;
  EXPECT_NE(too_long.find("request line longer than 8192 bytes"), std::string::npos) << too_long;
  std::string garbage = raw_exchange(server->port(), "GARBAGE\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(garbage.starts_with("HTTP/1.1 400")) << garbage;
  EXPECT_NE(garbage.find("malformed request"), std::string::npos) << garbage;
}

TEST_F(UiServerTest, MalformedRequestsGet4xxAndTheServerGoesOn) {
  auto server = start();
  const std::vector<std::string> requests = {
      "GARBAGE\r\nConnection: close\r\n\r\n",
      "GET /api/runs HTTP/9.9\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
      "GET /api/runs/1/tiles?track=%ZZ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
      "POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 70000\r\n"
      "Connection: close\r\n\r\n" +
          std::string(70000, 'x'),
      "GET /api/runs/1/tiles?track=0&start=a&end=b&resolution=c HTTP/1.1\r\nHost: "
      "127.0.0.1\r\nConnection: close\r\n\r\n",
      std::string(
          "GET /api/runs/\x01\xff HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"),
      "GET /" + std::string(20000, 'a') +
          " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
  };
  for (const std::string& request : requests) {
    std::string reply = raw_exchange(server->port(), request);
    EXPECT_TRUE(reply.starts_with("HTTP/1.1 4")) << request.substr(0, 60) << " -> " << reply;
  }
  httplib::Client client("127.0.0.1", server->port());
  auto tiles = client.Get("/api/runs/1/tiles?track=0&start=a&end=b&resolution=c");
  ASSERT_TRUE(tiles);
  EXPECT_EQ(tiles->status, 400);
  EXPECT_NE(json::parse(tiles->body)["error"].get<std::string>().find("'start': 'a'"),
            std::string::npos);
  auto still = client.Get("/api/runs");
  ASSERT_TRUE(still);
  EXPECT_EQ(still->status, 200);
}

// Parallel clients (a browser's burst of tile requests) each get their own right answer.
TEST_F(UiServerTest, ParallelRequestsEachGetTheirAnswer) {
  auto server = start();
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int client_index = 0; client_index < 6; ++client_index)
    clients.emplace_back([&, client_index] {
      httplib::Client client("127.0.0.1", server->port());
      for (int i = 0; i < 10; ++i) {
        std::string run = std::to_string(1 + (client_index + i) % 2);
        auto response = client.Get(("/api/runs/" + run + "/report/summary").c_str());
        if (!response || response->status != 200 ||
            json::parse(response->body).at(0).at("count") != 20)
          failures.fetch_add(1);
        auto detail = client.Get(("/api/runs/" + run).c_str());
        if (!detail || json::parse(detail->body).at("id") != std::stoi(run)) failures.fetch_add(1);
      }
    });
  for (auto& client : clients) client.join();
  EXPECT_EQ(failures.load(), 0);
}

// docs/ui-openapi.json documents every route the server has, and nothing else; each
// documented GET answers on the real server (not "no API route"). Every operation with its
// own method, its statuses and the shapes of its answers against the schemas:
// tests/integration/test_ui_openapi.py.
TEST_F(UiServerTest, TheOpenApiFileNamesTheServersRoutes) {
  std::ifstream file(std::string(OPSIGHT_SOURCE_DIR) + "/docs/ui-openapi.json");
  ASSERT_TRUE(file) << "docs/ui-openapi.json is missing";
  json spec = json::parse(file);
  EXPECT_EQ(spec["openapi"].get<std::string>().substr(0, 2), "3.");
  std::set<std::pair<std::string, std::string>> documented, served;
  for (const auto& [path, operations] : spec["paths"].items())
    for (const auto& [method, operation] : operations.items()) {
      std::string upper = method;
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      documented.insert({upper, path});
      EXPECT_TRUE(operation.contains("responses")) << method << " " << path;
    }
  for (const ApiRoute& route : api_routes())
    served.insert({std::string(route.method), std::string(route.path)});
  EXPECT_EQ(documented, served);

  auto server = start();
  httplib::Client client("127.0.0.1", server->port());
  for (const auto& [method, path] : served) {
    if (method != "GET") continue;
    std::string concrete = path;
    for (auto [name, value] : {std::pair{"{run}", "1"}, {"{view}", "summary"}, {"{row}", "0"}})
      if (auto at = concrete.find(name); at != std::string::npos)
        concrete.replace(at, std::string(name).size(), value);
    auto response = client.Get(concrete.c_str());
    ASSERT_TRUE(response) << concrete;
    EXPECT_LT(response->status, 500) << concrete << ": " << response->body;
    EXPECT_EQ(response->body.find("no API route"), std::string::npos) << concrete;
  }
}

}  // namespace
}  // namespace opsight::server
