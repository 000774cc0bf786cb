// Compiled hot path of collcheck's recorder (see fastpath.py for why, how it is built and loaded).
//
// One boxed kernel at BackendSelect for every c10d op, like dispatcher.py's Python kernels, but:
// - the arguments never become Python objects: group name, dtypes, shapes, reduce op, root/peer and
//   tag are read in C++ (the ReduceOp ScriptObject alone costs ~20 us from Python);
// - the call site is found with the CPython frame API, each code object classified once by
//   callsite._classify; everything that fixes the record's content (op, group, tensors, reduce op,
//   peer, tag, user frame + line, torch function names on the way, thread) becomes a byte key, and
//   each distinct key a template id. The first record of a template is built by Python
//   (hooks.NativeHooks.issue), which hands back the template packed; later ones are written here
//   (emit_cached), before the op is issued (durability rule, docs/log-format.md);
// - completion is a C++ callback on the Work's future: gloo threads never take the GIL, they push
//   (eid, times, error) onto a queue drained with the next record or by the watchdog.
//
// One translation unit, in sections: the kernel's helpers, completions, the log file and its lock,
// writing a record, then the frame walk, the kernel and the module's definition. Python's view of
// the module: extension.pyi.
#include <Python.h>
#include <frameobject.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/extension.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <climits>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <typeinfo>
#include <unordered_map>
#include <vector>

#if PY_VERSION_HEX >= 0x030D0000
#define COLLCHECK_FINALIZING() Py_IsFinalizing()
#else
#define COLLCHECK_FINALIZING() _Py_IsFinalizing()
#endif

namespace {

using c10::IValue;

struct Op {  // argument positions (-1: none), from logfile/ops.py (async_op: from the op's schema)
  std::string name;
  int pg, tensors, reduce_op, peer, tag, async_op;
  bool cache;  // false: the key would grow without bound (all_to_all_single split sizes)
};
struct Verdict {
  bool user;
  PyObject* name;    // labelled torch function name or nullptr
  PyObject* reader;  // reads what the call is for from the frame's locals (frameworks.DETAIL_FRAMES) or nullptr
};
struct Entry {
  long tid;
  PyObject* details;
};

std::vector<Op> ops;
std::unordered_map<std::string, int> op_index;  // "c10d::allreduce_" -> its index in ops
std::unique_ptr<torch::Library> library;         // the kernels, while registered
std::mutex* library_mu = new std::mutex();  // a heap object: a forked child abandons it
std::atomic<bool> enabled{false};
// The attached recorder's callbacks (attach): hooks.NativeHooks.issue, .returned, .label_sid, Recorder.fail
PyObject* issue_fn = nullptr;
PyObject* return_fn = nullptr;
PyObject* label_fn = nullptr;
PyObject* fail_fn = nullptr;
PyObject* classify_fn = nullptr;  // callsite._classify
int64_t t0_ns = 0;

// This thread's state. A thread_local of a shared library is found through a call
// (__tls_get_addr), which the compiler repeats at each use: the kernel asks once (this_thread)
// and passes it down.
struct Tls {
  bool in_api = false;  // an API call runs on this thread (Recorder.set_api_call)
  std::string key;      // issue()'s key: keeps its capacity, no allocation per record
  int depth = 0;        // issue() re-entered from a __del__ during a Python call: a fresh key
  const c10::FunctionSchema* schema = nullptr;  // op_of: the last op seen, and its index
  int index = -1;
  unsigned long ident = 0;  // PyThread_get_thread_ident() (0: not asked yet)
  const std::type_info* work_type = nullptr;  // enqueue_type: the last Work type asked, and its answer
  bool enqueue = false;
  // without_gil's memo of this thread's last record written there: its key's first part
  // (put_args), every frame's (code, last instruction) from the innermost, and their template
  std::string memo_args;
  std::vector<std::pair<const void*, const void*>> memo_frames;
  long memo_tid = -1;
  unsigned long thread_ident() {
    if (!ident) ident = PyThread_get_thread_ident();
    return ident;
  }
};
// A pointer, constant-initialized: reading it needs no per-access check that the thread's
// object was constructed (as a thread_local with a constructor does). The object is made on the
// thread's first call and freed when the thread exits.
thread_local Tls* tls_state = nullptr;

struct TlsOwner {
  ~TlsOwner() {
    delete tls_state;
    tls_state = nullptr;
  }
};

__attribute__((noinline)) Tls* make_tls() {
  thread_local TlsOwner owner;
  (void)owner;
  tls_state = new Tls();
  return tls_state;
}

Tls& this_thread() {
  Tls** slot = &tls_state;
  asm("" : "+r"(slot));  // (opaque: the compiler keeps the address instead of asking again)
  Tls* p = *slot;
  return *(__builtin_expect(p != nullptr, 1) ? p : make_tls());
}
// Touched with state_mu held (below).
std::unordered_map<PyObject*, Verdict> verdicts;  // code object (pinned) -> verdict (never erased)
constexpr size_t kMaxEntries = 1 << 16;           // beyond: records are built uncached

// verdicts' entries by code object, direct-mapped in front of the hash table: a frame costs a
// multiplication, a load and a compare, not a call hashing into buckets (~10 frames a call).
// The map's values never move (node-based) and code objects are pinned: a slot never dangles.
struct VerdictSlot {
  PyObject* code = nullptr;
  const Verdict* verdict = nullptr;
};
std::array<VerdictSlot, 1024> verdict_slots{};

inline const Verdict* verdict_of(PyObject* code) {  // state_mu held; nullptr: not classified yet
  VerdictSlot& slot = verdict_slots[(reinterpret_cast<uintptr_t>(code) * 0x9E3779B97F4A7C15ull) >> 54];
  if (__builtin_expect(slot.code == code, 1)) return slot.verdict;
  auto it = verdicts.find(code);
  if (it == verdicts.end()) return nullptr;
  slot = VerdictSlot{code, &it->second};
  return slot.verdict;
}

// A record key's hash (Templates): 16 bytes a step in two lanes (a multiplication carries a
// difference only upwards: the end mixes the high bits back down). `p` has zeros past its n bytes
// up to the next multiple of 16 (Key::hash).
uint64_t hash_padded(const char* p, size_t n) {
  uint64_t a = 0x9E3779B97F4A7C15ull ^ n, b = 0xC2B2AE3D27D4EB4Full;
  for (size_t i = 0; i < n; i += 16) {
    uint64_t w0, w1;
    std::memcpy(&w0, p + i, 8);
    std::memcpy(&w1, p + i + 8, 8);
    a = (a ^ w0) * 0xFF51AFD7ED558CCDull;
    b = (b ^ w1) * 0xC4CEB9FE1A85EC53ull;
  }
  uint64_t h = a ^ (b >> 31) ^ (b << 33);
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 33);
}

// Record key -> template id + its details: open addressing on the keys' hashes, so a look-up
// reads the key where it was written (no std::string made of it), hashes it once, compares once.
struct Templates {
  struct Slot {
    uint64_t hash = 0;
    int64_t index = -1;  // into keys/values; -1: empty
  };
  std::vector<Slot> slots = std::vector<Slot>(1024);
  std::vector<std::string> keys;
  std::vector<Entry> values;
  size_t size() const { return keys.size(); }
  Entry* find(const char* p, size_t n, uint64_t h) {
    const size_t mask = slots.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& s = slots[i];
      if (s.index < 0) return nullptr;
      const std::string& k = keys[static_cast<size_t>(s.index)];
      if (s.hash == h && k.size() == n && std::memcmp(k.data(), p, n) == 0) return &values[static_cast<size_t>(s.index)];
    }
  }
  void insert(const char* p, size_t n, uint64_t h, const Entry& e) {  // (a key not in the table)
    if (2 * (keys.size() + 1) > slots.size()) {
      std::vector<Slot> old(slots.size() * 2);
      old.swap(slots);
      for (const Slot& s : old)
        if (s.index >= 0) place(s);
    }
    keys.emplace_back(p, n);
    values.push_back(e);
    place(Slot{h, static_cast<int64_t>(keys.size() - 1)});
  }
  void place(const Slot& s) {
    const size_t mask = slots.size() - 1;
    size_t i = s.hash & mask;
    while (slots[i].index >= 0) i = (i + 1) & mask;
    slots[i] = s;
  }
};
Templates entries;

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // time.monotonic_ns()
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// ---- Where a recorded call's wall time goes (a benchmark build only: benchmarks/bench_stages.py
// compiles with -DCOLLCHECK_STAGE_CLOCK). Instruction counts miss what costs most here: cache
// misses after the backend's thread ran, and page faults. Each STAGE(i) adds the clock's ticks
// since the previous mark to stage i of the call; a call's stages are kept only when it took the
// path without the GIL to the end (the path every cached record takes).
enum Stage { kEnter, kArgs, kMemo, kStateLock, kWriterLock, kTaken, kPacked, kFramed, kCopied, kLeft,
             kRedispatch, kWatched, kStages };
// How far the kernel goes (bench_stages.py --parts weighs its parts by the wall, in one process;
// always kWhole but in the stage-clock build): kHop, the dispatcher's hop alone, redispatched at
// once; kUnwatched, the record, its completion not watched (the Work's future never asked).
enum Part { kWhole, kHop, kUnwatched };
#ifdef COLLCHECK_STAGE_CLOCK
inline uint64_t ticks() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return static_cast<uint64_t>(now_ns());
#endif
}
struct StageCall {
  uint64_t last = 0, t[kStages] = {};
  bool fast = false;
};
thread_local StageCall stage_call;
std::mutex stage_mu;
uint64_t stage_sums[kStages] = {}, stage_calls = 0, callback_ticks = 0, callbacks = 0;
std::vector<uint32_t> call_ours, call_torch;  // per call: ticks in collcheck's stages, in the redispatch
#define STAGE_START()                        \
  do {                                       \
    stage_call = StageCall();                \
    stage_call.last = ticks();               \
  } while (0)
#define STAGE(i)                                   \
  do {                                             \
    const uint64_t now_ = ticks();                 \
    stage_call.t[i] += now_ - stage_call.last;     \
    stage_call.last = now_;                        \
  } while (0)
#define STAGE_FAST() (stage_call.fast = true)
inline void stage_end() {
  if (!stage_call.fast) return;
  std::lock_guard<std::mutex> guard(stage_mu);
  uint64_t ours = 0;
  for (int i = 0; i < kStages; ++i) {
    stage_sums[i] += stage_call.t[i];
    if (i != kRedispatch) ours += stage_call.t[i];
  }
  ++stage_calls;
  if (call_ours.size() < (1u << 22)) {
    call_ours.push_back(static_cast<uint32_t>(std::min<uint64_t>(ours, UINT32_MAX)));
    call_torch.push_back(static_cast<uint32_t>(std::min<uint64_t>(stage_call.t[kRedispatch], UINT32_MAX)));
  }
}
inline void stage_callback(uint64_t since) {
  const uint64_t spent = ticks() - since;
  std::lock_guard<std::mutex> guard(stage_mu);
  callback_ticks += spent;
  ++callbacks;
}
#define STAGE_END() stage_end()
#define STAGE_CALLBACK_START() const uint64_t callback_start_ = ticks()
#define STAGE_CALLBACK_END() stage_callback(callback_start_)
std::atomic<int> stage_part{kWhole};
#define STAGE_PART() stage_part.load(std::memory_order_relaxed)
#else
#define STAGE_START() ((void)0)
#define STAGE(i) ((void)0)
#define STAGE_FAST() ((void)0)
#define STAGE_END() ((void)0)
#define STAGE_CALLBACK_START() ((void)0)
#define STAGE_CALLBACK_END() ((void)0)
#define STAGE_PART() kWhole
#endif

