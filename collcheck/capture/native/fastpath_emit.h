// Part of fastpath.cpp (one translation unit): writing a C record without running Python code.
//
// Measured inside a DDP step (caches cold after the backward kernels), one write(2) costs 10-15 us
// and every touch of a Python object 1-3 us (a threading.local read that missed: 9 us), so a cached
// template (Recorder._hand_over) is written here with C++ state only: the writer lock
// (WriterLock, also LogWriter.lock), the event counter, the per-group label state and the in-flight
// table; Recorder._emit uses the same state through this module, so both paths number events and
// buckets alike. An API call active on the thread, a failed completion or a busy writer lock send
// the record back to Python.

struct Packed {  // one template of the attached recorder
  std::string head;                   // "k", "o", "g" pairs
  std::string mid;                    // "t" ... "n" pairs
  int pairs = 0;                      // pairs in head + mid
  int64_t gid = 0;
  int64_t seq = 0;                    // logformat.seq_key: the counter of its `j`
  bool live = false;                  // a collective whose signature goes into the group's live hash
  uint64_t sig = 0;                   // live.signature
  int op = 0;                         // index in ops
  std::string labels;                 // "u" + "l" pairs of a fixed label, or "u" alone for a bucket
  PyObject* bucket = nullptr;         // gradient bucket: the label that gets " <index>"
  bool backward = false;              // bucket numbered per backward pass
  std::vector<std::string> numbered;  // packed "l" pairs of bucket labels, by index
  ~Packed() { Py_XDECREF(bucket); }
};

struct Bucket {
  int64_t epoch, eid, index;  // epoch -1: not numbered per backward pass
};
struct Inflight {
  int64_t t_ns;
  unsigned long ident;
  int op;
};

constexpr size_t kRing = 64;  // live.RING
constexpr uint64_t kMult = 0x100000001B3ull;  // live.MULT
struct Live {  // live.mix: a group's rolling hash and its last signatures
  uint64_t h = 0;
  std::array<uint64_t, kRing> ring{};
};

struct Shared {  // everything below is touched with the GIL held
  PyObject *rec = nullptr, *pending = nullptr;  // the recorder, its writer's queued records (list of bytes)
  PyObject* writer = nullptr;                   // the LogWriter (next_segment)
  WriterLock* lock = nullptr;                   // nullptr: the writer has another lock, no C++ writes
  py::object lock_owner;
  int64_t next_eid = 0, epoch = 0;
  std::vector<std::unique_ptr<Packed>> packed;  // by template id
  std::unordered_map<int64_t, int64_t> last_in_group;
  std::unordered_map<int64_t, Bucket> buckets;
  std::unordered_map<int64_t, int64_t> seqs;  // seq_key -> its last `j`
  std::unordered_map<int64_t, Inflight> inflight;
  std::unordered_map<int64_t, Live> live;  // seq_key -> its live hash
  void clear() {
    Py_CLEAR(rec);
    Py_CLEAR(pending);
    Py_CLEAR(writer);
    lock = nullptr;
    lock_owner = py::object();
    packed.clear();
    last_in_group.clear();
    buckets.clear();
    seqs.clear();
    inflight.clear();
    live.clear();
    next_eid = epoch = 0;
  }
};
Shared shared;

void forget_inflight(int64_t eid) { shared.inflight.erase(eid); }
thread_local bool in_api = false;  // Recorder.tls.api is set on this thread (ThreadState)

void pack_uint(std::string& out, uint64_t v) {  // msgpack's smallest form, as msgpack-python packs it
  auto be = [&out](uint64_t x, int n) {
    for (int i = n - 1; i >= 0; --i) out.push_back(static_cast<char>((x >> (8 * i)) & 0xff));
  };
  if (v < 128) {
    out.push_back(static_cast<char>(v));
  } else if (v < 256) {
    out.push_back('\xcc');
    be(v, 1);
  } else if (v < 65536) {
    out.push_back('\xcd');
    be(v, 2);
  } else if (v < (uint64_t(1) << 32)) {
    out.push_back('\xce');
    be(v, 4);
  } else {
    out.push_back('\xcf');
    be(v, 8);
  }
}

