#include "server/static_files.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <fstream>
#include <thread>

namespace opsight::server {
namespace {

class StaticFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = std::filesystem::temp_directory_path() /
            ("opsight-static-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(base_ / "web/assets");
    std::ofstream(base_ / "web/index.html") << "<html>";
    std::ofstream(base_ / "web/assets/app.js") << "1";
    std::ofstream(base_ / "secret.txt") << "secret";
    std::filesystem::create_symlink(base_ / "secret.txt", base_ / "web/link.txt");
  }
  void TearDown() override { std::filesystem::remove_all(base_); }
  std::filesystem::path base_;
};

TEST_F(StaticFiles, ServesFilesInsideTheRoot) {
  auto root = base_ / "web";
  EXPECT_EQ(resolve_static_path(root, "/"), std::filesystem::canonical(root / "index.html"));
  EXPECT_EQ(resolve_static_path(root, "/assets/app.js"),
            std::filesystem::canonical(root / "assets/app.js"));
}

TEST_F(StaticFiles, RefusesEveryWayOut) {
  auto root = base_ / "web";
  for (const char* path : {"/../secret.txt", "/assets/../../secret.txt", "/./index.html",
                           "//etc/passwd", "/assets//app.js", "/..", "/assets\\..\\..\\secret.txt",
                           "/link.txt", "index.html", "/missing.js", "/assets", "/index.html\n"})
    EXPECT_EQ(resolve_static_path(root, path), std::nullopt) << path;
  EXPECT_EQ(resolve_static_path(root, std::string_view("/index.html\0.js", 15)), std::nullopt);
}

TEST_F(StaticFiles, ContentTypes) {
  EXPECT_EQ(content_type_of("a/index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(content_type_of("a.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(content_type_of("a.css"), "text/css; charset=utf-8");
  EXPECT_EQ(content_type_of("a.bin"), "application/octet-stream");
}

std::string gunzip(const std::string& compressed) {
  z_stream stream{};
  EXPECT_EQ(inflateInit2(&stream, 15 + 16), Z_OK);
  std::string out(1 << 20, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  inflateEnd(&stream);
  return out;
}

TEST(StaticFileCompression, GzipRoundTripsAndAcceptEncodingIsRead) {
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "function f" + std::to_string(i) + "() { return 1; }\n";
  std::string compressed = gzip_compress(text);
  ASSERT_FALSE(compressed.empty());
  EXPECT_LT(compressed.size(), text.size() / 4);
  EXPECT_EQ(gunzip(compressed), text);
  EXPECT_TRUE(accepts_gzip("gzip, deflate, br"));
  EXPECT_TRUE(accepts_gzip("br;q=1.0, GZIP;q=0.5"));
  EXPECT_TRUE(accepts_gzip("*"));
  EXPECT_FALSE(accepts_gzip("br"));
  EXPECT_FALSE(accepts_gzip("gzip;q=0"));
  EXPECT_FALSE(accepts_gzip(""));
  EXPECT_FALSE(accepts_gzip("x-gzipped"));
}

TEST_F(StaticFiles, TheCacheCompressesTextOnceAndRereadsAChangedFile) {
  std::string script(4000, 'a');
  std::ofstream(base_ / "web/assets/big.js") << script;
  StaticFileCache cache;
  auto first = cache.get(base_ / "web/assets/big.js");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->bytes, script);
  EXPECT_EQ(gunzip(first->gzip), script);
  EXPECT_EQ(first->content_type, content_type_of(base_ / "web/assets/big.js"));
  EXPECT_EQ(cache.get(base_ / "web/assets/big.js"), first);  // the same bytes, not read again
  EXPECT_TRUE(cache.get(base_ / "web/assets/app.js")->gzip.empty());  // too small to bother
  std::ofstream(base_ / "web/assets/big.js") << "changed";
  auto second = cache.get(base_ / "web/assets/big.js");
  EXPECT_EQ(second->bytes, "changed");
  EXPECT_EQ(cache.get(base_ / "web/missing.js"), nullptr);
}

}  // namespace
}  // namespace opsight::server
