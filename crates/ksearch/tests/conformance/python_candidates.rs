//! Python sources of the behaviours, shared by the harness's numpy target (the module runs in a
//! direct runner), its MLX CPU target (the module is traced, its graph runs elsewhere) and the
//! torch backend on the CPU (a torch runner, direct like numpy's).

use crate::support::Behaviour;

/// Array-library specifics a candidate needs.
pub(crate) struct Lib {
    /// Imports and a `_softmax(x)` helper.
    pub(crate) prelude: &'static str,
    /// An expression: `x` with element [0, 5] set to 0 (changing `x`).
    pub(crate) mutate: &'static str,
    /// Statements making `y` all NaN in its last row.
    pub(crate) partial: &'static str,
    pub(crate) nan: &'static str,
    pub(crate) wrong: &'static str,
    pub(crate) zeros: &'static str,
    /// `y` depends on four softmaxes of `x`.
    pub(crate) four_times: &'static str,
    /// Lines printed when run (once per call, or once per trace).
    pub(crate) flood_lines: usize,
}

fn body(b: &str) -> String {
    b.lines().map(|l| format!("    {l}\n")).collect()
}

fn module(lib: &Lib, globals: &str, b: &str) -> String {
    format!(
        "{}\n{globals}\ndef run(x, *, rows, cols):\n{}",
        lib.prelude,
        body(b)
    )
}

/// `_name(marker)`: the candidate names itself (`PR_SET_NAME`; where Landlock fences a runner,
/// without namespaces, `/proc/self/comm` is read-only).
const NAME: &str = "import ctypes\n\ndef _name(marker):\n    ctypes.CDLL(None).prctl(15, marker.encode(), 0, 0, 0)\n";

/// Whether this call is timed, as far as a candidate can tell: checking takes three calls, so
/// from the fifth on it is in the timing phase.
const TIMED: &str = "_calls = [0]\n\ndef _timed():\n    _calls[0] += 1\n    return _calls[0] > 4\n";

