#include "loader/json_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "status.h"

namespace vt {

std::optional<std::string> read_checkpoint_file(const std::filesystem::path &path) {
  const std::string p = path.string();
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever (regular files ignore it).
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    fail(VT_ERR_BAD_CHECKPOINT, "cannot open " + p + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const bool dir = S_ISDIR(st.st_mode);
    ::close(fd);
    fail(VT_ERR_BAD_CHECKPOINT, p + (dir ? " is a directory" : " is not a regular file") + ", not a JSON file");
  }
  if (uint64_t(st.st_size) > kMaxCheckpointJsonBytes) {
    ::close(fd);
    fail(VT_ERR_BAD_CHECKPOINT, p + " is " + std::to_string(st.st_size) + " bytes, more than any checkpoint JSON file (" +
                                    std::to_string(kMaxCheckpointJsonBytes) + "): corrupt?");
  }
  std::string text(size_t(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      fail(VT_ERR_BAD_CHECKPOINT, "cannot read " + p + ": " + std::strerror(err));
    }
    if (n == 0) break;  // the file shrank while we read it: parse what is there
    got += size_t(n);
  }
  ::close(fd);
  text.resize(got);
  return text;
}

nlohmann::json parse_json_object(std::string_view text, const std::string &name) {
  // nlohmann stops at a NUL byte as if the text ended there ("{}\0junk" would parse); Python's json refuses it.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    fail(VT_ERR_BAD_CHECKPOINT, name + " is not valid JSON: a NUL byte at offset " + std::to_string(nul));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception &e) {
    fail(VT_ERR_BAD_CHECKPOINT, name + " is not valid JSON: " + e.what());
  }
  if (!j.is_object()) fail(VT_ERR_BAD_CHECKPOINT, name + " is not a JSON object");
  return j;
}

}  // namespace vt