py::object spec_of(const at::Tensor& t) {
  py::tuple shape(t.dim());
  for (int64_t i = 0; i < t.dim(); ++i) shape[i] = py::int_(t.size(i));
  auto dtype = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(torch::getTHPDtype(t.scalar_type())));
  return py::make_tuple(dtype, shape);
}

// The object of a custom-class argument or result, borrowed from the stack (the op's schema fixes
// its class): toCustomClass checks the class and counts a reference, ~200 instructions a call.
template <class T>
__attribute__((always_inline)) inline T* borrow(const IValue& v) {
  const c10::ivalue::Object& obj = v.toObjectRef();
  TORCH_CHECK(obj.slots().size() == 1 && obj.getSlot(0).isCapsule(), "collcheck: not a custom class object");
  auto* target = static_cast<c10::intrusive_ptr_target*>(const_cast<void*>(obj.getSlot(0).internalToPointer()));
  return static_cast<T*>(static_cast<torch::CustomClassHolder*>(target));
}

struct Gil {
  PyGILState_STATE state = PyGILState_Ensure();
  ~Gil() { PyGILState_Release(state); }
};

#if PY_VERSION_HEX >= 0x030D0000
#define COLLCHECK_CURRENT_TSTATE() PyThreadState_GetUnchecked()
#else
#define COLLCHECK_CURRENT_TSTATE() _PyThreadState_UncheckedGet()
#endif

// The GIL for a kernel call: where the thread has its Python thread state and does not hold the
// GIL (Python code called torch, which let the GIL go), what PyGILState_Ensure and _Release do
// then, without their second look-up of the thread's state and their counting (which nets to
// nothing here); anything else (a thread Python never saw, the GIL already held) goes through them.
struct KernelGil {
  PyThreadState* ts = PyGILState_GetThisThreadState();
  PyGILState_STATE state{};
  KernelGil() {
    if (ts && ts != COLLCHECK_CURRENT_TSTATE()) {
      PyEval_RestoreThread(ts);
    } else {
      ts = nullptr;
      state = PyGILState_Ensure();
    }
  }
  ~KernelGil() {
    if (ts)
      PyEval_SaveThread();
    else
      PyGILState_Release(state);
  }
};

void call_fail(const char* what) {  // GIL held: the recorder stops for good, with one warning
  PyObject* exc = PyObject_CallFunction(PyExc_RuntimeError, "s", what);
  if (exc && fail_fn) {
    PyObject* r = PyObject_CallOneArg(fail_fn, exc);
    Py_XDECREF(r);
  }
  Py_XDECREF(exc);
  PyErr_Clear();
}

// ---- Completion of the recorded collectives.
//
// The Python kernels attach a Python done-callback to the Work's future, which then needs the
// GIL in a gloo thread. Here the callback is C++: it pushes (eid, returned, completed, error)
// onto a queue, drained into D records by the next record (emit_cached) or by Python
// (Completions.drain, also from the watchdog thread). A blocking API call completes
// when its wrapper returns: its return, and any op that raised, go to NativeHooks.returned.

struct Done {
  uint64_t gen;
  int64_t eid, r_ns, c_ns;  // c_ns < 0: completion not observable (gloo P2P work has no future)
  std::exception_ptr err;
};

std::atomic<uint64_t> generation{0};  // one per attached recorder: older completions are dropped
std::atomic<int64_t> pending{0};
std::atomic<int64_t> errors{0};  // failed completions queued: their text needs Python
// The queue's lock is held for a push_back or a swap: taking it costs an atomic exchange, where a
// std::mutex costs two library calls; a thread that finds it taken yields until it is free.
struct SpinLock {
  std::atomic<bool> held{false};
  void lock() noexcept {
    while (held.exchange(true, std::memory_order_acquire))
      while (held.load(std::memory_order_relaxed)) std::this_thread::yield();
  }
  void unlock() noexcept { held.store(false, std::memory_order_release); }
};

// Touched by gloo threads: heap objects so that a forked child can abandon a held lock.
SpinLock* done_mu = new SpinLock();
std::vector<Done>* done_q = new std::vector<Done>();

// The recorder's C++ tables (the verdicts, the templates, Shared) between the kernel's path that
// runs without the GIL (a cached template: without_gil) and every other use, which holds the GIL.
// Held only around C++ work: never while Python code runs, the GIL is taken or another lock
// waited for, and no Python object is made or freed under it (a finalizer could issue a
// collective on this thread). Shared's record state is also the writer lock's: both paths
// that write a record hold that lock, so they only exclude each other there.
SpinLock* state_mu = new SpinLock();
using StateGuard = std::lock_guard<SpinLock>;

void forget_inflight(int64_t eid);  // below, with the state it changes

void push(Done&& d) noexcept {
  try {
    std::lock_guard<SpinLock> guard(*done_mu);
    if (d.err) errors.fetch_add(1);
    done_q->push_back(std::move(d));
    pending.fetch_add(1, std::memory_order_release);
  } catch (...) {
  }
}

// The writer lock or state_mu held. The completions pushed since the last call, in a buffer the
// next call reuses (it and the queue swap their storage: no allocation per record once both have grown).
std::vector<Done>& take_items() {
  static std::vector<Done>* taken = new std::vector<Done>();  // (a heap object, as the queue)
  taken->clear();
  std::vector<Done>& items = *taken;
  if (pending.load(std::memory_order_acquire) == 0) return items;
  std::lock_guard<SpinLock> guard(*done_mu);
  items.swap(*done_q);
  pending.store(0, std::memory_order_release);
  errors.store(0);
  const uint64_t gen = generation.load();
  for (const Done& d : items)
    if (d.gen == gen) forget_inflight(d.eid);
  return items;
}

// GIL held. The Python exception that Python code calling into torch would get (new reference).
PyObject* python_error(const std::exception_ptr& err) {
  torch::translate_exception_to_python(err);
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  Py_XDECREF(type);
  Py_XDECREF(tb);
  PyErr_Clear();
  if (!value) Py_RETURN_NONE;
  return value;
}

// GIL held. Finished operations of the current recorder as [(eid, r_us, c_us|None, exc|None)], or None.
PyObject* take_done() {
  if (pending.load(std::memory_order_acquire) == 0) Py_RETURN_NONE;
  std::vector<Done> items;
  {
    StateGuard guard(*state_mu);
    items = take_items();  // (a copy: Python objects are made after the lock)
  }
  const uint64_t gen = generation.load();
  PyObject* list = PyList_New(0);
  for (const Done& d : items) {
    if (d.gen != gen || !list) continue;
    PyObject* exc = d.err ? python_error(d.err) : (Py_INCREF(Py_None), Py_None);  // what fut.value() raises
    PyObject* c = d.c_ns < 0 ? (Py_INCREF(Py_None), Py_None) : PyLong_FromLongLong((d.c_ns - t0_ns) / 1000);
    PyObject* item = Py_BuildValue("(LLNN)", static_cast<long long>(d.eid),
                                   static_cast<long long>((d.r_ns - t0_ns) / 1000), c, exc);
    if (item) PyList_Append(list, item);
    Py_XDECREF(item);
  }
  PyErr_Clear();
  return list;
}

// GIL taken. A blocking API call's op returned, or any recorded op raised: tell Python.
void report(int64_t eid, int64_t t_ret, const std::exception_ptr& err) {
  Gil gil;
  if (!return_fn) return;
  PyObject* exc = err ? python_error(err) : (Py_INCREF(Py_None), Py_None);
  PyObject* r = PyObject_CallFunction(return_fn, "LLO", static_cast<long long>(eid),
                                      static_cast<long long>((t_ret - t0_ns) / 1000), exc);
  Py_XDECREF(r);
  Py_DECREF(exc);
  PyErr_Clear();
}

// Work types whose getFuture() throws (gloo's P2P and reduce-scatter works): asked once per type,
// since each c10::Error captures a backtrace (about 100 us of CPU per collective otherwise).
std::mutex no_future_mu;
std::vector<const std::type_info*> no_future_types;
std::atomic<bool> any_no_future{false};  // set once the first such type is known: no lock per call before

