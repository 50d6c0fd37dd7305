#include "loader/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "residency.h"
#include "status.h"

namespace vt {

namespace fs = std::filesystem;
using nlohmann::json;

std::unique_ptr<MappedFile> MappedFile::open(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
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

void MappedFile::release(size_t offset, size_t len) const {
  if (!data_ || len == 0) return;
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  size_t begin = (offset + page - 1) / page * page;  // only whole pages inside the range
  size_t end = (offset + len) / page * page;
  if (end > begin) madvise(const_cast<uint8_t *>(data_) + begin, end - begin, MADV_DONTNEED);
}

int64_t MappedFile::resident_bytes() const { return vt::resident_bytes(data_, size_); }

namespace {

json parse_json_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(VT_ERR_MISSING_FILE, "missing file " + path);
  try {
    return json::parse(in);
  } catch (const json::exception &e) {
    fail(VT_ERR_BAD_CHECKPOINT, path + " is not valid JSON: " + e.what());
  }
}

}  // namespace

void Checkpoint::add_file(const std::string &path) {
  auto file = MappedFile::open(path);
  const int file_index = int(files_.size());
  const size_t size = file->size();
  const std::string where = fs::path(path).filename().string();
  if (size < 8) fail(VT_ERR_TRUNCATED_CHECKPOINT, where + " is " + std::to_string(size) + " bytes: too short for a safetensors header");
  uint64_t header_len = 0;
  std::memcpy(&header_len, file->data(), 8);  // little-endian u64, as the format defines (all our targets are LE)
  if (header_len > size - 8)
    fail(VT_ERR_BAD_CHECKPOINT, where + ": header length " + std::to_string(header_len) + " runs past the end of the " +
                                    std::to_string(size) + "-byte file (corrupt or not a safetensors file)");
  json header;
  try {
    header = json::parse(file->data() + 8, file->data() + 8 + header_len);
  } catch (const json::exception &e) {
    fail(VT_ERR_BAD_CHECKPOINT, where + ": safetensors header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) fail(VT_ERR_BAD_CHECKPOINT, where + ": safetensors header is not a JSON object");
  const size_t data_start = 8 + size_t(header_len);
  const size_t data_size = size - data_start;
  for (auto &[name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    TensorInfo t;
    t.name = name;
    t.file = file_index;
    try {
      t.dtype_name = entry.at("dtype").get<std::string>();
      for (auto &d : entry.at("shape")) {
        int64_t v = d.get<int64_t>();
        if (v < 0) throw std::runtime_error("negative dimension");
        t.shape.push_back(v);
      }
      auto offs = entry.at("data_offsets");
      if (!offs.is_array() || offs.size() != 2) throw std::runtime_error("data_offsets is not a pair");
      uint64_t b = offs[0].get<uint64_t>(), e = offs[1].get<uint64_t>();
      if (e < b) throw std::runtime_error("data_offsets end before they begin");
      if (e > data_size)
        fail(VT_ERR_TRUNCATED_CHECKPOINT, where + ": tensor " + name + " needs bytes up to " + std::to_string(data_start + e) +
                                              " but the file has " + std::to_string(size) + " (truncated download?)");
      t.nbytes = size_t(e - b);
      t.data = file->data() + data_start + b;
    } catch (const Error &) {
      throw;
    } catch (const std::exception &ex) {
      fail(VT_ERR_BAD_CHECKPOINT, where + ": bad header entry for tensor " + name + ": " + ex.what());
    }
    t.dtype_known = dtype_from_safetensors(t.dtype_name, &t.dtype);
    if (t.dtype_known) {
      int64_t numel = 1;
      for (int64_t d : t.shape) numel *= d;
      if (size_t(numel) * dtype_size(t.dtype) != t.nbytes)
        fail(VT_ERR_BAD_CHECKPOINT, where + ": tensor " + name + " has " + std::to_string(t.nbytes) +
                                        " bytes but its shape and dtype need " + std::to_string(numel * dtype_size(t.dtype)));
    }
    if (tensors_.count(name)) fail(VT_ERR_BAD_CHECKPOINT, "tensor " + name + " appears in more than one file");
    tensors_.emplace(name, std::move(t));
  }
  files_.push_back(std::move(file));
}

std::unique_ptr<Checkpoint> Checkpoint::open(const std::string &dir) {
  std::unique_ptr<Checkpoint> ck(new Checkpoint());
  const fs::path root(dir);
  const fs::path single = root / "model.safetensors";
  const fs::path index = root / "model.safetensors.index.json";
  if (fs::exists(index)) {
    json j = parse_json_file(index.string());
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
    }
  } else if (fs::exists(single)) {
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
