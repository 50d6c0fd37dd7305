// A checkpoint's tensors, memory-mapped read-only from one model.safetensors or from the shards that
// model.safetensors.index.json names. Every header is validated against its file before any tensor is used, by the
// safetensors library's rules and a few stricter ones (loader/safetensors_header.h): a malformed header is
// ERR_BAD_CHECKPOINT, a data range past the end of the file ERR_TRUNCATED_CHECKPOINT.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "dtype.h"

namespace vt {

struct TensorInfo {
  std::string name;
  std::string dtype_name;      // as the header spells it ("BF16", "F32", "I64", ...)
  bool dtype_known = false;    // one of ours (F32 / F16 / BF16)
  DType dtype = DType::F32;    // valid when dtype_known
  std::vector<int64_t> shape;
  const void *data = nullptr;  // inside the mapping
  size_t nbytes = 0;
  int file = 0;                // index into Checkpoint::files()
};

class MappedFile {
 public:
  static std::unique_ptr<MappedFile> open(const std::string &path);
  ~MappedFile();
  const uint8_t *data() const { return data_; }
  size_t size() const { return size_; }
  const std::string &path() const { return path_; }
  // Tells the kernel the pages of [offset, offset+len) are no longer needed (they stay valid to read).
  void release(size_t offset, size_t len) const;
  // Bytes of the mapping resident in memory now (mincore).
  int64_t resident_bytes() const;
  // The same over the whole pages inside [offset, offset+len).
  int64_t resident_bytes(size_t offset, size_t len) const;
  // Reading only some ranges of the file (a checkpoint whose vision tower the model skips): no read-around on faults
  // (MADV_RANDOM over the mapping, which would otherwise pull neighbouring pages, the skipped ones among them, into
  // the page cache), the wanted ranges read ahead instead (MADV_WILLNEED, clipped to them).
  void read_only(const std::vector<std::pair<size_t, size_t>> &wanted) const;
  // Drops the whole pages inside [offset, offset+len) from this mapping and from the page cache where they are
  // clean (posix_fadvise DONTNEED): bytes nothing will read.
  void drop(size_t offset, size_t len) const;

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t *data_ = nullptr;
  size_t size_ = 0;
};

class Checkpoint {
 public:
  // dir must exist; throws vt::Error on anything wrong with the files.
  static std::unique_ptr<Checkpoint> open(const std::string &dir);

  const TensorInfo *find(const std::string &name) const;
  const std::vector<std::unique_ptr<MappedFile>> &files() const { return files_; }
  const std::unordered_map<std::string, TensorInfo> &tensors() const { return tensors_; }

  // The tensors under these name prefixes are never read (a vision tower, an MTP head: the schema's skipped
  // prefixes): a file holding any is dropped from the page cache and read back only where the used tensors lie.
  // Returns their bytes. skipped_resident_bytes() is what of them is in memory now (whole pages only: a page they
  // share with a used tensor is the used tensor's).
  int64_t skip(const std::vector<std::string> &prefixes);
  int64_t skipped_resident_bytes() const;

 private:
  void add_file(const std::string &path);
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::unordered_map<std::string, TensorInfo> tensors_;
  std::vector<const TensorInfo *> skipped_;
};

}  // namespace vt
