// Part of fastpath.cpp (one translation unit): completion of the recorded collectives.
//
// The Python kernels attach a Python done-callback to the Work's future, which then needs the
// GIL in a gloo thread. Here the callback is C++: it pushes (eid, returned, completed, error)
// onto a queue, drained into D records by the next record (fastpath_emit.h) or by Python
// (Recorder.drain_completions, also from the watchdog thread). A blocking API call completes
// when its wrapper returns: its return, and any op that raised, go to Recorder.fast_return.

struct Done {
  uint64_t gen;
  int64_t eid, r_ns, c_ns;  // c_ns < 0: completion not observable (gloo P2P work has no future)
  std::exception_ptr err;
};

std::atomic<uint64_t> generation{0};  // one per attached recorder: older completions are dropped
std::atomic<int64_t> pending{0};
std::atomic<int64_t> errors{0};  // failed completions queued: their text needs Python
// Touched by gloo threads: heap objects so that a forked child can abandon a locked mutex.
std::mutex* done_mu = new std::mutex();
std::vector<Done>* done_q = new std::vector<Done>();

void forget_inflight(int64_t eid);  // fastpath_emit.h

void push(Done&& d) noexcept {
  try {
    std::lock_guard<std::mutex> guard(*done_mu);
    if (d.err) errors.fetch_add(1);
    done_q->push_back(std::move(d));
    pending.fetch_add(1, std::memory_order_release);
  } catch (...) {
  }
}

std::vector<Done> take_items() {
  std::vector<Done> items;
  if (pending.load(std::memory_order_acquire) == 0) return items;
  std::lock_guard<std::mutex> guard(*done_mu);
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
  const std::vector<Done> items = take_items();
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

bool has_no_future(const std::type_info& type) {
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
  const auto work = stack.back().toCustomClass<c10d::Work>();
  const std::type_info& type = typeid(*work);
  c10::intrusive_ptr<c10::ivalue::Future> fut;
  if (!has_no_future(type)) {
    try {
      fut = work->getFuture();
    } catch (...) {
      std::lock_guard<std::mutex> guard(no_future_mu);
      no_future_types.push_back(&type);
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
  fut->addCallback([gen, eid, t_ret](c10::ivalue::Future& f) {
    push(Done{gen, eid, t_ret, now_ns(), f.hasError() ? f.exception_ptr() : nullptr});
  });
}