bool has_no_future(const std::type_info& type) {
  if (!any_no_future.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> guard(no_future_mu);
  return std::find(no_future_types.begin(), no_future_types.end(), &type) != no_future_types.end();
}

// No GIL. Completion of an op that is not a blocking API call: a callback on the Work's future.
// `waited`: a blocking API call (async_op=False), which waits for the Work right after this returns.
void watch(int64_t eid, int64_t t_ret, const c10::OperatorHandle& op, const torch::jit::Stack& stack, bool waited) {
  const uint64_t gen = generation.load();
  if (op.schema().returns().empty()) {  // monitored_barrier_: done when it returns
    push(Done{gen, eid, t_ret, now_ns(), nullptr});
    return;
  }
  c10d::Work* work = borrow<c10d::Work>(stack.back());  // (the stack holds it)
  const std::type_info& type = typeid(*work);
  c10::intrusive_ptr<c10::ivalue::Future> fut;
  if (!has_no_future(type)) {
    try {
      fut = work->getFuture();
    } catch (...) {
      std::lock_guard<std::mutex> guard(no_future_mu);
      no_future_types.push_back(&type);
      any_no_future.store(true, std::memory_order_release);
    }
  }
  if (!fut && waited) {
    // gloo's reduce-scatter: the API's own wait() comes next. Waiting here first observes the
    // completion without a Python wrapper; the API's wait() then returns at once, or raises the
    // same error itself (the Work keeps it), so the caller sees what it would have seen.
    std::exception_ptr err;
    try {
      work->wait();
    } catch (...) {
      err = std::current_exception();
    }
    push(Done{gen, eid, t_ret, now_ns(), err});
    return;
  }
  if (!fut) {  // completion not observable: returned only
    push(Done{gen, eid, t_ret, -1, nullptr});
    return;
  }
  if (fut->completed()) {  // what the callback would do now, in this thread, without its guards
    push(Done{gen, eid, t_ret, now_ns(), fut->hasError() ? fut->exception_ptr() : nullptr});
    return;
  }
  // A callback of at most 16 bytes is kept inside its std::function (no allocation here, no free
  // in the backend's thread): the recorder's generation rides in the event id's top bits.
  constexpr int kEidBits = 44;
  if (eid >= 0 && eid < (int64_t(1) << kEidBits) && gen < (uint64_t(1) << (64 - kEidBits))) {
    const uint64_t tag = (gen << kEidBits) | static_cast<uint64_t>(eid);
    fut->addCallback([tag, t_ret](c10::ivalue::Future& f) {
      STAGE_CALLBACK_START();
      push(Done{tag >> kEidBits, static_cast<int64_t>(tag & ((uint64_t(1) << kEidBits) - 1)), t_ret, now_ns(),
                f.hasError() ? f.exception_ptr() : nullptr});
      STAGE_CALLBACK_END();
    });
    return;
  }
  fut->addCallback([gen, eid, t_ret](c10::ivalue::Future& f) {
    push(Done{gen, eid, t_ret, now_ns(), f.hasError() ? f.exception_ptr() : nullptr});
  });
}

// ---- Completion by polling: backends whose futures complete at enqueue.
//
// NCCL's (and XCCL's) Work future is a CUDA future marked complete when the kernel is enqueued, and
// a blocking API call returns once the compute stream waits for it: neither says the collective ran.
// Their Works are kept here instead and `poll` (Python's poller thread, GIL held) asks
// isCompleted(), which queries the kernel's end event. Which Work types: those whose C++ type names
// an NCCL or XCCL work (asked once per type), or every type (set_polling(1): tests on gloo).

struct Polled {
  uint64_t gen;
  int64_t eid, r_ns;
  c10::intrusive_ptr<c10d::Work> work;
};

std::atomic<int> polling_mode{0};  // 0: enqueue-future types; 1: every Work; -1: none
std::mutex* polled_mu = new std::mutex();
std::vector<Polled>* polled_q = new std::vector<Polled>();
std::mutex polled_types_mu;
std::vector<std::pair<const std::type_info*, bool>> polled_types;

bool enqueue_type(Tls& tls, const std::type_info& type) {  // an NCCL or XCCL Work (asked once per type)
  if (tls.work_type == &type) return tls.enqueue;  // one backend per thread, usually: no lock
  std::lock_guard<std::mutex> guard(polled_types_mu);
  tls.work_type = &type;
  for (const auto& [t, yes] : polled_types)
    if (t == &type) return tls.enqueue = yes;
  const std::string name = type.name();
  const bool yes = name.find("WorkNCCL") != std::string::npos || name.find("WorkXCCL") != std::string::npos;
  polled_types.emplace_back(&type, yes);
  return tls.enqueue = yes;
}

bool polled_type(Tls& tls, const std::type_info& type) {
  const int mode = polling_mode.load(std::memory_order_relaxed);
  if (mode != 0) return mode > 0;
  return enqueue_type(tls, type);
}

// No GIL. True when the op's Work is kept for polling (its completion then comes from `poll`).
bool keep_polled(Tls& tls, int64_t eid, int64_t t_ret, const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  if (polling_mode.load(std::memory_order_relaxed) < 0 || op.schema().returns().empty() || stack.empty() ||
      !stack.back().isCustomClass())
    return false;
  auto work = stack.back().toCustomClass<c10d::Work>();
  if (!work || !polled_type(tls, typeid(*work))) return false;
  if (polling_mode.load(std::memory_order_relaxed) > 0 && !enqueue_type(tls, typeid(*work))) {
    // polled on request on a backend whose futures are truthful: a Work without a future (gloo's P2P
    // and reduce-scatter, whose isCompleted() never turns true) goes the usual way (watch)
    const std::type_info& type = typeid(*work);
    if (has_no_future(type)) return false;
    try {
      (void)work->getFuture();
    } catch (...) {
      std::lock_guard<std::mutex> guard(no_future_mu);
      no_future_types.push_back(&type);
      any_no_future.store(true, std::memory_order_release);
      return false;
    }
  }
  std::lock_guard<std::mutex> guard(*polled_mu);
  polled_q->push_back(Polled{generation.load(), eid, t_ret, std::move(work)});
  return true;
}

// GIL held (the poller). Ask up to `batch` kept Works, oldest first; those complete become Done
// items (drained like the futures' ones). Returns how many are still kept.
int64_t poll_kept(int64_t batch) {
  std::vector<Polled> items;
  {
    std::lock_guard<std::mutex> guard(*polled_mu);
    const size_t n = std::min(polled_q->size(), static_cast<size_t>(std::max<int64_t>(batch, 0)));
    items.assign(std::make_move_iterator(polled_q->begin()), std::make_move_iterator(polled_q->begin() + n));
    polled_q->erase(polled_q->begin(), polled_q->begin() + n);
  }
  const uint64_t gen = generation.load();
  std::vector<Polled> waiting;
  {
    py::gil_scoped_release nogil;  // a CUDA event query: never with the GIL
    for (auto& p : items) {
      if (p.gen != gen) continue;
      bool done = false;
      std::exception_ptr err;
      try {
        done = p.work->isCompleted();
        if (done && !p.work->isSuccess()) err = p.work->exception();
      } catch (...) {
        done = true;
        err = std::current_exception();
      }
      if (done)
        push(Done{gen, p.eid, p.r_ns, now_ns(), err});
      else
        waiting.push_back(std::move(p));
    }
  }
  std::lock_guard<std::mutex> guard(*polled_mu);
  polled_q->insert(polled_q->end(), std::make_move_iterator(waiting.begin()), std::make_move_iterator(waiting.end()));
  return static_cast<int64_t>(polled_q->size());
}

// ---- The log file the compiled path writes, and its lock.
//
// LogWriter.lock when the fast path is loaded: a lock Python uses like threading.Lock (waiting
// without the GIL) and the C++ path only tries, holding the GIL (waiting there could deadlock).
// It also owns the current segment's file (LogWriter.counters): records are copied into a shared
// mapping of it, allocated ahead with fallocate. Measured inside a DDP step, a write(2) of one frame
// costs 7-8 us (0.4 us in a tight loop), the copy 0.2 us, and what is copied outlives the process
// alike (the page cache is the file). Allocated space that was never written reads as zeros after
// a crash (the reader's end); close and each new segment trim it. Where space cannot be allocated
// ahead or mapped, pwrite(2) at the same offsets. The file must be open for reading too (mmap).
//
// kReserve bytes past the last frame are always allocated (as logfile/writer.py's RESERVE): when
// the disk, a quota or a file size limit refuses more, `error` keeps the errno, nothing more is
// written, and the room is left for the stop record (append_reserved, LogWriter.stop).
//
// The mapping's pages are faulted in ahead, kPopulate bytes at a time (madvise
// MADV_POPULATE_WRITE): a record's copy that touches a page first otherwise takes the page fault
// itself, measured at 23 us on ext4 (12 us on tmpfs) once per 4 KiB, about 78 records: 0.3 us
// per record. Populated together, a page costs 4.7 us (ext4; 2 us on tmpfs), once per window.
constexpr int64_t kReserve = 4096;
constexpr int64_t kPopulate = 256 << 10;
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels say EINVAL, and the copies fault
#endif

struct WriterLock {
  std::mutex mu;
  bool closed = false;        // LogWriter.close() sets it under the lock: no write after it
  int fd = -1;                // the current segment's file
  int64_t written = 0;        // bytes in the current segment
  int64_t segment_bytes = 0;  // start a new one (LogWriter.next_segment) past this; 0: never
  int64_t allocated = 0;      // [0, allocated) of the file allocated (fallocate)
  int error = 0;              // errno of the first write that failed (or its allocation): no write since
  char* map = nullptr;        // [map_start, map_end) of the file, mapped
  int64_t map_start = 0, map_end = 0;
  int64_t populated = 0;      // [map_start, populated) faulted in (populate)
  int64_t copy_end = 0;       // a frame that ends by here is copied inline (emit_cached): populated, reserve kept
  bool can_populate = true;   // false: the kernel has no MADV_POPULATE_WRITE (the copies fault pages in)
  bool mappable = true;
  bool can_allocate = true;   // false: the file system cannot allocate ahead (pwrite, no room kept)
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
    mappable = can_allocate = true;
    allocated = 0;
    const int flags = f >= 0 ? fcntl(f, F_GETFL) : -1;
    if (flags >= 0 && (flags & O_APPEND)) fcntl(f, F_SETFL, flags & ~O_APPEND);  // writes go at `written`
  }
  void unmap() {
    if (map) munmap(map, static_cast<size_t>(map_end - map_start));
    map = nullptr;
    map_start = map_end = populated = copy_end = 0;
  }
  // The pages up to `upto`, and the rest of a kPopulate window past it, faulted in writable now.
  // A failure is not an error: the copies then fault the pages in one at a time.
  void populate(int64_t upto) {
    if (upto > populated && can_populate) {
      const int64_t page = sysconf(_SC_PAGESIZE);
      const int64_t to = std::min(map_end, (std::max(upto, populated + kPopulate) + page - 1) / page * page);
      if (madvise(map + (populated - map_start), static_cast<size_t>(to - populated), MADV_POPULATE_WRITE) != 0 &&
          (errno == EINVAL || errno == ENOSYS))
        can_populate = false;
      populated = to;
    }
    copy_end = can_populate ? std::min(populated, map_end - kReserve) : map_end - kReserve;
  }
  bool segment_full() const { return segment_bytes && written >= segment_bytes; }  // next_segment's turn
  int64_t chunk() const {  // space allocated at a time: 1 MiB, less for small segments
    int64_t c = 1 << 20;
    if (segment_bytes > 0) c = std::max<int64_t>(64 << 10, std::min<int64_t>(c, segment_bytes / 4));
    return c;
  }
  static bool cannot_allocate(int e) {  // the file system, not the disk, says no
    return e == EOPNOTSUPP || e == ENOSYS || e == EINVAL || e == EBADF || e == ENODEV || e == ESPIPE;
  }
  // [0, need) allocated: a chunk at a time while there is room, else exactly `need`; `error` set
  // when the room cannot be had, can_allocate cleared where the file system allocates nothing ahead
  void allocate(int64_t need) {
    if (need <= allocated || !can_allocate) return;
    const int64_t step = chunk();
    int failed = 0;
    for (const int64_t end : {(need + step - 1) / step * step, need}) {
      int r;
      do r = fallocate(fd, 0, allocated, end - allocated); while (r != 0 && errno == EINTR);
      if (r == 0) {
        allocated = end;
        return;
      }
      if (cannot_allocate(errno)) {
        can_allocate = mappable = false;
        return;
      }
      failed = errno;
    }
    error = failed;
  }
  // room for n more bytes (and kReserve after them): true when they can be copied into the
  // mapping; false to pwrite them, or, with `error` set, to write nothing
  bool reserve(int64_t n) {
    const int64_t need = written + n + kReserve;
    if (map && need <= map_end) {
      populate(written + n);
      return true;
    }
    if (fd < 0) return false;
    allocate(need);
    if (error) return false;  // a full disk fails here, never as SIGBUS on a later copy
    if (!mappable || allocated < need) return false;
    unmap();
    const int64_t page = sysconf(_SC_PAGESIZE);
    const int64_t start = written / page * page;
    void* p = mmap(nullptr, static_cast<size_t>(allocated - start), PROT_READ | PROT_WRITE, MAP_SHARED, fd, start);
    if (p == MAP_FAILED) {
      mappable = false;
      return false;
    }
    map = static_cast<char*>(p);
    map_start = populated = start;
    map_end = allocated;
    populate(written + n);
    return true;
  }
  bool put(const char* data, size_t n) {  // pwrite(2) at `written`
    for (size_t off = 0; off < n;) {
      const ssize_t w = ::pwrite(fd, data + off, n - off, written + static_cast<int64_t>(off));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        error = w < 0 && errno ? errno : EIO;
        return false;
      }
      off += static_cast<size_t>(w);
    }
    written += static_cast<int64_t>(n);
    return true;
  }
  bool append(const char* data, size_t n) {
    if (error) return false;
    if (reserve(static_cast<int64_t>(n))) {
      std::memcpy(map + (written - map_start), data, n);
      written += static_cast<int64_t>(n);
      return true;
    }
    return !error && put(data, n);
  }
  bool append_reserved(const char* data, size_t n) {  // the stop record, into the room kept for it
    if (map && written + static_cast<int64_t>(n) <= map_end) {
      std::memcpy(map + (written - map_start), data, n);
      written += static_cast<int64_t>(n);
      return true;
    }
    return put(data, n);
  }
  void trim() {  // before the file is closed: give back the allocated space that was not written
    unmap();
    if (fd >= 0) (void)!ftruncate(fd, written);
    allocated = std::min(allocated, written);
  }
};