int64_t next_seq(int64_t key) {  // the `j` of a group's (or P2P channel's) next record
  auto it = shared.seqs.find(key);
  if (it == shared.seqs.end()) {
    shared.seqs.emplace(key, 0);
    return 0;
  }
  return ++it->second;
}

void mix(int64_t key, int64_t j, uint64_t sig) {  // live.mix
  Live& l = shared.live[key];
  l.h = l.h * kMult + sig;
  l.ring[static_cast<uint64_t>(j) % kRing] = sig;
}

void pack_uvarint(std::string& out, uint64_t v) {  // logformat.uvarint
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

uint32_t crc32(const char* data, size_t n) {  // zlib's crc32 (logformat.frame)
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = table[(c ^ static_cast<uint8_t>(data[i])) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

// logformat.frame: the records of one write(2) behind their length, the count of C records
// written before them and a CRC-32 of both.
std::string frame(const std::string& payload, int64_t colls_before) {
  std::string body;
  body.reserve(payload.size() + 8);
  pack_uvarint(body, payload.size());
  pack_uvarint(body, static_cast<uint64_t>(colls_before));
  body += payload;
  const uint32_t c = crc32(body.data(), body.size());
  std::string out;
  out.reserve(body.size() + 5);
  out.push_back('\xc1');
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((c >> (8 * i)) & 0xff));
  out += body;
  return out;
}

void pack_map(std::string& out, int n) {
  if (n < 16) {
    out.push_back(static_cast<char>(0x80 | n));
  } else {
    out.push_back('\xde');
    out.push_back(static_cast<char>(n >> 8));
    out.push_back(static_cast<char>(n & 0xff));
  }
}

void pack_key(std::string& out, char k1, char k2 = 0) {  // one- or two-letter str key
  out.push_back(k2 ? '\xa2' : '\xa1');
  out.push_back(k1);
  if (k2) out.push_back(k2);
}

// Recorder._label's state: returns the index of a gradient bucket in its pass (-1: not a bucket).
// epoch -1: the bucket is not numbered per backward pass (join shadow passes): it goes on only
// when the group's previous event was the previous bucket.
int64_t label_state(int64_t gid, int64_t eid, bool bucket, int64_t epoch) {
  auto last = shared.last_in_group.find(gid);
  const int64_t prev_eid = last == shared.last_in_group.end() ? -1 : last->second;
  shared.last_in_group[gid] = eid;
  if (!bucket) return -1;
  auto prev = shared.buckets.find(gid);
  const bool go_on = prev != shared.buckets.end() && prev->second.epoch == epoch &&
                     (epoch >= 0 || prev->second.eid == prev_eid);
  const int64_t index = go_on ? prev->second.index + 1 : 0;
  shared.buckets[gid] = Bucket{epoch, eid, index};
  return index;
}

void pack_int(std::string& out, int64_t v) {  // msgpack's smallest form of a signed integer
  if (v >= 0) {
    pack_uint(out, static_cast<uint64_t>(v));
    return;
  }
  auto be = [&out](uint64_t x, int n) {
    for (int i = n - 1; i >= 0; --i) out.push_back(static_cast<char>((x >> (8 * i)) & 0xff));
  };
  const uint64_t u = static_cast<uint64_t>(v);
  if (v >= -32) {
    out.push_back(static_cast<char>(v));
  } else if (v >= -128) {
    out.push_back('\xd0');
    be(u, 1);
  } else if (v >= -32768) {
    out.push_back('\xd1');
    be(u, 2);
  } else if (v >= INT32_MIN) {
    out.push_back('\xd2');
    be(u, 4);
  } else {
    out.push_back('\xd3');
    be(u, 8);
  }
}

void pack_array(std::string& out, size_t n) {
  if (n < 16) {
    out.push_back(static_cast<char>(0x90 | n));
  } else if (n < 65536) {
    out.push_back('\xdc');
    out.push_back(static_cast<char>(n >> 8));
    out.push_back(static_cast<char>(n & 0xff));
  } else {
    out.push_back('\xdd');
    for (int i = 3; i >= 0; --i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  }
}

// LogWriter.write's `d`: completions ride in the next C record, relative to it (event id back,
// µs before it returned, µs before it completed when that was observed).
void pack_completions(std::string& out, const std::vector<Done>& dones, int64_t eid, int64_t ts_us) {
  pack_key(out, 'd');
  pack_array(out, dones.size());
  for (const Done& d : dones) {
    pack_array(out, d.c_ns < 0 ? 2 : 3);
    pack_uint(out, static_cast<uint64_t>(eid - d.eid));
    pack_int(out, ts_us - (d.r_ns - t0_ns) / 1000);
    if (d.c_ns >= 0) pack_int(out, ts_us - (d.c_ns - t0_ns) / 1000);
  }
}

enum class Emit { written, python, failed };

// GIL held. Writes the record of a cached template, or says why Python has to.
Emit emit_cached(long tid, int64_t* eid_out) {
  if (tid < 0 || static_cast<size_t>(tid) >= shared.packed.size() || !shared.packed[tid] || !shared.lock ||
      in_api || errors.load() > 0)
    return Emit::python;
  Packed& t = *shared.packed[tid];
  if (!shared.lock->mu.try_lock()) return Emit::python;  // Python waits for it without the GIL
  std::lock_guard<std::mutex> unlock(shared.lock->mu, std::adopt_lock);
  if (shared.lock->closed) return Emit::python;
  const int64_t eid = shared.next_eid;
  std::string buf;
  const int64_t index = label_state(t.gid, eid, t.bucket != nullptr, t.backward ? shared.epoch : -1);
  if (index >= 0 && (static_cast<size_t>(index) >= t.numbered.size() || t.numbered[index].empty())) {
    // a new bucket index: intern "<label> <index>" (queues its S record in the writer)
    PyObject* sid = PyObject_CallMethod(shared.rec, "_label_sid", "OL", t.bucket, static_cast<long long>(index));
    if (!sid || !PyLong_Check(sid)) {
      Py_XDECREF(sid);
      return Emit::failed;
    }
    if (t.numbered.size() <= static_cast<size_t>(index)) t.numbered.resize(index + 1);
    pack_key(t.numbered[index], 'l');
    pack_uint(t.numbered[index], PyLong_AsUnsignedLongLong(sid));
    Py_DECREF(sid);
  }
  const Py_ssize_t queued = PyList_GET_SIZE(shared.pending);  // interned records queued by Python
  for (Py_ssize_t i = 0; i < queued; ++i) {
    PyObject* b = PyList_GET_ITEM(shared.pending, i);
    buf.append(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b));
  }
  if (queued) PyList_SetSlice(shared.pending, 0, queued, nullptr);
  const uint64_t gen = generation.load();
  std::vector<Done> dones = take_items();
  dones.erase(std::remove_if(dones.begin(), dones.end(), [gen](const Done& d) { return d.gen != gen; }), dones.end());
  const int64_t issued = now_ns();
  const int64_t ts_us = (issued - t0_ns) / 1000;
  pack_map(buf, t.pairs + 2 + (t.labels.empty() ? 0 : 2) + (dones.empty() ? 0 : 1));
  buf += t.head;
  pack_key(buf, 't', 's');
  pack_uint(buf, ts_us);
  pack_key(buf, 'j');
  const int64_t j = next_seq(t.seq);
  pack_uint(buf, j);
  if (t.live) mix(t.seq, j, t.sig);
  if (!dones.empty()) pack_completions(buf, dones, eid, ts_us);
  buf += t.mid;
  buf += t.labels;
  if (index >= 0) buf += t.numbered[index];
  buf = frame(buf, eid);
  if (!shared.lock->append(buf.data(), buf.size())) return Emit::failed;
  if (shared.lock->segment_bytes && shared.lock->written >= shared.lock->segment_bytes) {
    PyObject* r = PyObject_CallMethod(shared.writer, "next_segment", nullptr);  // GIL and lock held
    if (!r) {
      PyErr_Clear();
      return Emit::failed;
    }
    Py_DECREF(r);
  }
  shared.inflight[eid] = Inflight{issued, PyThread_get_thread_ident(), t.op};
  shared.next_eid = eid + 1;
  *eid_out = eid;
  return Emit::written;
}

void attach_shared(PyObject* rec) {  // GIL held
  shared.clear();
  py::object r = py::reinterpret_borrow<py::object>(rec);
  py::object w = r.attr("writer");
  py::object lock = w.attr("lock");
  if (py::isinstance<WriterLock>(lock)) {
    shared.lock = lock.cast<WriterLock*>();
    shared.lock_owner = lock;
  }
  shared.pending = py::object(w.attr("_pending")).release().ptr();
  shared.writer = w.release().ptr();
  shared.rec = r.release().ptr();
}

void cache_template(long tid, py::bytes head, py::bytes mid, int pairs, int64_t gid, const std::string& opname,
                    py::bytes labels, py::object bucket, bool backward, int64_t seq, py::object sig) {
  if (tid < 0) return;
  auto p = std::make_unique<Packed>();
  p->seq = seq;
  p->live = !sig.is_none();
  if (p->live) p->sig = sig.cast<uint64_t>();
  p->head = head;
  p->mid = mid;
  p->pairs = pairs;
  p->gid = gid;
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].name == opname) p->op = static_cast<int>(i);
  p->labels = labels;
  p->bucket = bucket.is_none() ? nullptr : bucket.release().ptr();
  p->backward = backward;
  if (shared.packed.size() <= static_cast<size_t>(tid)) shared.packed.resize(tid + 1);
  shared.packed[tid] = std::move(p);
}