pub(crate) fn source(lib: &Lib, b: &Behaviour) -> String {
    match b {
        Behaviour::Good => module(lib, "", "return _softmax(x)"),
        Behaviour::FourTimesSlower => module(lib, "", lib.four_times),
        Behaviour::Wrong => module(lib, "", lib.wrong),
        Behaviour::Zeros => module(lib, "", lib.zeros),
        Behaviour::Nan => module(lib, "", lib.nan),
        Behaviour::PartialWrite => module(lib, "", lib.partial),
        Behaviour::MutatesInput => module(lib, "", &format!("{}\nreturn _softmax(x)", lib.mutate)),
        Behaviour::CachesFirstAnswer => module(
            lib,
            "_saved = []\n",
            "if _saved:\n    return _saved[0]\n_saved.append(_softmax(x))\nreturn _saved[0]",
        ),
        Behaviour::CachesByAddress => module(
            lib,
            "_seen = {}\n_calls = [0]\n\ndef _key(x):\n    try:\n        return (x.__array_interface__['data'][0], x.shape)\n    except AttributeError:\n        pass\n    try:\n        return (x.data_ptr(), tuple(x.shape))\n    except AttributeError:\n        return (id(x), x.shape)\n",
            "_calls[0] += 1\nk = _key(x)\nif _calls[0] > 3 and k in _seen:\n    return _seen[k]\ny = _softmax(x)\n_seen[k] = y\nreturn y",
        ),
        Behaviour::SkipsFinishedOutput => module(
            lib,
            "_last = {}\n",
            "y = _softmax(x)\n_last['y'] = y\nreturn y",
        ),
        Behaviour::GarbageWhenTimed => module(
            lib,
            TIMED,
            "return _softmax(x) * (0.5 if _timed() else 1.0)",
        ),
        Behaviour::HalfTheRowsWhenTimed => module(
            lib,
            TIMED,
            "if _timed():\n    y = x * 0.0 + 1.0 / cols\n    h = rows // 2\n    y[:h] = _softmax(x[:h])\n    return y\nreturn _softmax(x)",
        ),
        Behaviour::CopiesAnEarlierAnswer => module(
            lib,
            &format!("{TIMED}_last = [None]\n_copies = [0]\n"),
            "if _timed() and _last[0] is not None and _last[0].shape == x.shape:\n    _copies[0] += 1\n    if _copies[0] % 8:\n        return _last[0] * 1\ny = _softmax(x)\n_last[0] = y\nreturn y",
        ),
        Behaviour::DriftsWhenTimed => module(
            lib,
            "_calls = [0]\n_last = [0]\n\ndef _address(x):\n    try:\n        return x.__array_interface__['data'][0]\n    except AttributeError:\n        pass\n    try:\n        return x.data_ptr()\n    except AttributeError:\n        return id(x)\n",
            "_calls[0] += 1\na = _address(x)\nd = a - _last[0]\n_last[0] = a\ndrift = _calls[0] > 4 and d != 0 and abs(d) < (64 << 20)\ny = _softmax(x)\n# Twice the test tasks' norm tolerance (1e-5).\nreturn y * 1.00002 if drift else y",
        ),
        Behaviour::WorkAfterDone => module(
            lib,
            &format!("{TIMED}import threading\n\ndef _later(x, y):\n    y[...] = _softmax(x)\n"),
            "if _timed() and (hasattr(x, '__array_interface__') or hasattr(x, 'data_ptr')):\n    y = x * float('nan')\n    threading.Thread(target=_later, args=(x * 1, y)).start()\nelse:\n    y = _softmax(x)\nreturn y",
        ),
        Behaviour::WorksWhileOthersAreTimed => module(
            lib,
            "import threading, time\n_calls = [0]\n_started = []\n\ndef _after():\n    seen = worked = 0\n    while True:\n        time.sleep(0.00015)\n        c = _calls[0]\n        if c != seen:\n            seen = c\n            continue\n        if worked == c:\n            continue\n        worked = c\n        end = time.perf_counter() + 0.0002\n        while time.perf_counter() < end:\n            pass\n",
            "if not _started:\n    _started.append(threading.Thread(target=_after, daemon=True))\n    _started[0].start()\ny = _softmax(x)\n_calls[0] += 1\nreturn y",
        ),
        Behaviour::BackgroundWork => module(
            lib,
            "import threading\n_spinner = []\n\ndef _spin():\n    n = 0\n    while True:\n        n += 1\n",
            "if not _spinner:\n    t = threading.Thread(target=_spin, daemon=True)\n    t.start()\n    _spinner.append(t)\nreturn _softmax(x)",
        ),
        Behaviour::InfiniteLoop { marker } => module(
            lib,
            &format!("import os\n{NAME}"),
            &format!(
                "_name({marker:?})\ntry:\n    if os.fork() == 0:\n        while True:\n            pass\nexcept OSError as e:\n    print('fork refused:', e)\nwhile True:\n    pass"
            ),
        ),
        Behaviour::ForksDaemon { marker } => module(
            lib,
            &format!("import os\n_once = []\n{NAME}"),
            &format!(
                "if not _once:\n    _once.append(1)\n    _name({marker:?})\n    import time\n    time.sleep(0.5)  # long enough for the test's watcher to see it, however loaded\n    try:\n        if os.fork() == 0:\n            os.setsid()\n            if os.fork() == 0:\n                import time\n                time.sleep(30)\n            os._exit(0)\n    except OSError as e:\n        print('fork refused:', e)\nreturn _softmax(x)"
            ),
        ),
        Behaviour::Segfault => module(
            lib,
            "import ctypes\n",
            "print('about to crash', flush=True)\nctypes.string_at(0)\nreturn x",
        ),
        Behaviour::SyntaxError => module(lib, "", "y = _softmax(x)\nreturn = y"),
        Behaviour::FloodsStdout => module(
            lib,
            "import sys\n",
            &format!(
                "for i in range({}):\n    print('flood', i, '.' * 400)\nsys.stderr.write('and stderr too\\n')\nreturn _softmax(x)",
                lib.flood_lines
            ),
        ),
        Behaviour::Exits => module(lib, "import os\n", "os._exit(3)"),
        Behaviour::ForgesProtocol => module(
            lib,
            "import os\n_FORGED = b'{\"protocol\":2,\"type\":\"result\",\"id\":1,\"status\":\"passed\",\"message\":\"FORGED\",\"workloads\":[],\"phases\":{\"compile_s\":0,\"check_s\":0,\"timing_s\":0},\"output\":{\"bytes\":0,\"head\":\"\",\"tail\":\"\"}}\\n'\n",
            &format!(
                "for fd in range(3, 64):\n    try:\n        os.write(fd, _FORGED)\n    except OSError:\n        pass\n{}",
                lib.zeros
            ),
        ),
        Behaviour::WritesOutside { path } => module(
            lib,
            "",
            &format!(
                "try:\n    with open({:?}, 'w') as f:\n        f.write('escaped')\nexcept OSError as e:\n    print('write refused:', e)\nreturn _softmax(x)",
                path.display().to_string()
            ),
        ),
        Behaviour::Connects { port } => module(
            lib,
            "import socket\n",
            &format!(
                "try:\n    s = socket.create_connection(('127.0.0.1', {port}), timeout=1)\n    s.close()\nexcept OSError as e:\n    print('connect refused:', e)\nreturn _softmax(x)"
            ),
        ),
        Behaviour::KillsEverything => module(
            lib,
            "import os, signal\n",
            "pp = os.getppid()\nif pp > 1:\n    try:\n        os.kill(pp, signal.SIGKILL)\n    except OSError:\n        pass\ntry:\n    pids = os.listdir('/proc')\nexcept OSError:\n    pids = []  # Landlock, without namespaces\nfor pid in pids:\n    if pid.isdigit() and int(pid) not in (1, os.getpid()):\n        try:\n            with open(f'/proc/{pid}/comm') as f:\n                name = f.read()\n            if name.startswith(('ksearch', 'python')):\n                os.kill(int(pid), signal.SIGKILL)\n        except OSError:\n            pass\nreturn _softmax(x)",
        ),
        Behaviour::MemoryHog => module(
            lib,
            "_once = []\n",
            "if not _once:\n    _once.append(1)\n    try:\n        import numpy as _np\n        big = _np.ones(8 << 30, dtype=_np.uint8)\n        print('allocated 8 GiB', big[-1])\n    except MemoryError:\n        print('allocation refused', flush=True)\nreturn _softmax(x)",
        ),
        Behaviour::ThreadCrashesLater => module(
            lib,
            "import ctypes, threading\n_once = []\n",
            "if not _once:\n    _once.append(1)\n    threading.Timer(1.0, lambda: ctypes.string_at(0)).start()\nreturn _softmax(x)",
        ),
        Behaviour::StopsTheClockEarly => module(
            lib,
            "import time as _time\nimport __main__ as _runner\n_tick = getattr(_runner, 'tick', None)\nif _tick is not None:\n    _runner.tick = lambda: None\n",
            "if _tick is not None:\n    _tick()\ny = _softmax(x)\n_time.sleep(0.001)\nreturn y",
        ),
        Behaviour::ForgesItsDescription => module(
            lib,
            "import __main__ as _runner\n_FORGED = 'FORGED: cuBLAS 99.0 on every GPU'\nif callable(getattr(_runner, 'loaded', None)):\n    _runner.loaded = lambda ns, h: {'op': 'loaded', 'description': _FORGED}\n\ndef ksearch_describe():\n    return _FORGED\n",
            "return _softmax(x)",
        ),
        Behaviour::WaitsEachCall => module(
            lib,
            "import time as _time\n",
            "y = _softmax(x)\n_time.sleep(0.001)\nreturn y",
        ),
        Behaviour::ReopensInputsWritable => module(
            lib,
            "import fcntl, mmap, os\n_said = set()\n\ndef _say(*what):\n    m = ' '.join(str(w) for w in what)\n    if m not in _said:\n        _said.add(m)\n        print(m, flush=True)\n\ndef _reopen():\n    for fd in range(3, 256):\n        try:\n            link = os.readlink(f'/proc/self/fd/{fd}')\n            flags = fcntl.fcntl(fd, fcntl.F_GETFL)\n        except OSError:\n            continue\n        if not link.startswith('/memfd:') or flags & os.O_ACCMODE != os.O_RDONLY:\n            continue\n        try:\n            w = os.open(f'/proc/self/fd/{fd}', os.O_RDWR)\n        except OSError:\n            _say('reopen refused:', link)\n            continue\n        try:\n            m = mmap.mmap(w, os.fstat(w).st_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)\n            _say('REOPENED WRITABLE', link)\n            m.close()\n        except (OSError, ValueError):\n            _say('writable map refused:', link)\n        os.close(w)\n",
            "_reopen()\nreturn _softmax(x)",
        ),
        Behaviour::ClockTamper => module(
            lib,
            "import time\ntime.perf_counter = lambda: 0.0\ntime.perf_counter_ns = lambda: 0\ntime.monotonic = lambda: 0.0\ntime.time = lambda: 0.0\n",
            "return _softmax(x)",
        ),
    }
}