// ---- Writing a C record without running Python code.
//
// Measured inside a DDP step (caches cold after the backward kernels), one write(2) costs 10-15 us
// and every touch of a Python object 1-3 us (a threading.local read that missed: 9 us), so a cached
// template (NativeHooks.hand_over) is written here with C++ state only: the writer lock
// (WriterLock, also LogWriter.lock), the event counter, the per-group label state and the in-flight
// table; Recorder.emit uses the same state through this module, so both paths number events and
// buckets alike. An API call active on the thread, a failed completion or a busy writer lock send
// the record back to Python.

struct Live;

struct Packed {  // one template of the attached recorder
  std::string head;                   // "k", "o", "g" pairs
  std::string mid;                    // "t" ... "n" pairs
  int pairs = 0;                      // pairs in head + mid
  int64_t gid = 0;
  int64_t seq = 0;                    // logfile.format.seq_key: the counter of its `j`
  bool live = false;                  // a collective whose signature goes into the group's live hash
  uint64_t sig = 0;                   // live/tables.py signature
  int op = 0;                         // index in ops
  std::string labels;                 // "u" + "l" pairs of a fixed label, or "u" alone for a bucket
  PyObject* bucket = nullptr;         // gradient bucket: the label that gets " <index>"
  bool backward = false;              // bucket numbered per backward pass
  std::vector<std::string> numbered;  // packed "l" pairs of bucket labels, by index
  // its entries in Shared's tables once it wrote a record (their nodes never move; Shared::clear
  // drops the templates with them): no hash look-up per record
  int64_t* last = nullptr;  // last_in_group[gid]
  int64_t* seq_j = nullptr;  // seqs[seq]
  Live* live_hash = nullptr;  // live[seq]
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

// Event id -> its in-flight entry. Ids are drawn in order and most complete soon after: a ring
// indexed by the id's low bits, a map for the rare id whose slot is still taken. Inserting and
// erasing cost a few stores, where a hash map allocates and frees a node per record.
struct InflightTable {
  static constexpr size_t kSlots = 1024;
  struct Slot {
    int64_t eid = -1;  // -1: free
    Inflight v{};
  };
  std::vector<Slot> ring = std::vector<Slot>(kSlots);
  std::unordered_map<int64_t, Inflight> spill;
  void put(int64_t eid, const Inflight& v) {
    Slot& s = ring[static_cast<uint64_t>(eid) & (kSlots - 1)];
    if (s.eid == eid) {
      s.v = v;
    } else if (s.eid < 0) {
      if (__builtin_expect(!spill.empty(), 0)) spill.erase(eid);
      s.eid = eid;
      s.v = v;
    } else {
      spill[eid] = v;
    }
  }
  void erase(int64_t eid) {
    Slot& s = ring[static_cast<uint64_t>(eid) & (kSlots - 1)];
    if (s.eid == eid)
      s.eid = -1;
    else if (!spill.empty())
      spill.erase(eid);
  }
  void clear() {
    for (Slot& s : ring) s.eid = -1;
    spill.clear();
  }
  template <class F>
  void each(F f) const {
    for (const Slot& s : ring)
      if (s.eid >= 0) f(s.eid, s.v);
    for (const auto& [eid, v] : spill) f(eid, v);
  }
};

constexpr size_t kRing = 64;  // live/tables.py RING
constexpr uint64_t kMult = 0x100000001B3ull;  // live/tables.py MULT
struct Live {  // live/tables.py mix: a group's rolling hash and its last signatures
  uint64_t h = 0;
  std::array<uint64_t, kRing> ring{};
};

struct Shared {  // touched with state_mu held, or with the GIL and the writer lock held (state_mu)
  PyObject* pending = nullptr;                  // the writer's queued records (list of bytes)
  PyObject* writer = nullptr;                   // the LogWriter (next_segment)
  WriterLock* lock = nullptr;                   // nullptr: the writer has another lock, no C++ writes
  py::object lock_owner;
  int64_t next_eid = 0, epoch = 0;
  std::vector<std::unique_ptr<Packed>> packed;  // by template id
  std::unordered_map<int64_t, int64_t> last_in_group;
  std::unordered_map<int64_t, Bucket> buckets;
  std::unordered_map<int64_t, int64_t> seqs;  // seq_key -> its last `j`
  InflightTable inflight;
  std::unordered_map<int64_t, Live> live;  // seq_key -> its live hash
  void clear() {
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

// A record being packed (emit_cached): the bytes go in with inline stores, where std::string's
// push_back and append are calls into libstdc++ for every byte or field.
struct Buf {
  std::vector<char> v = std::vector<char>(512);
  size_t n = 0;
  void clear() { n = 0; }
  size_t size() const { return n; }
  const char* data() const { return v.data(); }
  __attribute__((always_inline)) char* room(size_t k) {  // k more bytes at the end
    if (__builtin_expect(n + k > v.size(), 0)) grow(k);
    char* p = v.data() + n;
    n += k;
    return p;
  }
  __attribute__((noinline)) void grow(size_t k) { v.resize(2 * (n + k)); }
  __attribute__((always_inline)) void push_back(char c) { *room(1) = c; }
  __attribute__((always_inline)) void append(const char* p, size_t k) { std::memcpy(room(k), p, k); }
  __attribute__((always_inline)) Buf& operator+=(const std::string& b) {
    append(b.data(), b.size());
    return *this;
  }
};

// The fixed-size big-endian stores msgpack's ints need, one room() per value (the compiler
// merges the byte stores: a byte swap and a store).
template <int N>
__attribute__((always_inline)) inline void store_be(char* p, uint64_t x) {
  for (int i = 0; i < N; ++i) p[i] = static_cast<char>((x >> (8 * (N - 1 - i))) & 0xff);
}

// A type byte, then N bytes of the value, big-endian: one room() per value.
template <int N>
__attribute__((always_inline)) inline void pack_tagged(Buf& out, char tag, uint64_t v) {
  char* p = out.room(1 + N);
  p[0] = tag;
  store_be<N>(p + 1, v);
}

__attribute__((always_inline)) inline void pack_uint(Buf& out, uint64_t v) {  // as the template below
  if (v < 128)
    *out.room(1) = static_cast<char>(v);
  else if (v < 256)
    pack_tagged<1>(out, '\xcc', v);
  else if (v < 65536)
    pack_tagged<2>(out, '\xcd', v);
  else if (v < (uint64_t(1) << 32))
    pack_tagged<4>(out, '\xce', v);
  else
    pack_tagged<8>(out, '\xcf', v);
}

__attribute__((always_inline)) inline void pack_int(Buf& out, int64_t v) {  // as the template below
  if (v >= 0) return pack_uint(out, static_cast<uint64_t>(v));
  const uint64_t u = static_cast<uint64_t>(v);
  if (v >= -32)
    *out.room(1) = static_cast<char>(v);
  else if (v >= -128)
    pack_tagged<1>(out, '\xd0', u);
  else if (v >= -32768)
    pack_tagged<2>(out, '\xd1', u);
  else if (v >= INT32_MIN)
    pack_tagged<4>(out, '\xd2', u);
  else
    pack_tagged<8>(out, '\xd3', u);
}

__attribute__((always_inline)) inline void pack_key(Buf& out, char k1) {  // a one-letter str key
  char* p = out.room(2);
  p[0] = '\xa1';
  p[1] = k1;
}

__attribute__((always_inline)) inline void pack_key(Buf& out, char k1, char k2) {  // a two-letter one
  char* p = out.room(3);
  p[0] = '\xa2';
  p[1] = k1;
  p[2] = k2;
}

template <class Out>
void pack_uint(Out& out, uint64_t v) {  // msgpack's smallest form, as msgpack-python packs it
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

void mix_into(Live& l, int64_t j, uint64_t sig) {  // live/tables.py mix
  l.h = l.h * kMult + sig;
  l.ring[static_cast<uint64_t>(j) % kRing] = sig;
}

void mix(int64_t key, int64_t j, uint64_t sig) { mix_into(shared.live[key], j, sig); }

struct CrcTables {  // zlib's CRC-32, eight bytes at a time ("slicing-by-8")
  uint32_t t[8][256];
  CrcTables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (int k = 1; k < 8; ++k)
      for (uint32_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
  }
};
const CrcTables crc_tables;

#if defined(__x86_64__)
// CRC-32 of n bytes (n >= 16, a multiple of 16) with carry-less multiplication, 16 bytes a step:
// the folding and Barrett reduction of Intel's "Fast CRC Computation for Generic Polynomials
// Using PCLMULQDQ" with zlib's (bit-reflected) constants, as Chromium's zlib computes it.
// `c`: the running CRC register (before the final inversion); returns it.
__attribute__((target("pclmul,sse4.1"))) uint32_t crc32_fold(const uint8_t* p, size_t n, uint32_t c) {
  const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
  const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124LL);
  const __m128i poly = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);  // (mu, P)
  const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);
  __m128i x = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), _mm_cvtsi32_si128(static_cast<int>(c)));
  for (size_t i = 16; i < n; i += 16) {  // fold the 128 bits so far into the next 16 bytes
    const __m128i lo = _mm_clmulepi64_si128(x, k3k4, 0x00);
    x = _mm_clmulepi64_si128(x, k3k4, 0x11);
    x = _mm_xor_si128(_mm_xor_si128(x, lo), _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)));
  }
  __m128i y = _mm_clmulepi64_si128(x, k3k4, 0x10);  // 128 bits to 64
  x = _mm_xor_si128(_mm_srli_si128(x, 8), y);
  y = _mm_srli_si128(x, 4);
  x = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x, low32), k5, 0x00), y);
  y = _mm_clmulepi64_si128(_mm_and_si128(x, low32), poly, 0x10);  // Barrett: 64 bits to 32
  y = _mm_clmulepi64_si128(_mm_and_si128(y, low32), poly, 0x00);
  return static_cast<uint32_t>(_mm_extract_epi32(_mm_xor_si128(x, y), 1));
}

const bool have_clmul = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
}();
#endif

uint32_t crc32(const char* data, size_t n) {  // zlib's crc32 (logfile.format.frame)
  const auto& t = crc_tables.t;
  const auto* p = reinterpret_cast<const uint8_t*>(data);
  uint32_t c = 0xFFFFFFFFu;
#if defined(__x86_64__)
  if (n >= 16 && have_clmul) {
    const size_t m = n & ~size_t(15);
    c = crc32_fold(p, m, c);
    p += m;
    n -= m;
  }
#endif
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t one, two;
    std::memcpy(&one, p, 4);
    std::memcpy(&two, p + 4, 4);
    one ^= c;
    c = t[7][one & 0xff] ^ t[6][(one >> 8) & 0xff] ^ t[5][(one >> 16) & 0xff] ^ t[4][one >> 24] ^
        t[3][two & 0xff] ^ t[2][(two >> 8) & 0xff] ^ t[1][(two >> 16) & 0xff] ^ t[0][two >> 24];
  }
