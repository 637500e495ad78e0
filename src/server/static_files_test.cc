#include "server/static_files.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

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

}  // namespace
}  // namespace opsight::server
