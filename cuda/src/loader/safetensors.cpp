#include "loader/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "loader/json_file.h"
#include "loader/safetensors_header.h"
#include "residency.h"
#include "status.h"

namespace vt {

namespace fs = std::filesystem;
using nlohmann::json;

std::unique_ptr<MappedFile> MappedFile::open(const std::string &path) {
  // O_NONBLOCK: a FIFO in place of a shard would otherwise block the open until a writer came (files ignore it)
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) fail(VT_ERR_MISSING_FILE, "missing file " + path);
    fail(VT_ERR_BAD_CHECKPOINT, "cannot open " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(VT_ERR_BAD_CHECKPOINT, path + " is not a regular file");
  }
  std::unique_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = size_t(st.st_size);
  if (f->size_ > 0) {
    void *p = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      fail(VT_ERR_OUT_OF_MEMORY, "cannot map " + path + ": " + std::strerror(errno));
    }
    f->data_ = static_cast<const uint8_t *>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
  return f;
}

MappedFile::~MappedFile() {
  if (data_) munmap(const_cast<uint8_t *>(data_), size_);
}

namespace {
// The whole pages inside [offset, offset+len): [begin, end), end <= begin when there are none.
std::pair<size_t, size_t> inner_pages(size_t offset, size_t len) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  return {(offset + page - 1) / page * page, (offset + len) / page * page};
}
}  // namespace

void MappedFile::release(size_t offset, size_t len) const {
  const auto [begin, end] = inner_pages(offset, len);  // only whole pages inside the range
  if (data_ && end > begin) madvise(const_cast<uint8_t *>(data_) + begin, end - begin, MADV_DONTNEED);
}

int64_t MappedFile::resident_bytes() const { return vt::resident_bytes(data_, size_); }

int64_t MappedFile::resident_bytes(size_t offset, size_t len) const {
  const auto [begin, end] = inner_pages(offset, len);
  return data_ && end > begin ? vt::resident_bytes(data_ + begin, end - begin) : 0;
}

void MappedFile::read_only(const std::vector<std::pair<size_t, size_t>> &wanted) const {
  if (!data_) return;
  madvise(const_cast<uint8_t *>(data_), size_, MADV_RANDOM);
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  for (const auto &[offset, len] : wanted) {
    const size_t begin = offset / page * page, end = std::min(size_, offset + len);
    if (end > begin) madvise(const_cast<uint8_t *>(data_) + begin, end - begin, MADV_WILLNEED);
  }
}

void MappedFile::drop(size_t offset, size_t len) const {
  const auto [begin, end] = inner_pages(offset, len);
  if (!data_ || end <= begin) return;
  release(offset, len);
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return;  // (only advice: the pages stay reclaimable either way)
  posix_fadvise(fd, off_t(begin), off_t(end - begin), POSIX_FADV_DONTNEED);
  ::close(fd);
}

int64_t Checkpoint::skip(const std::vector<std::string> &prefixes) {
  skipped_.clear();
  std::vector<std::vector<std::pair<size_t, size_t>>> wanted(files_.size());
  int64_t bytes = 0;
  for (const auto &[name, t] : tensors_) {
    bool skipped = false;
    for (const std::string &p : prefixes) skipped |= name.rfind(p, 0) == 0;
    const size_t offset = size_t(static_cast<const uint8_t *>(t.data) - files_[size_t(t.file)]->data());
    if (skipped) skipped_.push_back(&t), bytes += int64_t(t.nbytes);
    else wanted[size_t(t.file)].push_back({offset, t.nbytes});
  }
  if (skipped_.empty()) return 0;
  // A file holding skipped tensors is dropped whole and read back only where the used ones lie: the page cache
  // keeps large folios, which a drop of the skipped ranges alone leaves wherever one also holds a used tensor's
  // bytes (and a tiny checkpoint's tower shares nearly all of its). Nothing has read the used tensors' data yet
  // but the small vectors binding copied.
  std::vector<bool> has_skipped(files_.size(), false);
  for (const TensorInfo *t : skipped_) has_skipped[size_t(t->file)] = true;
  for (size_t f = 0; f < files_.size(); ++f) {
    if (!has_skipped[f]) continue;
    files_[f]->drop(0, files_[f]->size());
    files_[f]->read_only(wanted[f]);
  }
  return bytes;
}

