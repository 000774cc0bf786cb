// Part of fastpath.cpp (one translation unit): the log file the compiled path writes, and its lock.
//
// LogWriter.lock when the fast path is loaded: a lock Python uses like threading.Lock (waiting
// without the GIL) and the C++ path only tries, holding the GIL (waiting there could deadlock).
// It also owns the current segment's file (LogWriter.counters): records are copied into a shared
// mapping of it, reserved ahead with fallocate. Measured inside a DDP step, a write(2) of one frame
// costs 7-8 us (0.4 us in a tight loop), the copy 0.2 us, and what is copied outlives the process
// alike (the page cache is the file). Reserved space that was never written reads as zeros after
// a crash (the reader's end); close and each new segment trim it. Where space cannot be reserved
// or mapped, pwrite(2) at the same offsets. The file must be open for reading too (mmap).
struct WriterLock {
  std::mutex mu;
  bool closed = false;        // LogWriter.close() sets it under the lock: no write after it
  int fd = -1;                // the current segment's file
  int64_t written = 0;        // bytes in the current segment
  int64_t segment_bytes = 0;  // start a new one (LogWriter.next_segment) past this; 0: never
  char* map = nullptr;        // [map_start, map_end) of the file, mapped
  int64_t map_start = 0, map_end = 0;
  bool mappable = true;
  ~WriterLock() { unmap(); }

  bool acquire(bool blocking, double timeout) {
    if (mu.try_lock()) return true;
    if (!blocking) return false;
    py::gil_scoped_release nogil;
    if (timeout < 0) {
      mu.lock();
      return true;
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
    while (std::chrono::steady_clock::now() < until) {
      if (mu.try_lock()) return true;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return false;
  }
  void set_fd(int f) {  // a new segment's file (the caller trimmed the previous one)
    unmap();
    fd = f;
    mappable = true;
    const int flags = f >= 0 ? fcntl(f, F_GETFL) : -1;
    if (flags >= 0 && (flags & O_APPEND)) fcntl(f, F_SETFL, flags & ~O_APPEND);  // writes go at `written`
  }
  void unmap() {
    if (map) munmap(map, static_cast<size_t>(map_end - map_start));
    map = nullptr;
    map_start = map_end = 0;
  }
  int64_t chunk() const {  // space reserved at a time: 1 MiB, less for small segments
    int64_t c = 1 << 20;
    if (segment_bytes > 0) c = std::max<int64_t>(64 << 10, std::min<int64_t>(c, segment_bytes / 4));
    return c;
  }
  bool reserve(int64_t n) {  // [written, written + n) mapped
    if (map && written + n <= map_end) return true;
    if (!mappable || fd < 0) return false;
    unmap();
    const int64_t page = sysconf(_SC_PAGESIZE), step = chunk();
    const int64_t start = written / page * page;
    const int64_t end = (written + n + step - 1) / step * step;
    // blocks allocated now: a full disk fails here, never as SIGBUS on a later copy
    void* p = MAP_FAILED;
    if (fallocate(fd, 0, written, end - written) == 0)
      p = mmap(nullptr, static_cast<size_t>(end - start), PROT_READ | PROT_WRITE, MAP_SHARED, fd, start);
    if (p == MAP_FAILED) {
      mappable = false;
      return false;
    }
    map = static_cast<char*>(p);
    map_start = start;
    map_end = end;
    return true;
  }
  bool append(const char* data, size_t n) {
    if (reserve(static_cast<int64_t>(n))) {
      std::memcpy(map + (written - map_start), data, n);
      written += static_cast<int64_t>(n);
      return true;
    }
    for (size_t off = 0; off < n;) {
      const ssize_t w = ::pwrite(fd, data + off, n - off, written + static_cast<int64_t>(off));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      off += static_cast<size_t>(w);
    }
    written += static_cast<int64_t>(n);
    return true;
  }
  void trim() {  // before the file is closed: give back the reserved space that was not written
    unmap();
    if (fd >= 0) (void)!ftruncate(fd, written);
  }
};
