#include "state_slots.h"

#include <algorithm>

namespace vt {

namespace {

constexpr auto kLowestFirst = std::greater<int32_t>();  // std heaps keep the largest on top: this makes it the lowest

}  // namespace

StateSlots::StateSlots(int32_t n)
    : n_(std::max(n, 0)), mapped_(n_), limit_(n_), chunk_(std::max(n_, 1)), taken_(size_t(n_), 0) {
  free_.reserve(size_t(n_));
  for (int32_t s = 0; s < n_; ++s) free_.push_back(s);  // ascending: already a heap of the lowest on top
}

void StateSlots::set_growth(int32_t mapped, int32_t chunk, Resize resize) {
  resize_ = std::move(resize);
  chunk_ = std::max(chunk, 1);
  limit_ = n_;
  mapped_ = std::clamp(mapped, 0, n_);
}

int32_t StateSlots::whole_chunks(int64_t slots) const {
  const int64_t chunks = (slots + chunk_ - 1) / chunk_;
  return int32_t(std::min<int64_t>(n_, chunks * chunk_));
}

int32_t StateSlots::top() const {
  for (int32_t s = mapped_ - 1; s >= 0; --s)
    if (taken_[size_t(s)]) return s + 1;
  return 0;
}

int32_t StateSlots::map_up_to(int32_t slots) {
  const int32_t want = std::min(limit_, whole_chunks(slots));
  if (want <= mapped_) return mapped_;
  // (clamped: the backend never takes back what was mapped while growing, nor maps past what was asked)
  const int32_t got = std::clamp(resize_(want), mapped_, want);
  if (got < want) limit_ = got;  // the device's memory ends here, for now: n_free() stops counting the rest
  mapped_ = got;
  return mapped_;
}

int32_t StateSlots::take() {
  if (free_.empty()) return -1;
  const int32_t s = free_.front();  // the lowest free slot
  if (s >= limit_) return -1;
  if (s >= mapped_ && (!resize_ || map_up_to(s + 1) <= s)) return -1;
  std::pop_heap(free_.begin(), free_.end(), kLowestFirst);
  free_.pop_back();
  taken_[size_t(s)] = 1;
  ++held_;
  return s;
}

void StateSlots::release(int32_t &slot) {
  if (slot >= 0 && slot < n_ && taken_[size_t(slot)]) {
    taken_[size_t(slot)] = 0;
    --held_;
    free_.push_back(slot);
    std::push_heap(free_.begin(), free_.end(), kLowestFirst);
  }
  slot = -1;
}

int32_t StateSlots::trim(int32_t keep) {
  if (!resize_) return mapped_;
  limit_ = n_;  // memory may have come free since a take() came short: the next one asks again
  const int32_t target = whole_chunks(std::max(keep, top()));
  if (target >= mapped_) return mapped_;
  // (clamped: the backend keeps at least what was asked, and a failed unmap leaves what was mapped)
  mapped_ = std::clamp(resize_(target), target, mapped_);
  return mapped_;
}

}  // namespace vt