void define_emit(py::module_& m) {
  py::class_<WriterLock>(m, "WriterLock")
      .def(py::init<>())
      .def("acquire", &WriterLock::acquire, py::arg("blocking") = true, py::arg("timeout") = -1.0)
      .def("release", [](WriterLock& l) { l.mu.unlock(); })
      .def("__enter__", [](WriterLock& l) { l.acquire(true, -1); })
      .def("__exit__", [](WriterLock& l, py::args) { l.mu.unlock(); })
      .def_readwrite("closed", &WriterLock::closed)
      .def_property("fd", [](const WriterLock& l) { return l.fd; }, &WriterLock::set_fd)
      .def_readwrite("written", &WriterLock::written)
      .def_readwrite("segment_bytes", &WriterLock::segment_bytes)
      .def("append",
           [](WriterLock& l, py::bytes data) {  // LogWriter's writes (writer lock held)
             char* p = nullptr;
             Py_ssize_t n = 0;
             if (PyBytes_AsStringAndSize(data.ptr(), &p, &n) != 0) throw py::error_already_set();
             if (!l.append(p, static_cast<size_t>(n))) {
               errno = errno ? errno : EIO;
               PyErr_SetFromErrno(PyExc_OSError);
               throw py::error_already_set();
             }
           })
      .def_readonly("mappable", &WriterLock::mappable)  // false: mapping failed, pwrite(2) instead
      .def("trim", &WriterLock::trim);
  m.def("cache", &cache_template);
  m.def("next_eid", []() { return shared.next_eid++; });  // the writer lock is held by the caller
  m.def("peek_eid", []() { return shared.next_eid; });     // C records written so far (frames)
  m.def("next_seq", &next_seq);
  m.def("seqs", []() {  // [(seq_key, last j)], for a new segment's J record
    py::list out;
    for (const auto& [key, j] : shared.seqs) out.append(py::make_tuple(key, j));
    return out;
  });
  m.def("label_state", &label_state);
  m.def("mix", &mix);
  m.def("live", []() {  // [(seq_key, rolling hash, [signatures by position % ring])], for live.summary
    py::list out;
    for (const auto& [key, l] : shared.live) {
      py::list ring;
      for (uint64_t s : l.ring) ring.append(s);
      out.append(py::make_tuple(key, l.h, ring));
    }
    return out;
  });
  m.def("set_api", [](bool on) { in_api = on; });
  m.def("set_epoch", [](int64_t e) { shared.epoch = e; });
  m.def("track", [](int64_t eid, int64_t t_ns, unsigned long ident, const std::string& opname) {
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i].name == opname) shared.inflight[eid] = Inflight{t_ns, ident, static_cast<int>(i)};
  });
  m.def("forget", [](int64_t eid) { shared.inflight.erase(eid); });
  m.def("inflight", []() {  // [(eid, (t_ns, thread ident, op name))], for the watchdog
    py::list out;
    for (const auto& [eid, f] : shared.inflight)
      out.append(py::make_tuple(eid, py::make_tuple(f.t_ns, f.ident, ops[f.op].name)));
    return out;
  });
}
