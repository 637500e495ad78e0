#include "server/access_control.hpp"

#include <gtest/gtest.h>

namespace opsight::server {
namespace {

TEST(AccessControl, LoopbackHosts) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"})
    EXPECT_TRUE(is_loopback_host(host)) << host;
  for (const char* host :
       {"0.0.0.0", "192.168.1.2", "127.0.0.1.evil.com", "localhost.evil", "", "127.0.0", "::"})
    EXPECT_FALSE(is_loopback_host(host)) << host;
}

TEST(AccessControl, HostHeadersOfALoopbackServer) {
  for (const char* header : {"127.0.0.1:8123", "localhost:80", "localhost", "[::1]:9000"})
    EXPECT_TRUE(loopback_host_header_allowed(header)) << header;
  for (const char* header :
       {"evil.com:8123", "127.0.0.1.nip.io:8123", "", "[::1", "[::1]x", "attacker:127.0.0.1"})
    EXPECT_FALSE(loopback_host_header_allowed(header)) << header;
}

TEST(AccessControl, HostHeadersOfAServerOnAnyOtherAddress) {
  const std::vector<std::string> allowed = {"gpu-box", "gpu-box.lab.example", "ui.example:443"};
  for (const char* header :
       {"10.0.0.7:8123", "192.168.1.2", "[fe80::1]:80", "[::1]:9000", "localhost:8123",
        "GPU-BOX:8123", "gpu-box.lab.example.:8123", "ui.example", "gpu-box"})
    EXPECT_TRUE(remote_host_header_allowed(header, allowed)) << header;
  // A DNS name nobody allowed is what a rebinding attack sends; so are malformed headers.
  for (const char* header : {"evil.example:8123", "gpu-box.evil.example", "10.0.0.7.nip.io:80", "",
                             "[::1", "1.2.3.4.5", "1..2.3", "1234.1.1.1", "[fe80::zz]"})
    EXPECT_FALSE(remote_host_header_allowed(header, allowed)) << header;
  EXPECT_EQ(host_of_host_header("Example.COM.:80"), "example.com");
  EXPECT_FALSE(machine_host_names().empty());  // gethostname() answers on every Linux
}

TEST(AccessControl, TokensAreRandomHexAndComparedWhole) {
  std::string token = make_access_token();
  EXPECT_EQ(token.size(), 32u);
  EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(token, make_access_token());
  EXPECT_TRUE(tokens_equal(token, token));
  EXPECT_FALSE(tokens_equal(token, token.substr(0, 31)));
  EXPECT_FALSE(tokens_equal(token, token.substr(0, 31) + (token[31] == 'a' ? "b" : "a")));
  EXPECT_FALSE(tokens_equal("", ""));
}

TEST(AccessControl, TokenOfRequestPrefersTheAuthorizationHeader) {
  EXPECT_EQ(token_of_request("Bearer abc", "def", "ghi"), "abc");
  EXPECT_EQ(token_of_request("Basic xyz", "def", "ghi"), "def");
  // RFC 6750: the scheme is case-insensitive, then one or more spaces.
  EXPECT_EQ(token_of_request("bearer abc", "", ""), "abc");
  EXPECT_EQ(token_of_request("BEARER   abc", "", ""), "abc");
  EXPECT_EQ(token_of_request("Bearerabc", "", ""), std::nullopt);
  EXPECT_EQ(token_of_request("Bearer ", "", "ghi"), "ghi");
  EXPECT_EQ(token_of_request("", "", "ghi"), "ghi");
  EXPECT_EQ(token_of_request("", "", ""), std::nullopt);
}

}  // namespace
}  // namespace opsight::server
