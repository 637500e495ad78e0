// The file a session records into: write(2) and writev(2) straight from the recorded
// chunks, so that what was written survives the process.
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "record/recorder.hpp"

namespace opsight::record {

std::unique_ptr<ByteSink> open_file_sink(const std::string& path, std::string* error) {
  class FileSink : public ByteSink {
   public:
    FileSink(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
    ~FileSink() override { ::close(fd_); }
    bool write(std::string_view bytes) override {
      while (!bytes.empty()) {
        ssize_t written = ::write(fd_, bytes.data(), bytes.size());
        if (written < 0) {
          if (errno == EINTR) continue;
          error_ = path_ + ": cannot write: " + std::strerror(errno);
          return false;
        }
        bytes.remove_prefix(static_cast<size_t>(written));
      }
      return true;
    }
    // Gathers the pieces with writev, a batch of up to kBatch at a time, resuming after
    // partial writes.
    bool write_pieces(const std::vector<std::string_view>& pieces) override {
      static constexpr size_t kBatch = 512;
      std::vector<iovec> vectors;
      vectors.reserve(std::min(pieces.size(), kBatch));
      for (size_t first = 0; first < pieces.size(); first += kBatch) {
        vectors.clear();
        for (size_t i = first; i < std::min(pieces.size(), first + kBatch); ++i)
          if (!pieces[i].empty())
            vectors.push_back({const_cast<char*>(pieces[i].data()), pieces[i].size()});
        size_t done = 0;
        while (done < vectors.size()) {
          ssize_t written =
              ::writev(fd_, vectors.data() + done, static_cast<int>(vectors.size() - done));
          if (written < 0) {
            if (errno == EINTR) continue;
            error_ = path_ + ": cannot write: " + std::strerror(errno);
            return false;
          }
          auto left = static_cast<size_t>(written);
          while (done < vectors.size() && left >= vectors[done].iov_len)
            left -= vectors[done++].iov_len;
          if (done < vectors.size()) {
            vectors[done].iov_base = static_cast<char*>(vectors[done].iov_base) + left;
            vectors[done].iov_len -= left;
          }
        }
      }
      return true;
    }
    std::string error() const override { return error_; }

   private:
    int fd_;
    std::string path_;
    std::string error_;
  };
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = path + ": cannot open for writing: " + std::strerror(errno);
    return nullptr;
  }
  return std::make_unique<FileSink>(fd, path);
}

}  // namespace opsight::record
