// Compiled hot path of collcheck's recorder (see fastpath.py for why, how it is built and loaded).
//
// One boxed kernel at BackendSelect for every c10d op, like kernels.py's Python kernels, but:
// - the arguments never become Python objects: group name, dtypes, shapes, reduce op, root/peer and
//   tag are read in C++ (the ReduceOp ScriptObject alone costs ~20 us from Python);
// - the call site is found with the CPython frame API, each code object classified once by
//   callsite._classify; everything that fixes the record's content (op, group, tensors, reduce op,
//   peer, tag, user frame + line, torch function names on the way, thread) becomes a byte key, and
//   each distinct key a template id. The first record of a template is built by Python
//   (Recorder.issue_fast), which hands back the template packed; later ones are written here
//   (fastpath_emit.h), before the op is issued (durability rule, docs/log-format.md);
// - completion is a C++ callback on the Work's future: gloo threads never take the GIL, they push
//   (eid, times, error) onto a queue drained with the next record or by the watchdog.
#include <Python.h>
#include <frameobject.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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

struct Op {  // argument positions (-1: none), from wire.py (async_op: from the op's schema)
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
PyObject* issue_fn = nullptr;     // Recorder.issue_fast
PyObject* return_fn = nullptr;    // Recorder.fast_return
PyObject* fail_fn = nullptr;      // Recorder.fail
PyObject* classify_fn = nullptr;  // callsite._classify
int64_t t0_ns = 0;
// Touched only with the GIL held.
std::unordered_map<PyObject*, Verdict> verdicts;  // code object (pinned) -> verdict
std::unordered_map<std::string, Entry> entries;   // record key -> template id + its details
constexpr size_t kMaxEntries = 1 << 16;           // beyond: records are built uncached

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // time.monotonic_ns()
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

template <class T>
void put(std::string& key, T v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void put_tensor(std::string& key, const at::Tensor& t) {
  put<int8_t>(key, static_cast<int8_t>(t.scalar_type()));
  const auto sizes = t.sizes();
  put<uint32_t>(key, static_cast<uint32_t>(sizes.size()));
  for (auto d : sizes) put<int64_t>(key, d);
}

py::object spec_of(const at::Tensor& t) {
  py::tuple shape(t.dim());
  for (int64_t i = 0; i < t.dim(); ++i) shape[i] = py::int_(t.size(i));
  auto dtype = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(torch::getTHPDtype(t.scalar_type())));
  return py::make_tuple(dtype, shape);
}

struct Gil {
  PyGILState_STATE state = PyGILState_Ensure();
  ~Gil() { PyGILState_Release(state); }
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

#include "fastpath_done.h"
#include "fastpath_file.h"
#include "fastpath_emit.h"

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
    auto it = verdicts.find(reinterpret_cast<PyObject*>(code));
    if (it == verdicts.end()) {
      PyObject* v = PyObject_CallOneArg(classify_fn, reinterpret_cast<PyObject*>(code));
      if (!v || !PyTuple_Check(v) || PyTuple_GET_SIZE(v) < 2) {
        Py_XDECREF(v);
        Py_DECREF(code);
        Py_DECREF(f);
        return false;
      }
      Verdict verdict{PyObject_IsTrue(PyTuple_GET_ITEM(v, 0)) == 1, PyTuple_GET_ITEM(v, 1),
                      PyTuple_GET_SIZE(v) > 2 ? PyTuple_GET_ITEM(v, 2) : nullptr};
      if (verdict.name == Py_None) verdict.name = nullptr;
      if (verdict.reader == Py_None) verdict.reader = nullptr;
      Py_XINCREF(verdict.name);
      Py_XINCREF(verdict.reader);
      Py_DECREF(v);
      Py_INCREF(code);  // pinned: its address is the key
      it = verdicts.emplace(reinterpret_cast<PyObject*>(code), verdict).first;
    }
    Py_DECREF(code);  // kept alive by the table
    PyFrameObject* back = PyFrame_GetBack(f);
    if (it->second.user) {
      chain.frames.push_back(f);  // the reference moves into the chain
      f = back;
      continue;
    }
    if (chain.frames.empty()) {
      if (it->second.name) names.push_back(it->second.name);
      if (it->second.reader) {
        // a frameworks.Detail, one object per text kept by Python for good: its address goes into
        // the record's key, as the Python walk does (callsite.walk)
        PyObject* d = PyObject_CallOneArg(it->second.reader, reinterpret_cast<PyObject*>(f));
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

// Writes the record (through Python) before the op is issued. Returns the event id, -2 - eid when
// Python wants to hear when the op returns (blocking API call), -1 when nothing was recorded.
int64_t issue(int idx, const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const Op& o = ops[idx];
  const size_t n = op.schema().arguments().size();
  const IValue* args = stack.data() + (stack.size() - n);
  const auto pg = args[o.pg].toCustomClass<c10d::ProcessGroup>();
  const std::string& gname = pg->getGroupName();
  thread_local std::string buffer;  // keeps its capacity: no allocation per record
  thread_local int depth = 0;       // re-entered from a __del__ during a Python call: a fresh key
  struct Depth {
    Depth() { ++depth; }
    ~Depth() { --depth; }
  } in_issue;
  std::string fresh_key;
  std::string& key = depth == 1 ? buffer : fresh_key;
  key.clear();
  put<int32_t>(key, idx);
  put<uint32_t>(key, static_cast<uint32_t>(gname.size()));
  key += gname;
  if (o.tensors >= 0) {
    const IValue& v = args[o.tensors];
    if (v.isTensor()) {
      put_tensor(key, v.toTensor());
    } else {
      const auto list = v.toListRef();
      put<uint32_t>(key, static_cast<uint32_t>(list.size()) | 0x80000000u);
      for (const auto& x : list) put_tensor(key, x.toTensor());
    }
  }
  int64_t rop = -1;
  if (o.reduce_op >= 0) rop = static_cast<int64_t>(args[o.reduce_op].toCustomClass<c10d::ReduceOp>()->op_);
  const int64_t peer = o.peer >= 0 ? args[o.peer].toInt() : 0;
  const int64_t tag = o.tag >= 0 ? args[o.tag].toInt() : 0;
  // the API's async_op (True from C++ callers); -1: the op has none (P2P: the API name says)
  const int8_t is_async = o.async_op >= 0 && static_cast<size_t>(o.async_op) < n ? args[o.async_op].toBool() : -1;
  put(key, rop);
  put(key, peer);
  put(key, tag);
  put(key, is_async);

  Gil gil;
  if (!enabled.load(std::memory_order_relaxed) || !issue_fn) return -1;
  Chain chain;
  std::vector<PyObject*> names;
  if (!walk(chain, names)) {
    PyErr_Clear();
    call_fail("collcheck fast path: classifying a frame failed");
    return -1;
  }
  PyFrameObject* user_frame = chain.frames.empty() ? nullptr : chain.frames[0];
  PyCodeObject* user = nullptr;
  if (user_frame) {
    user = PyFrame_GetCode(user_frame);
    Py_DECREF(user);  // pinned by the verdict table
  }
  put(key, reinterpret_cast<uintptr_t>(user));
  put(key, user_frame ? position(user_frame) : 0);
  for (auto* s : names) put(key, reinterpret_cast<uintptr_t>(s));
  put<uint32_t>(key, static_cast<uint32_t>(chain.frames.size()));
  for (size_t i = 1; i < chain.frames.size(); ++i) {  // the chain: each caller's code and position
    PyCodeObject* c = PyFrame_GetCode(chain.frames[i]);
    Py_DECREF(c);  // pinned by the verdict table
    put(key, reinterpret_cast<uintptr_t>(c));
    put(key, position(chain.frames[i]));
  }
  put(key, static_cast<uint64_t>(PyThread_get_thread_ident()));

  long tid = -1;
  PyObject* details = nullptr;
  py::object fresh, pg_obj = py::none();
  auto it = o.cache ? entries.find(key) : entries.end();
  if (it != entries.end()) {
    tid = it->second.tid;
    details = it->second.details;
    int64_t eid = -1;
    switch (emit_cached(tid, &eid)) {
      case Emit::written:
        return eid;
      case Emit::failed:
        PyErr_Clear();
        call_fail("collcheck fast path: writing a record failed");
        return -1;
      case Emit::python:
        break;
    }
  } else {
    try {  // (opname, group name, tensor specs, reduce op, root/peer, tag, splits, code, line, names, async)
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
      if (user) {
        code = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(user));
        line = PyFrame_GetLineNumber(user_frame);
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
      fresh = py::make_tuple(o.name, gname, specs, rop >= 0 ? py::object(py::int_(rop)) : py::none(),
                             o.peer >= 0 ? py::object(py::int_(peer)) : py::none(), tag, splits, code, line,
                             names.empty() ? py::object(py::none()) : py::object(labels), static_cast<int>(is_async),
                             outer);
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
    if (o.cache && entries.size() < kMaxEntries) {
      tid = static_cast<long>(entries.size());
      Py_INCREF(details);
      entries.emplace(key, Entry{tid, details});
    }
  }
  PyObject* done = take_done();
  PyObject* py_tid = PyLong_FromLong(tid);
  PyObject* frame = reinterpret_cast<PyObject*>(PyEval_GetFrame());
  PyObject* r = PyObject_CallFunctionObjArgs(issue_fn, py_tid, details, pg_obj.ptr(), done, frame ? frame : Py_None,
                                             nullptr);
  Py_XDECREF(py_tid);
  Py_XDECREF(done);
  int64_t eid = -1;
  if (r && r != Py_None) eid = PyLong_AsLongLong(r);
  Py_XDECREF(r);
  PyErr_Clear();  // issue_fast catches everything itself; never leave an error set
  return eid;
}

// One stateless boxed function for every op (its index found by name): with no functor object,
// unregistering the kernels while another thread runs one frees nothing it uses.
void kernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const auto next = ks.remove(c10::DispatchKey::BackendSelect);
  // meta/fake tensors while torch.compile traces are not collectives
  const auto found = op_index.find(op.schema().name());
  if (found == op_index.end() || !enabled.load(std::memory_order_relaxed) || ks.has(c10::DispatchKey::Meta) ||
      ks.has(c10::DispatchKey::Python) || !Py_IsInitialized() || COLLCHECK_FINALIZING()) {
    op.redispatchBoxed(next, stack);
    return;
  }
  int64_t r = -1;
  try {
    r = issue(found->second, op, *stack);
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
  const Op& o = ops[found->second];  // async_op=False: the API waits for the Work as soon as it returns
  const size_t n = op.schema().arguments().size();
  const bool waited = o.async_op >= 0 && static_cast<size_t>(o.async_op) < n &&
                      !(*stack)[stack->size() - n + o.async_op].toBool();
  try {
    op.redispatchBoxed(next, stack);
  } catch (...) {
    report(eid, now_ns(), std::current_exception());
    throw;
  }
  const int64_t t_ret = now_ns();
  try {
    if (blocking_api)
      report(eid, t_ret, nullptr);
    else
      watch(eid, t_ret, op, *stack, waited);
  } catch (const std::exception& e) {
    Gil gil;
    call_fail(e.what());
  }
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
  m.def("attach", [](py::object rec) {  // a new log: new templates, event ids from 0
    set_ref(issue_fn, rec.attr("issue_fast").ptr());
    set_ref(return_fn, rec.attr("fast_return").ptr());
    set_ref(fail_fn, rec.attr("fail").ptr());
    t0_ns = rec.attr("t0").cast<int64_t>();
    generation.fetch_add(1);  // completions of an earlier recorder are dropped
    attach_shared(rec.ptr());
  });
  define_emit(m);
  m.def("set_enabled", [](bool on) {
    enabled.store(on);
    set_registered(on);
  });
  m.def("registered", []() { return static_cast<bool>(library); });
  m.def("take_done", []() { return py::reinterpret_steal<py::object>(take_done()); });
  m.def("after_fork_in_child", []() {  // a gloo thread may have held the lock at fork(): abandon it
    // another thread may have held the library or the dispatcher's lock at fork(): the kernels stay
    // registered (disabled) in the child for good
    library_mu = new std::mutex();
    (void)library.release();
    done_mu = new std::mutex();
    done_q = new std::vector<Done>();
    pending.store(0);
    errors.store(0);
    enabled.store(false);
  });
  m.def("stats", []() {  // templates, classified code objects, Work types without a future
    std::lock_guard<std::mutex> guard(no_future_mu);
    return py::make_tuple(entries.size(), verdicts.size(), no_future_types.size());
  });
}