int64_t Checkpoint::skipped_resident_bytes() const {
  int64_t bytes = 0;
  for (const TensorInfo *t : skipped_) {
    const MappedFile &f = *files_[size_t(t->file)];
    bytes += f.resident_bytes(size_t(static_cast<const uint8_t *>(t->data) - f.data()), t->nbytes);
  }
  return bytes;
}

void Checkpoint::add_file(const std::string &path) {
  auto file = MappedFile::open(path);
  const int file_index = int(files_.size());
  const uint64_t size = file->size();
  const std::string where = fs::path(path).filename().string();
  uint64_t header_len = 0;
  if (size >= 8) std::memcpy(&header_len, file->data(), 8);  // little-endian u64, as the format defines (all our targets are LE)
  check_safetensors_header_length(header_len, size, where);
  const std::string_view text(reinterpret_cast<const char *>(file->data()) + 8, size_t(header_len));
  const uint64_t data_start = 8 + header_len;
  const SafetensorsHeader header = parse_safetensors_header(text, size - data_start, where);
  for (const HeaderTensor &h : header.tensors) {
    TensorInfo t;
    t.name = h.name;
    t.file = file_index;
    t.dtype_name = h.dtype;
    t.shape = h.shape;
    t.nbytes = size_t(h.end - h.begin);
    t.data = file->data() + data_start + h.begin;  // in the file: parse_safetensors_header checked every range
    t.dtype_known = dtype_from_safetensors(t.dtype_name, &t.dtype);
    if (tensors_.count(h.name)) fail(VT_ERR_BAD_CHECKPOINT, "tensor " + h.name + " appears in more than one file");
    tensors_.emplace(h.name, std::move(t));
  }
  files_.push_back(std::move(file));
}

std::unique_ptr<Checkpoint> Checkpoint::open(const std::string &dir) {
  std::unique_ptr<Checkpoint> ck(new Checkpoint());
  const fs::path root(dir);
  const fs::path single = root / "model.safetensors";
  const fs::path index = root / "model.safetensors.index.json";
  std::error_code ec;  // the error_code forms: a permission problem is then "absent", not a filesystem_error
  if (fs::exists(index, ec)) {
    const auto text = read_checkpoint_file(index);
    if (!text) fail(VT_ERR_MISSING_FILE, "missing file " + index.string());
    const json j = parse_json_object(*text, index.string());
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      fail(VT_ERR_BAD_CHECKPOINT, index.string() + " has no weight_map object");
    std::set<std::string> shards;
    for (auto &[name, file] : j["weight_map"].items()) {
      if (!file.is_string()) fail(VT_ERR_BAD_CHECKPOINT, index.string() + ": weight_map entry for " + name + " is not a file name");
      std::string f = file.get<std::string>();
      if (f.find('/') != std::string::npos || f.find("..") != std::string::npos)
        fail(VT_ERR_BAD_CHECKPOINT, index.string() + ": shard name " + f + " must be a plain file name");
      shards.insert(f);
    }
    if (shards.empty()) fail(VT_ERR_BAD_CHECKPOINT, index.string() + " names no shards");
    for (const auto &s : shards) ck->add_file((root / s).string());
    for (auto &[name, file] : j["weight_map"].items()) {
      auto it = ck->tensors_.find(name);
      if (it == ck->tensors_.end())
        fail(VT_ERR_BAD_CHECKPOINT, "the index places " + name + " in " + file.get<std::string>() + " but no shard holds it");
      const std::string holder = fs::path(ck->files_[size_t(it->second.file)]->path()).filename().string();
      if (holder != file.get<std::string>())
        fail(VT_ERR_BAD_CHECKPOINT, "the index places " + name + " in " + file.get<std::string>() + " but " + holder + " holds it");
    }
  } else if (fs::exists(single, ec)) {
    ck->add_file(single.string());
  } else {
    fail(VT_ERR_MISSING_FILE, "no model.safetensors or model.safetensors.index.json in " + dir +
                                  " (only safetensors checkpoints are supported; convert .bin/.pth first)");
  }
  return ck;
}

const TensorInfo *Checkpoint::find(const std::string &name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace vt
