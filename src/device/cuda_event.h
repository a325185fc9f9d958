// A CUDA event: a point in a stream's queue that another stream or the host
// can wait for, and (when created with timing) a clock for the GPU time
// between two of them. RAII, move-only; no CUDA headers.
#pragma once

struct CUevent_st;

namespace parallm::cuda {

class Stream;

class Event {
 public:
  // On cuda:`device_index`. NOTE: without `timing` the event records no
  // timestamp, which makes record and wait cheaper (CUDA's DisableTiming).
  explicit Event(int device_index, bool timing = false);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Marks the point after everything queued on `stream` so far.
  void record(const Stream& stream);
  // Makes `stream`'s later work wait for the recorded point (no host wait).
  void make_wait(const Stream& stream) const;
  // Host waits for the recorded point.
  void synchronize() const;
  // Whether the recorded point has been reached (never blocks).
  bool ready() const;
  // GPU time from `start` to this event, both recorded with timing and done.
  float elapsed_ms_since(const Event& start) const;

 private:
  void destroy();

  CUevent_st* event_ = nullptr;
  int device_index_ = 0;
};

}  // namespace parallm::cuda