#endif
  for (; n > 0; --n) c = t[0][(c ^ *p++) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

// A record is packed behind kHeadRoom bytes kept free at the start of its buffer, where
// frame_in_place then writes the frame's header: no copy of the records into a second buffer.
constexpr size_t kHeadRoom = 32;  // the marker, the CRC and two uvarints: at most 25 bytes

size_t put_uvarint(char* p, uint64_t v) {  // logfile.format.uvarint at p: its length
  size_t n = 0;
  for (; v >= 0x80; v >>= 7) p[n++] = static_cast<char>((v & 0x7f) | 0x80);
  p[n++] = static_cast<char>(v);
  return n;
}

// logfile.format.frame of the records packed in `b` after kHeadRoom: their length, the count of C
// records written before them and a CRC-32 of both, in front of them. Returns where the frame
// starts in `b` (it ends at b's end).
const char* frame_in_place(Buf& b, int64_t colls_before) {
  char head[32];
  size_t h = 5;  // the marker, then room for the CRC
  h += put_uvarint(head + h, b.size() - kHeadRoom);
  h += put_uvarint(head + h, static_cast<uint64_t>(colls_before));
  char* start = b.v.data() + (kHeadRoom - h);
  std::memcpy(start, head, h);
  start[0] = '\xc1';
  const uint32_t c = crc32(start + 5, b.size() - (kHeadRoom - h) - 5);
  for (int i = 0; i < 4; ++i) start[1 + i] = static_cast<char>((c >> (8 * i)) & 0xff);
  return start;
}

template <class Out>
void pack_map(Out& out, int n) {
  if (n < 16) {
    out.push_back(static_cast<char>(0x80 | n));
  } else {
    out.push_back('\xde');
    out.push_back(static_cast<char>(n >> 8));
    out.push_back(static_cast<char>(n & 0xff));
  }
}

template <class Out>
void pack_key(Out& out, char k1, char k2 = 0) {  // one- or two-letter str key
  out.push_back(k2 ? '\xa2' : '\xa1');
  out.push_back(k1);
  if (k2) out.push_back(k2);
}

// Recorder._label's state: returns the index of a gradient bucket in its pass (-1: not a bucket).
// epoch -1: the bucket is not numbered per backward pass (join shadow passes): it goes on only
// when the group's previous event was the previous bucket.
// `last`: the group's entry in last_in_group (-1: no event yet; its node never moves).
int64_t label_state_at(int64_t* last, int64_t gid, int64_t eid, bool bucket, int64_t epoch) {
  const int64_t prev_eid = *last;
  *last = eid;
  if (!bucket) return -1;
  auto prev = shared.buckets.find(gid);
  const bool go_on = prev != shared.buckets.end() && prev->second.epoch == epoch &&
                     (epoch >= 0 || prev->second.eid == prev_eid);
  const int64_t index = go_on ? prev->second.index + 1 : 0;
  shared.buckets[gid] = Bucket{epoch, eid, index};
  return index;
}

int64_t label_state(int64_t gid, int64_t eid, bool bucket, int64_t epoch) {
  return label_state_at(&shared.last_in_group.try_emplace(gid, -1).first->second, gid, eid, bucket, epoch);
}

template <class Out>
void pack_int(Out& out, int64_t v) {  // msgpack's smallest form of a signed integer
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

template <class Out>
void pack_array(Out& out, size_t n) {
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
template <class Out>
void pack_completions(Out& out, const std::vector<Done>& dones, int64_t eid, int64_t ts_us) {
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

// The GIL held, or (`with_gil` false) state_mu. Writes the record of a cached template, or says
// why Python has to. Without the GIL it writes only records that need no Python code (nothing
// changed before it says so): not a gradient bucket's (a new index interns a label), none while
// Python has queued records, none into a full segment (the record with the GIL starts the next).
Emit emit_cached(long tid, Tls& tls, int64_t* eid_out, bool with_gil = true) {
  if (tid < 0 || static_cast<size_t>(tid) >= shared.packed.size() || !shared.packed[tid] || !shared.lock ||
      tls.in_api || errors.load() > 0)
    return Emit::python;
  Packed& t = *shared.packed[tid];
  if (!with_gil && t.bucket) return Emit::python;
  if (!shared.lock->mu.try_lock()) return Emit::python;  // Python waits for it without the GIL
  std::lock_guard<std::mutex> unlock(shared.lock->mu, std::adopt_lock);
  if (shared.lock->closed) return Emit::python;
  if (!with_gil && (PyList_GET_SIZE(shared.pending) != 0 || shared.lock->segment_full()))
    return Emit::python;  // (Python fills the list under the writer lock: read under it)
  STAGE(kWriterLock);
  const int64_t eid = shared.next_eid;
  static Buf buf;  // GIL and writer lock held: reused, no allocation per record
  buf.clear();
  buf.room(kHeadRoom);  // (the frame's header, frame_in_place)
  if (!t.last) t.last = &shared.last_in_group.try_emplace(t.gid, -1).first->second;
  const int64_t index = label_state_at(t.last, t.gid, eid, t.bucket != nullptr, t.backward ? shared.epoch : -1);
  if (index >= 0 && (static_cast<size_t>(index) >= t.numbered.size() || t.numbered[index].empty())) {
    // a new bucket index: intern "<label> <index>" (queues its S record in the writer)
    PyObject* sid = PyObject_CallFunction(label_fn, "OL", t.bucket, static_cast<long long>(index));
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
    buf.append(PyBytes_AS_STRING(b), static_cast<size_t>(PyBytes_GET_SIZE(b)));
  }
  if (queued) PyList_SetSlice(shared.pending, 0, queued, nullptr);
  const uint64_t gen = generation.load();
  std::vector<Done>& dones = take_items();
  dones.erase(std::remove_if(dones.begin(), dones.end(), [gen](const Done& d) { return d.gen != gen; }), dones.end());
  STAGE(kTaken);
  const int64_t issued = now_ns();
  const int64_t ts_us = (issued - t0_ns) / 1000;
  pack_map(buf, t.pairs + 2 + (t.labels.empty() ? 0 : 2) + (dones.empty() ? 0 : 1));
  buf += t.head;
  pack_key(buf, 't', 's');
  pack_uint(buf, ts_us);
  pack_key(buf, 'j');
  if (!t.seq_j) t.seq_j = &shared.seqs.try_emplace(t.seq, -1).first->second;  // (next_seq: -1 -> 0)
  const int64_t j = ++*t.seq_j;
  pack_uint(buf, j);
  if (t.live) {
    if (!t.live_hash) t.live_hash = &shared.live[t.seq];
    mix_into(*t.live_hash, j, t.sig);
  }
  if (!dones.empty()) pack_completions(buf, dones, eid, ts_us);
  buf += t.mid;
  buf += t.labels;
  if (index >= 0) buf += t.numbered[index];
  STAGE(kPacked);
  const char* frame = frame_in_place(buf, eid);
  STAGE(kFramed);
  const size_t framed = static_cast<size_t>(buf.data() + buf.size() - frame);
  WriterLock& out = *shared.lock;
  if (!out.error && out.map && out.written + static_cast<int64_t>(framed) <= out.copy_end) {
    std::memcpy(out.map + (out.written - out.map_start), frame, framed);  // WriterLock::append, inline
    out.written += static_cast<int64_t>(framed);
  } else if (!out.append(frame, framed)) {
    return Emit::failed;
  }
  STAGE(kCopied);
  if (with_gil && shared.lock->segment_full()) {
    PyObject* r = PyObject_CallMethod(shared.writer, "next_segment", nullptr);  // GIL and lock held
    if (!r) {
      PyErr_Clear();
      return Emit::failed;
    }
    Py_DECREF(r);
  }
  shared.inflight.put(eid, Inflight{issued, tls.thread_ident(), t.op});
  shared.next_eid = eid + 1;
  *eid_out = eid;
  return Emit::written;
}

void attach_shared(py::object w) {  // GIL held; w: the attached recorder's LogWriter
  py::object lock = w.attr("lock");
  WriterLock* writer_lock = py::isinstance<WriterLock>(lock) ? lock.cast<WriterLock*>() : nullptr;
  py::object queued = w.attr("_pending");
  // the earlier recorder's Python objects are let go after state_mu (their finalizers may run)
  py::object old_owner;
  py::object old_pending, old_writer;
  std::vector<std::unique_ptr<Packed>> old_packed;
  {
    StateGuard guard(*state_mu);
    old_pending = py::reinterpret_steal<py::object>(shared.pending);
    old_writer = py::reinterpret_steal<py::object>(shared.writer);
    shared.pending = shared.writer = nullptr;
    old_owner = std::move(shared.lock_owner);
    old_packed.swap(shared.packed);
    shared.clear();  // (what is left of it holds no Python object)
    if (writer_lock) {
      shared.lock = writer_lock;
      shared.lock_owner = std::move(lock);
    }
    shared.pending = queued.release().ptr();
    shared.writer = w.release().ptr();
  }
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
  std::unique_ptr<Packed> old;  // (freed after state_mu: it holds a Python object)
  StateGuard guard(*state_mu);
  if (shared.packed.size() <= static_cast<size_t>(tid)) shared.packed.resize(tid + 1);
  old = std::move(shared.packed[tid]);
  shared.packed[tid] = std::move(p);
}

// LogWriter's writes through the lock (writer lock held): OSError when they fail
void write_bytes(WriterLock& l, py::bytes data, bool reserved) {
  char* p = nullptr;
  Py_ssize_t n = 0;
  if (PyBytes_AsStringAndSize(data.ptr(), &p, &n) != 0) throw py::error_already_set();
  const bool ok = reserved ? l.append_reserved(p, static_cast<size_t>(n)) : l.append(p, static_cast<size_t>(n));
  if (!ok) {
    errno = l.error ? l.error : EIO;
    PyErr_SetFromErrno(PyExc_OSError);
    throw py::error_already_set();
  }
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
           [](WriterLock& l, py::bytes data) { write_bytes(l, data, false); })  // LogWriter's writes (lock held)
      .def("append_reserved", [](WriterLock& l, py::bytes data) { write_bytes(l, data, true); })
      .def_readonly("mappable", &WriterLock::mappable)  // false: mapping failed, pwrite(2) instead
      .def_readonly("error", &WriterLock::error)  // errno of the write that failed (0: none)
      .def_readonly("allocated", &WriterLock::allocated)
      .def("trim", &WriterLock::trim);
  m.def("cache", &cache_template);
  // Shared's state for Python (GIL held): under state_mu, the Python objects made after it
  m.def("next_eid", []() {  // the writer lock is held by the caller
    StateGuard guard(*state_mu);
    return shared.next_eid++;
  });
  m.def("peek_eid", []() {  // C records written so far (frames)
    StateGuard guard(*state_mu);
    return shared.next_eid;
  });
  m.def("next_seq", [](int64_t key) {
    StateGuard guard(*state_mu);
    return next_seq(key);
  });
  m.def("seqs", []() {  // [(seq_key, last j)], for a new segment's J record
    std::vector<std::pair<int64_t, int64_t>> seqs;
    {
      StateGuard guard(*state_mu);
      seqs.assign(shared.seqs.begin(), shared.seqs.end());
    }
    py::list out;
    for (const auto& [key, j] : seqs) out.append(py::make_tuple(key, j));
    return out;
  });
  m.def("label_state", [](int64_t gid, int64_t eid, bool bucket, int64_t epoch) {
    StateGuard guard(*state_mu);
    return label_state(gid, eid, bucket, epoch);
  });
  m.def("crc32", [](py::bytes data) {  // the frames' CRC-32 (zlib.crc32): tests compare the two
    char* p = nullptr;
    Py_ssize_t n = 0;
    if (PyBytes_AsStringAndSize(data.ptr(), &p, &n) != 0) throw py::error_already_set();
    return crc32(p, static_cast<size_t>(n));
  });
  m.def("mix", [](int64_t key, int64_t j, uint64_t sig) {
    StateGuard guard(*state_mu);
    mix(key, j, sig);
  });
  m.def("live", []() {  // [(seq_key, rolling hash, [signatures by position % ring])], for live/publisher.py summary
    std::vector<std::pair<int64_t, Live>> live;
    {
      StateGuard guard(*state_mu);
      live.assign(shared.live.begin(), shared.live.end());
    }
    py::list out;
    for (const auto& [key, l] : live) {
      py::list ring;
      for (uint64_t s : l.ring) ring.append(s);
      out.append(py::make_tuple(key, l.h, ring));
    }
    return out;
  });
  m.def("set_api", [](bool on) { this_thread().in_api = on; });
  m.def("set_epoch", [](int64_t e) {
    StateGuard guard(*state_mu);
    shared.epoch = e;
  });
  m.def("track", [](int64_t eid, int64_t t_ns, unsigned long ident, const std::string& opname) {
    StateGuard guard(*state_mu);
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i].name == opname) shared.inflight.put(eid, Inflight{t_ns, ident, static_cast<int>(i)});
  });
  m.def("forget", [](int64_t eid) {
    StateGuard guard(*state_mu);
    shared.inflight.erase(eid);
  });
  m.def("inflight", []() {  // [(eid, (t_ns, thread ident, op name))], for the watchdog
    std::vector<std::pair<int64_t, Inflight>> inflight;
    {
      StateGuard guard(*state_mu);
      shared.inflight.each([&inflight](int64_t eid, const Inflight& f) { inflight.emplace_back(eid, f); });
    }
    py::list out;
    for (const auto& [eid, f] : inflight) out.append(py::make_tuple(eid, py::make_tuple(f.t_ns, f.ident, ops[f.op].name)));
    return out;
  });
}


// Where a frame is: its instruction offset (a line number would mean decoding the code's line
// table from its start, per record: O(size of the user's training function)).
int position(PyFrameObject* f) {
#if PY_VERSION_HEX >= 0x030B0000
  return PyFrame_GetLasti(f);
#else
  return PyFrame_GetLineNumber(f);
#endif
}

// The user's frames of one walk, innermost first (new references, released at the end of issue()).
struct Chain {
  std::vector<PyFrameObject*> frames;
  ~Chain() {
    for (auto* f : frames) Py_DECREF(f);
  }
};
constexpr size_t kMaxChain = 48;   // callsite.MAX_CHAIN: deep recursion keeps both ends
constexpr size_t kChainOuter = 8;  // callsite.CHAIN_OUTER

// GIL held. The frames outside torch/collcheck/the standard library (the user's call chain: the
// call site first) and the labelled torch functions below the call site.
bool walk(Chain& chain, std::vector<PyObject*>& names) {
  PyFrameObject* f = PyEval_GetFrame();
  Py_XINCREF(f);
  while (f) {
    PyCodeObject* code = PyFrame_GetCode(f);
    const Verdict* verdict;  // (a node of the map: it never moves, its fields never change)
    {
      StateGuard guard(*state_mu);
      verdict = verdict_of(reinterpret_cast<PyObject*>(code));
    }
    if (!verdict) {
      PyObject* v = PyObject_CallOneArg(classify_fn, reinterpret_cast<PyObject*>(code));
      if (!v || !PyTuple_Check(v) || PyTuple_GET_SIZE(v) < 2) {
        Py_XDECREF(v);
        Py_DECREF(code);
        Py_DECREF(f);
        return false;
      }
      Verdict fresh{PyObject_IsTrue(PyTuple_GET_ITEM(v, 0)) == 1, PyTuple_GET_ITEM(v, 1),
                    PyTuple_GET_SIZE(v) > 2 ? PyTuple_GET_ITEM(v, 2) : nullptr};
      if (fresh.name == Py_None) fresh.name = nullptr;
      if (fresh.reader == Py_None) fresh.reader = nullptr;
      Py_XINCREF(fresh.name);
      Py_XINCREF(fresh.reader);
      Py_DECREF(v);
      {
        StateGuard guard(*state_mu);
        auto added = verdicts.emplace(reinterpret_cast<PyObject*>(code), fresh);
        if (added.second) Py_INCREF(code);  // pinned: its address is the key (classify may have run a walk)
        verdict = &added.first->second;
      }
    }
    Py_DECREF(code);  // kept alive by the table
    PyFrameObject* back = PyFrame_GetBack(f);
    if (verdict->user) {
      chain.frames.push_back(f);  // the reference moves into the chain
      f = back;
      continue;
    }
    if (chain.frames.empty()) {
      if (verdict->name) names.push_back(verdict->name);
      if (verdict->reader) {
        // a frameworks.Detail, one object per text kept by Python for good: its address goes into
        // the record's key, as the Python walk does (callsite.walk)
        PyObject* d = PyObject_CallOneArg(verdict->reader, reinterpret_cast<PyObject*>(f));
        if (d && d != Py_None) names.push_back(d);
        Py_XDECREF(d);  // (still alive: the Detail table holds it)
        PyErr_Clear();
      }
    }
    Py_DECREF(f);
    f = back;
  }
  auto& v = chain.frames;
  if (v.size() > kMaxChain) {
    for (size_t i = kMaxChain - kChainOuter; i < v.size() - kChainOuter; ++i) Py_DECREF(v[i]);
    v.erase(v.begin() + (kMaxChain - kChainOuter), v.end() - kChainOuter);
  }
  return true;
}

// A record's key, written into a buffer that keeps its size between calls (only `n` moves): a
// field costs a bounds check and a store, not a call of std::string::append.
struct Key {
  std::string& s;
  size_t n = 0;
  explicit Key(std::string& buf) : s(buf) {
    if (s.size() < 256) s.resize(256);
  }
  __attribute__((noinline)) void grow(size_t k) { s.resize(2 * s.size() + k); }
  void bytes(const void* p, size_t k) {
    if (n + k > s.size()) grow(k);
    std::memcpy(s.data() + n, p, k);
    n += k;
  }
  template <class T>
  __attribute__((always_inline)) void put(T v) {
    if (__builtin_expect(n + sizeof v > s.size(), 0)) grow(sizeof v);
    std::memcpy(s.data() + n, &v, sizeof v);  // (a store: sizeof v is known here)
    n += sizeof v;
  }
  const char* data() const { return s.data(); }
  uint64_t hash() {  // hash_padded of the key (the zeros it reads past the key are written here)
    if (n + 16 > s.size()) grow(16);
    std::memset(s.data() + n, 0, 16);  // (a fixed size: two stores)
    return hash_padded(s.data(), n);
  }
};

__attribute__((always_inline)) inline void put_tensor(Key& key, const at::Tensor& t) {
  key.put<int8_t>(static_cast<int8_t>(t.scalar_type()));
  const auto sizes = t.sizes();
  key.put<uint32_t>(static_cast<uint32_t>(sizes.size()));
  for (auto d : sizes) key.put<int64_t>(d);
}

struct Args {  // what the key holds of an op's arguments, and the template's details need
  int64_t rop = -1, peer = 0, tag = 0;
  int8_t is_async = -1;  // the API's async_op (True from C++ callers); -1: the op has none (P2P)
};

// The key's first part: op, group, tensors' dtypes and shapes, reduce op, root/peer, tag, async.
Args put_args(Key& key, int idx, const Op& o, const IValue* args, size_t n, const std::string& gname) {
  key.put<int32_t>(idx);
  key.put<uint32_t>(static_cast<uint32_t>(gname.size()));
  key.bytes(gname.data(), gname.size());
  if (o.tensors >= 0) {
    const IValue& v = args[o.tensors];
    if (v.isTensor()) {
      put_tensor(key, v.toTensor());
    } else {
      const auto list = v.toListRef();
      key.put<uint32_t>(static_cast<uint32_t>(list.size()) | 0x80000000u);
      for (const auto& x : list) put_tensor(key, x.toTensor());
    }
  }
  Args a;
  if (o.reduce_op >= 0) a.rop = static_cast<int64_t>(borrow<c10d::ReduceOp>(args[o.reduce_op])->op_);
  if (o.peer >= 0) a.peer = args[o.peer].toInt();
  if (o.tag >= 0) a.tag = args[o.tag].toInt();
  if (o.async_op >= 0 && static_cast<size_t>(o.async_op) < n) a.is_async = args[o.async_op].toBool();
  key.put(a.rop);
  key.put(a.peer);
  key.put(a.tag);
  key.put(a.is_async);
  return a;
}

struct Site {  // a user frame of the chain: its code object (pinned by the verdict table) and position
  PyCodeObject* code;
  int position;
};

// The key's second part: the torch functions below the call site (labels, frameworks.Detail
// objects), the call site and the chain above it (code, position), both counts, and the thread.
// In the order of a walk from the innermost frame: walk_light writes it as it goes.
__attribute__((always_inline)) inline void put_site(Key& key, PyCodeObject* code, int position) {
  key.put(reinterpret_cast<uintptr_t>(code));
  key.put(position);
}

__attribute__((always_inline)) inline void put_walk_end(Key& key, uint32_t names, uint32_t sites, unsigned long ident) {
  key.put(names);
  key.put(sites);
  key.put(static_cast<uint64_t>(ident));
}

void put_walk(Key& key, const Site* chain, size_t n, const std::vector<PyObject*>& names, unsigned long ident) {
  for (auto* s : names) key.put(reinterpret_cast<uintptr_t>(s));
  for (size_t i = 0; i < n; ++i) put_site(key, chain[i].code, chain[i].position);
  put_walk_end(key, static_cast<uint32_t>(names.size()), static_cast<uint32_t>(n), ident);
}

void sites_of(const Chain& chain, std::vector<Site>& out) {
  out.clear();
  for (auto* f : chain.frames) {
    PyCodeObject* c = PyFrame_GetCode(f);
    Py_DECREF(c);  // pinned by the verdict table
    out.push_back(Site{c, position(f)});
  }
}

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
// CPython 3.11's _PyInterpreterFrame (Include/internal/pycore_frame.h), up to the fields read here.
// PyFrame_GetBack makes a frame object for each frame it passes (the torch functions between the
// user's code and the op are new frames every call, so every call), and the interpreter frees them
// when the frames return: the walk of a cached template reads these structs instead.
struct Frame311 {
  PyObject* f_func;
  PyObject* f_globals;
  PyObject* f_builtins;
  PyObject* f_locals;
  PyCodeObject* f_code;
  PyFrameObject* frame_obj;
  Frame311* previous;
  _Py_CODEUNIT* prev_instr;
  int stacktop;
  bool is_entry;
  char owner;  // 1: FRAME_OWNED_BY_GENERATOR
};
#define COLLCHECK_LIGHT_WALK 1
std::atomic<bool> light_walk_ok{true};  // cleared for good if it ever disagrees with the public API's walk (issue)

// state_mu held. put_walk() of walk()'s result, written into `key` while walking the interpreter's
// frames of `ts`, this thread's state, without frame objects; false when the stack needs the
// public walk: a code object not classified yet, a frame whose Detail reader needs its frame
// object, more frames than a chain keeps. Without the GIL too: only this thread changes its
// frames, and it is here; the code objects are pinned by the verdicts.
__attribute__((noinline)) bool walk_light(Key& key, unsigned long ident, PyThreadState* ts) {
  uint32_t names = 0, sites = 0;
  char* out = key.s.data() + key.n;  // (the key's end and room in registers through the loop)
  char* end = key.s.data() + key.s.size();
  auto room = [&key, &out, &end](size_t k) {
    if (__builtin_expect(end - out < static_cast<ptrdiff_t>(k), 0)) {
      key.n = static_cast<size_t>(out - key.s.data());
      key.grow(k);
      out = key.s.data() + key.n;
      end = key.s.data() + key.s.size();
    }
  };
  auto* f = reinterpret_cast<Frame311*>(ts->cframe->current_frame);
  for (; f; f = f->previous) {
    PyCodeObject* code = f->f_code;
    if (f->owner != 1 && f->prev_instr < _PyCode_CODE(code) + code->_co_firsttraceable) continue;  // incomplete
    const Verdict* v = verdict_of(reinterpret_cast<PyObject*>(code));
    if (!v) return false;
    if (v->user) {  // put_site
      if (sites == kMaxChain) return false;
      room(12);
      const uintptr_t c = reinterpret_cast<uintptr_t>(code);
      const int position = static_cast<int>((f->prev_instr - _PyCode_CODE(code)) * sizeof(_Py_CODEUNIT));
      std::memcpy(out, &c, sizeof c);
      std::memcpy(out + sizeof c, &position, sizeof position);
      out += sizeof c + sizeof position;
      ++sites;
    } else if (sites == 0) {
      if (v->reader) return false;
      if (v->name) {
        room(8);
        const uintptr_t name = reinterpret_cast<uintptr_t>(v->name);
        std::memcpy(out, &name, sizeof name);
        out += sizeof name;
        ++names;
      }
    }
  }
  key.n = static_cast<size_t>(out - key.s.data());
  put_walk_end(key, names, sites, ident);
  return true;
}
#endif

// GIL held. The details of a new template for Python: (opname, group name, tensor specs, reduce
// op, root/peer, tag, splits, code, line, names, async, outer). Raises py::error_already_set.
py::object details_of(const Op& o, const IValue* args, const std::string& gname, const Args& a, const Chain& chain,
                      const std::vector<PyObject*>& names) {
  py::object specs = py::none(), splits = py::none(), code = py::none();
  if (o.tensors >= 0) {
    const IValue& v = args[o.tensors];
    if (v.isTensor()) {
      specs = py::make_tuple(spec_of(v.toTensor()));
    } else {
      const auto list = v.toListRef();
      py::tuple t(list.size());
      for (size_t i = 0; i < list.size(); ++i) t[i] = spec_of(list[i].toTensor());
      specs = t;
    }
  }
  if (o.name == "alltoall_base_") {  // [input split sizes, output split sizes]
    py::list both;
    both.append(py::cast(args[4].toIntVector()));
    both.append(py::cast(args[3].toIntVector()));
    splits = both;
  }
  int line = 0;
  if (!chain.frames.empty()) {
    PyCodeObject* user = PyFrame_GetCode(chain.frames[0]);
    code = py::reinterpret_steal<py::object>(reinterpret_cast<PyObject*>(user));
    line = PyFrame_GetLineNumber(chain.frames[0]);
  }
  py::tuple labels(names.size());
  for (size_t i = 0; i < names.size(); ++i) labels[i] = py::reinterpret_borrow<py::object>(names[i]);
  py::object outer = py::none();  // ((code, line), ...) of the callers, innermost first
  if (chain.frames.size() > 1) {
    py::tuple t(chain.frames.size() - 1);
    for (size_t i = 1; i < chain.frames.size(); ++i) {
      PyCodeObject* c = PyFrame_GetCode(chain.frames[i]);
      t[i - 1] = py::make_tuple(py::reinterpret_steal<py::object>(reinterpret_cast<PyObject*>(c)),
                                PyFrame_GetLineNumber(chain.frames[i]));
    }
    outer = t;
  }
  return py::make_tuple(o.name, gname, specs, a.rop >= 0 ? py::object(py::int_(a.rop)) : py::none(),
                        o.peer >= 0 ? py::object(py::int_(a.peer)) : py::none(), a.tag, splits, code, line,
                        names.empty() ? py::object(py::none()) : py::object(labels), static_cast<int>(a.is_async),
                        outer);
}

constexpr int64_t kPython = -3;  // (try_cached) the record goes through Python

// GIL held. Writes a cached template's record: its event id, -1 when recording failed, kPython.
int64_t try_cached(long tid, Tls& tls) {
  int64_t eid = -1;
  switch (emit_cached(tid, tls, &eid)) {
    case Emit::written:
      return eid;
    case Emit::failed:
      PyErr_Clear();
      call_fail("collcheck fast path: writing a record failed");
      return -1;
    case Emit::python:
      break;
  }
  return kPython;
}

// GIL held. The record through Python (hooks.NativeHooks.issue): its event id, -2 - eid, or -1.
int64_t issue_in_python(long tid, PyObject* details, PyObject* pg) {
  PyObject* done = take_done();
  PyObject* py_tid = PyLong_FromLong(tid);
  PyObject* frame = reinterpret_cast<PyObject*>(PyEval_GetFrame());
  PyObject* r = PyObject_CallFunctionObjArgs(issue_fn, py_tid, details, pg, done, frame ? frame : Py_None, nullptr);
  Py_XDECREF(py_tid);
  Py_XDECREF(done);
  int64_t eid = -1;
  if (r && r != Py_None) eid = PyLong_AsLongLong(r);
  Py_XDECREF(r);
  PyErr_Clear();  // issue_fast catches everything itself; never leave an error set
  return eid;
}

// GIL held. issue() for a template Python writes (its first record, an API call, a busy lock):
// the public walk (frame objects), its key (checked against the light walk's, `light_key`), the
// details of a new template, then Python (hooks.NativeHooks.issue). `tried`: emit_cached said
// Python must write this cached template's record.
int64_t issue_walked(const Op& o, const IValue* args, const std::string& gname, const Args& a,
                     const c10::intrusive_ptr<c10d::ProcessGroup>& pg, Key& key, size_t prefix,
                     const std::string& light_key, bool tried, Tls& tls) {
  Chain chain;
  std::vector<PyObject*> names;
  if (!walk(chain, names)) {
    PyErr_Clear();
    call_fail("collcheck fast path: classifying a frame failed");
    return -1;
  }
  std::vector<Site> sites;
  sites_of(chain, sites);
  key.n = prefix;
  put_walk(key, sites.data(), sites.size(), names, tls.thread_ident());
#ifdef COLLCHECK_LIGHT_WALK
  if (!light_key.empty() && (light_key.size() != key.n || std::memcmp(light_key.data(), key.data(), key.n) != 0))
    light_walk_ok.store(false);  // (never seen: a safety net)
#else
  (void)light_key;
#endif
  long tid = -1;
  PyObject* details = nullptr;
  py::object fresh, pg_obj = py::none();
  const uint64_t hash = key.hash();
  Entry found{-1, nullptr};
  if (o.cache) {
    StateGuard guard(*state_mu);
    if (const Entry* e = entries.find(key.data(), key.n, hash)) found = *e;  // (a copy: the table may grow)
  }
  if (found.details) {
    tid = found.tid;
    details = found.details;
    if (!tried) {
      const int64_t r = try_cached(tid, tls);
      if (r != kPython) return r;
    }
  } else {
    try {
      fresh = details_of(o, args, gname, a, chain, names);
      try {
        pg_obj = py::cast(pg);  // Python's view of the group, for the first record naming it
      } catch (...) {
        PyErr_Clear();
      }
    } catch (py::error_already_set& e) {
      call_fail(e.what());
      return -1;
    }
    details = fresh.ptr();
    if (o.cache) {
      StateGuard guard(*state_mu);
      if (const Entry* e = entries.find(key.data(), key.n, hash)) {  // (another thread's meanwhile)
        tid = e->tid;
      } else if (entries.size() < kMaxEntries) {
        tid = static_cast<long>(entries.size());
        Py_INCREF(details);
        entries.insert(key.data(), key.n, hash, Entry{tid, details});
      }
    }
  }
  return issue_in_python(tid, details, pg_obj.ptr());
}

#ifdef COLLCHECK_LIGHT_WALK
int64_t written_without_gil = 0;  // (state_mu held) records so far, for stats()
constexpr size_t kMemoFrames = 64;

// The same stack as the memo's: every frame's code and last instruction equal, innermost first.
// Then the walk would write the same key (a frame's verdict is its code's, its position its
// instruction's; the thread is the same), so the memo's template is the record's: no verdict,
// no code object, no key to hash and probe is read.
bool same_frames(const Tls& tls, PyThreadState* ts) {
  const auto* f = reinterpret_cast<const Frame311*>(ts->cframe->current_frame);
  const size_t n = tls.memo_frames.size();
  size_t i = 0;
  for (; f; f = f->previous, ++i)
    if (i == n || tls.memo_frames[i].first != f->f_code || tls.memo_frames[i].second != f->prev_instr) return false;
  return i == n;
}

// After a walk found template `tid`: its stack, kept as the memo (not kept where a frame is
// incomplete: its code object may not be pinned, and another could take its address).
void remember(Tls& tls, PyThreadState* ts, const Key& key, size_t prefix, long tid) {
  tls.memo_tid = -1;
  tls.memo_frames.clear();
  for (const auto* f = reinterpret_cast<const Frame311*>(ts->cframe->current_frame); f; f = f->previous) {
    const PyCodeObject* code = f->f_code;
    if (tls.memo_frames.size() == kMemoFrames ||
        (f->owner != 1 && f->prev_instr < _PyCode_CODE(code) + code->_co_firsttraceable))
      return;
    tls.memo_frames.emplace_back(code, f->prev_instr);
  }
  tls.memo_args.assign(key.data(), prefix);
  tls.memo_tid = tid;
}

// No GIL: the thread's Python code called torch, which let the GIL go. A cached template's record
// is written without taking it back (about 450 instructions less, and no wait for another
// thread's turn with it): the template found (from the memo, else by the walk) and its record
// written under state_mu. Returns the event id, -1 when writing failed, kPython when the GIL is
// needed (a template not cached yet, a frame not classified yet, a record emit_cached leaves to
// Python). With kPython, `found` is the template when one was found (a gradient bucket's, say:
// the path with the GIL writes it without walking again), and `walked` says whether the key
// holds the walk's part after put_args's.
int64_t without_gil(Key& key, PyThreadState* ts, Tls& tls, long* found, bool* walked) {
  const size_t prefix = key.n;  // (put_args's part; the walk's follows)
  const bool memo = tls.memo_tid >= 0 && tls.memo_args.size() == prefix &&
                    std::memcmp(tls.memo_args.data(), key.data(), prefix) == 0 && same_frames(tls, ts);
  STAGE(kMemo);
  StateGuard guard(*state_mu);
  STAGE(kStateLock);
  if (!enabled.load(std::memory_order_relaxed) || !issue_fn) return kPython;
  long tid = tls.memo_tid;
  if (!memo) {
    if (!walk_light(key, tls.thread_ident(), ts)) return kPython;
    *walked = true;
    const Entry* e = entries.find(key.data(), key.n, key.hash());
    if (!e) return kPython;
    tid = e->tid;
    remember(tls, ts, key, prefix, tid);
  }
  *found = tid;
  int64_t eid = -1;
  switch (emit_cached(tid, tls, &eid, false)) {
    case Emit::written:
      ++written_without_gil;
      STAGE_FAST();
      return eid;
    case Emit::failed:
      return -1;
    case Emit::python:
      break;
  }
  return kPython;
}
#endif

// Writes the record before the op is issued: itself for a cached template (the light walk, no
// Python object made), else through Python. Returns the event id, -2 - eid when Python wants to
// hear when the op returns (blocking API call), -1 when nothing was recorded.
int64_t issue(Tls& tls, int idx, const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const Op& o = ops[idx];
  const size_t n = op.schema().arguments().size();
  const IValue* args = stack.data() + (stack.size() - n);
  const std::string& gname = borrow<c10d::ProcessGroup>(args[o.pg])->getGroupName();
  struct Depth {
    int& d;
    explicit Depth(int& depth) : d(depth) { ++d; }
    ~Depth() { --d; }
  } in_issue(tls.depth);
  std::string fresh_key;
  Key key(tls.depth == 1 ? tls.key : fresh_key);
  const Args a = put_args(key, idx, o, args, n, gname);
  STAGE(kArgs);
  const size_t prefix = key.n;
#ifdef COLLCHECK_LIGHT_WALK
  const bool light = o.cache && light_walk_ok.load(std::memory_order_relaxed);
  long found = -1;       // the template without_gil found, and left to this path
  bool walked = false;   // the key holds without_gil's walk
  if (light) {
    PyThreadState* ts = PyGILState_GetThisThreadState();
    if (ts && ts != COLLCHECK_CURRENT_TSTATE()) {  // (a thread Python knows, not holding the GIL)
      const int64_t r = without_gil(key, ts, tls, &found, &walked);
      if (r >= 0) return r;
      if (r == -1) {
        Gil gil;
        call_fail("collcheck fast path: writing a record failed");
        return -1;
      }
      if (!walked) key.n = prefix;  // (kPython: with the GIL, from the walk on)
    }
  }
#endif

  KernelGil gil;
  if (!enabled.load(std::memory_order_relaxed) || !issue_fn) return -1;
  bool tried = false;  // emit_cached said Python must write it
  std::string light_key;
#ifdef COLLCHECK_LIGHT_WALK
  if (light) {
    long tid = found;
    if (tid < 0) {  // (not found without the GIL: another thread may have cached it since)
      StateGuard guard(*state_mu);
      if (!walked) walked = walk_light(key, tls.thread_ident(), PyThreadState_Get());
      if (walked)
        if (const Entry* e = entries.find(key.data(), key.n, key.hash())) tid = e->tid;
    }
    if (tid >= 0) {
      const int64_t r = try_cached(tid, tls);
      if (r != kPython) return r;
      tried = true;
    }
    if (walked) light_key.assign(key.data(), key.n);  // (a memo's key holds no walk: nothing to check)
  }
#endif
  return issue_walked(o, args, gname, a, args[o.pg].toCustomClass<c10d::ProcessGroup>(), key, prefix, light_key,
                      tried, tls);
}

// The index in ops of a c10d op the kernel runs for (-1: none), found by name once per thread and
// op in a row (c10d's schemas live as long as the process: the address names the op).
int op_of(Tls& tls, const c10::OperatorHandle& op) {
  const c10::FunctionSchema* schema = &op.schema();
  if (schema != tls.schema) {
    const auto found = op_index.find(schema->name());
    tls.index = found == op_index.end() ? -1 : found->second;
    tls.schema = schema;
  }
  return tls.index;
}

// One stateless boxed function for every op (its index found by name): with no functor object,
// unregistering the kernels while another thread runs one frees nothing it uses.
void kernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  STAGE_START();
  const auto next = ks.remove(c10::DispatchKey::BackendSelect);
  if (STAGE_PART() == kHop) {  // (the stage-clock build only)
    op.redispatchBoxed(next, stack);
    return;
  }
  Tls& tls = this_thread();
  // meta/fake tensors while torch.compile traces are not collectives
  const int index = op_of(tls, op);
  if (index < 0 || !enabled.load(std::memory_order_relaxed) || ks.has(c10::DispatchKey::Meta) ||
      ks.has(c10::DispatchKey::Python) || !Py_IsInitialized() || COLLCHECK_FINALIZING()) {
    op.redispatchBoxed(next, stack);
    return;
  }
  int64_t r = -1;
  STAGE(kEnter);
  try {
    r = issue(tls, index, op, *stack);
  } catch (const std::exception& e) {  // never break the job: stop recording, say why once
    Gil gil;
    call_fail(e.what());
    r = -1;
  }
  if (r == -1) {
    op.redispatchBoxed(next, stack);
    return;
  }
  const bool blocking_api = r < 0;
  const int64_t eid = blocking_api ? -2 - r : r;
  const Op& o = ops[index];  // async_op=False: the API waits for the Work as soon as it returns
  const size_t n = op.schema().arguments().size();
  const bool waited = o.async_op >= 0 && static_cast<size_t>(o.async_op) < n &&
                      !(*stack)[stack->size() - n + o.async_op].toBool();
  STAGE(kLeft);
  try {
    op.redispatchBoxed(next, stack);
  } catch (...) {
    report(eid, now_ns(), std::current_exception());
    throw;
  }
  STAGE(kRedispatch);
  const int64_t t_ret = now_ns();
  try {
    if (keep_polled(tls, eid, t_ret, op, *stack))
      return;  // its completion comes from poll_kept
    if (blocking_api)
      report(eid, t_ret, nullptr);
    else if (STAGE_PART() == kUnwatched)  // (the stage-clock build only)
      push(Done{generation.load(), eid, t_ret, -1, nullptr});
    else
      watch(eid, t_ret, op, *stack, waited);
  } catch (const std::exception& e) {
    Gil gil;
    call_fail(e.what());
  }
  STAGE(kWatched);
  STAGE_END();
}

// Kernels registered only while recording: paused, the dispatcher calls c10d's ops as if
// collcheck were not there (no boxing of the arguments, no call). GIL held by the caller.
void set_registered(bool on) {
  std::lock_guard<std::mutex> guard(*library_mu);
  if (on == static_cast<bool>(library)) return;
  py::gil_scoped_release nogil;  // the dispatcher's own lock: never wait for it holding the GIL
  if (!on) {
    library.reset();  // its destructor unregisters every kernel
    return;
  }
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "c10d", c10::DispatchKey::BackendSelect,
                                              __FILE__, static_cast<uint32_t>(__LINE__));
  for (const Op& o : ops) lib->impl(o.name.c_str(), torch::CppFunction::makeFromBoxedFunction<&kernel>());
  library = std::move(lib);
}

void set_ref(PyObject*& slot, PyObject* value) {
  Py_XINCREF(value);
  Py_XDECREF(slot);
  slot = value;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "collcheck's compiled recording hot path (collcheck/capture/native/fastpath.py)";
  m.def("install", [](py::object classify, std::vector<std::tuple<std::string, int, int, int, int, int, int, bool>> specs) {
    if (!ops.empty()) return;  // once per process; set_enabled registers and unregisters the kernels
    set_ref(classify_fn, classify.ptr());
    for (size_t i = 0; i < specs.size(); ++i) {
      const auto& [name, pg, tensors, reduce_op, peer, tag, async_op, cache] = specs[i];
      ops.push_back(Op{name, pg, tensors, reduce_op, peer, tag, async_op, cache});
      op_index.emplace("c10d::" + name, static_cast<int>(i));
    }
    set_registered(true);
  });
  m.def("attach", [](py::object issue, py::object returned, py::object label_sid, py::object fail, int64_t t0,
                     py::object writer) {  // a new log: new templates, event ids from 0
    set_ref(issue_fn, issue.ptr());
    set_ref(return_fn, returned.ptr());
    set_ref(label_fn, label_sid.ptr());
    set_ref(fail_fn, fail.ptr());
    t0_ns = t0;
    generation.fetch_add(1);  // completions of an earlier recorder are dropped
    attach_shared(writer);
  });
  define_emit(m);
  m.def("set_enabled", [](bool on) {
    enabled.store(on);
    set_registered(on);
  });
  m.def("registered", []() { return static_cast<bool>(library); });
  m.def("take_done", []() { return py::reinterpret_steal<py::object>(take_done()); });
  m.def("set_polling", [](int mode) { polling_mode.store(mode); });
  m.def("poll", [](int64_t batch) { return poll_kept(batch); });
  m.def("has_done", []() { return pending.load(std::memory_order_acquire) != 0; });
  m.def("after_fork_in_child", []() {  // a gloo thread may have held the lock at fork(): abandon it
    // another thread may have held the library or the dispatcher's lock at fork(): the kernels stay
    // registered (disabled) in the child for good
    library_mu = new std::mutex();
    (void)library.release();
    done_mu = new SpinLock();
    state_mu = new SpinLock();
    done_q = new std::vector<Done>();
    polled_mu = new std::mutex();
    polled_q = new std::vector<Polled>();  // (the parent's Works are not the child's: leaked, never released)
    pending.store(0);
    errors.store(0);
    enabled.store(false);
  });
  m.def("stage_clock", []() -> py::object {  // benchmarks/bench_stages.py (extension.pyi)
#ifdef COLLCHECK_STAGE_CLOCK
    std::lock_guard<std::mutex> guard(stage_mu);
    const uint64_t t0 = ticks();
    uint64_t last = t0;
    for (int i = 0; i < 1000; ++i) last = ticks();  // what one read of the clock costs (each stage has one)
    return py::make_tuple(std::vector<uint64_t>(stage_sums, stage_sums + kStages), stage_calls, callback_ticks,
                          callbacks, last, (last - t0) / 1000.0, call_ours, call_torch);
#else
    return py::none();
#endif
  });
  m.def("stage_part", [](int part) {  // benchmarks/bench_stages.py --parts (extension.pyi)
#ifdef COLLCHECK_STAGE_CLOCK
    stage_part.store(part);
    return true;
#else
    (void)part;
    return false;
#endif
  });
  m.def("stats", []() {  // templates, classified code objects, Work types without a future, records written without the GIL
    size_t templates, classified, no_future;
    int64_t nogil = 0;
    {
      StateGuard guard(*state_mu);
      templates = entries.size();
      classified = verdicts.size();
#ifdef COLLCHECK_LIGHT_WALK
      nogil = written_without_gil;
#endif
    }
    {
      std::lock_guard<std::mutex> guard(no_future_mu);
      no_future = no_future_types.size();
    }
    return py::make_tuple(templates, classified, no_future, nogil);
  });
}
