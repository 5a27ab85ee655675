"""Security: the server listens on 127.0.0.1 with XSRF protection on, and docs/security.md
says how to expose it; nothing a user types is run as code; custom optimizers load only from
the plugins folder; run ids and names never lead an export out of its folder.
"""

from __future__ import annotations

import ast
import contextlib
import http.cookiejar
import io
import json
import os
import re
import subprocess
import sys
import textwrap
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core import optimizers
from core.cli import main
from core.confined import safe_path
from core.engine import Engine, RunConfig
from core.engine.client import ENGINE, EngineClient
from core.escaping import escape_markdown
from core.knobs import InvalidHyperparameters, InvalidInput
from core.store import Store, owner
from core.store.paths import FILES_VAR
from tests import app_server, docs, planted
from tests.waiting import scaled
from ui import nav

ROOT = Path(__file__).resolve().parents[2]
# The lab's own code: what a user's input can reach. (plugins/ is the user's own code.)
SOURCES = sorted(
    [ROOT / "app.py", *(path for d in ("core", "ui", "pages") for path in (ROOT / d).rglob("*.py"))]
)


def run_main(*argv: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(arg) for arg in argv])
    return code, out.getvalue(), err.getvalue()


# Where the server listens ------------------------------------------------------------------


def test_the_config_binds_to_localhost_with_xsrf_protection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`.streamlit/config.toml` sets `server.address = 127.0.0.1` and XSRF protection, and
    Streamlit's own config parser reads those values from it."""
    with (ROOT / ".streamlit" / "config.toml").open("rb") as file:
        server = tomllib.load(file)["server"]
    assert server["address"] == "127.0.0.1"
    assert server["enableXsrfProtection"] is True

    from streamlit import config

    monkeypatch.chdir(ROOT)
    try:
        config.get_config_options(force_reparse=True)
        assert config.get_option("server.address") == "127.0.0.1"
        assert config.get_option("server.enableXsrfProtection") is True
        assert config.get_where_defined("server.address").endswith("config.toml")
    finally:
        config.get_config_options(force_reparse=True)


def test_make_run_serves_on_localhost() -> None:
    """The Makefile's `run` target passes `--server.address 127.0.0.1` to Streamlit (which
    `ui.serve` starts)."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = lines.index(next(line for line in lines if line.startswith("run:")))
    recipe = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line)
    [serve] = [line for line in recipe if "-m ui.serve run app.py" in line]
    assert "--server.address 127.0.0.1" in serve
    assert "0.0.0.0" not in serve


def test_the_security_page_says_how_to_expose_the_server_deliberately() -> None:
    """The security page (docs/security.md, which the README links to) names the default
    address, XSRF, an SSH tunnel, and what `--server.address 0.0.0.0` exposes."""
    section = docs.page("security.md")
    assert section.startswith("# Security\n")
    assert "(docs/security.md)" in docs.README.read_text()
    for phrase in ("127.0.0.1", "XSRF", "ssh -L", "--server.address 0.0.0.0", "trust"):
        assert phrase in section, phrase


def test_the_security_page_says_what_a_shared_stores_users_can_do_to_each_other() -> None:
    """The security page's account of a shared store: what every peer can do, what none
    can do to another, each with the limits the code holds (issue 36)."""
    from core.data.files import MAX_BYTES, MAX_LOADED_BYTES
    from core.data.held import MAX_HELD_BYTES
    from core.store.owner import LIVENESS_SECONDS
    from core.store.paths import MAX_RUN_ID

    section = docs.page("security.md")
    shared = section.split("\n## What the users of a shared store can do to each other\n")[1]
    can, cannot = shared.split("What none of them **can** do to another")
    for power in ("read every run", "delete anyone's", "upload datasets", "by hand"):
        assert power in can, power
    for harm in (
        "Read another's files",
        "Exhaust a machine's memory",
        "Reach outside the lab's folders",
        "capture new runs",
        "Run code",
        "Dress up text",
        "Learn the store's password",
    ):
        assert harm in cannot, harm
    limits = (
        f"{MAX_BYTES // 2**20} MB",
        f"{MAX_LOADED_BYTES // 2**30} GB of arrays once loaded",
        f"at most {MAX_HELD_BYTES // 2**30} GB of datasets loaded",
        f"1 to {MAX_RUN_ID} letters",
        f"younger than {LIVENESS_SECONDS:g} s",
    )
    for limit in limits:
        assert limit in cannot, limit


@pytest.fixture(scope="module")
def default_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[subprocess.Popen, int]]:
    """`streamlit run app.py` with no address flag: where it listens is the config's."""
    folder = tmp_path_factory.mktemp("server")
    store = folder / "lab.sqlite"
    process, port = app_server.start(store, folder / "streamlit.log", address=None)
    yield process, port
    app_server.stop(process, store)


def _listening(port: int) -> list[str]:
    """The local addresses (hex, as /proc/net/tcp* writes them) listening on `port`."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as file:
            for line in file.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                address, port_hex = local.rsplit(":", 1)
                if state == "0A" and int(port_hex, 16) == port:  # 0A: LISTEN
                    found.append(address)
    return found


@pytest.mark.slow
def test_a_server_started_without_flags_listens_on_loopback_only(
    default_server: tuple[subprocess.Popen, int],
) -> None:
    """Started without `--server.address`, the server's only listening socket is on
    127.0.0.1: no wildcard (0.0.0.0, ::) and no other interface."""
    _, port = default_server
    assert _listening(port) == ["0100007F"]  # 127.0.0.1, little-endian hex


@pytest.mark.slow
def test_an_upload_without_the_xsrf_token_is_rejected(
    default_server: tuple[subprocess.Popen, int],
) -> None:
    """A PUT to the upload endpoint without the XSRF cookie and header gets 403; with the
    cookie the server handed out, the same request passes the XSRF check (and fails only
    on its made-up session, 400)."""
    _, port = default_server
    url = f"http://127.0.0.1:{port}/_stcore/upload_file/no-session/no-file"
    body = b"--x\r\nContent-Disposition: form-data; name=file; filename=a.txt\r\n\r\nhi\r\n--x--"
    headers = {"Content-Type": "multipart/form-data; boundary=x"}

    def put(opener: urllib.request.OpenerDirector, extra: dict[str, str]) -> int:
        request = urllib.request.Request(url, body, {**headers, **extra}, method="PUT")
        try:
            with opener.open(request, timeout=scaled(10)) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code

    assert put(urllib.request.build_opener(), {}) == 403
    cookies = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(cookies))
    with opener.open(f"http://127.0.0.1:{port}/_stcore/health", timeout=scaled(10)):
        pass
    [token] = [cookie.value for cookie in cookies if cookie.name == "_streamlit_xsrf"]
    assert put(opener, {}) == 403  # the cookie alone is not enough
    assert put(opener, {"X-Xsrftoken": token}) == 400


# Nothing a user types is run as code --------------------------------------------------------

FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__", "execfile"}
FORBIDDEN_ATTRIBUTES = {
    ("pickle", "load"),
    ("pickle", "loads"),
    ("marshal", "load"),
    ("marshal", "loads"),
    ("shelve", "open"),
    ("yaml", "load"),
    ("yaml", "unsafe_load"),
    ("yaml", "full_load"),
    ("os", "system"),
    ("os", "popen"),
    ("importlib", "import_module"),
    ("runpy", "run_path"),
    ("runpy", "run_module"),
    ("builtins", "eval"),
    ("builtins", "exec"),
}
FORBIDDEN_MODULES = {"pickle", "marshal", "shelve", "dill", "cloudpickle", "subprocess", "yaml"}
ALLOWED = {
    # The one place code is loaded from a file: the plugin loader, on the plugins folder's
    # files.
    ("core/optimizers/plugin_folder.py", "exec_module"),
    # A module Python's own finders found for an `import` statement, run as that import
    # would have run it, then a callback (a post-import hook: no text of anyone's).
    ("core/after_import.py", "exec_module"),
    # Names imported on first use, from modules named in a fixed table of the same file.
    ("core/optimizers/__init__.py", "importlib.import_module"),
    # A built-in optimizer's class, where the catalog's own table says (a plugin's is
    # never looked up so: it is registered by its file).
    ("core/optimizers/optimizer_catalog.py", "importlib.import_module"),
    # A module imported on first use, by a name written in the code (`tensorflow`).
    ("core/lazy.py", "importlib.import_module"),
    # The dashboard launches the engine process: a fixed argument list, no shell.
    ("core/engine/server.py", "subprocess"),
    # A plugin file is tried in a child process first (the same file the loader imports).
    ("core/optimizers/probe.py", "subprocess"),
    # `optlab present` starts the dashboard: a fixed argument list, no shell, the key in
    # its environment.
    ("core/cli/presenting.py", "subprocess"),
    # Ends a child process the lab started (SIGTERM, then SIGKILL): it starts none.
    ("core/processes.py", "subprocess"),
    # The playground's worker (`python -m core.playground.worker`): a fixed argument list,
    # no shell, talking over a socket pair that only it and the page server hold.
    ("core/playground/worker.py", "subprocess"),
}
# Rendering user-typed text (run names) as HTML would let it run as script.
HTML_CALLS = {"html"}  # st.html, components.html
HTML_KEYWORDS = {"unsafe_allow_html"}


def violations(source: str, where: str) -> list[str]:
    """Every construct of `source` that could run text as code (or render it as HTML)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        line = f"{where}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [alias.name for alias in node.names]
            for name in names:
                if name.split(".")[0] in FORBIDDEN_MODULES and (where, name) not in ALLOWED:
                    found.append(f"{line}: imports {name}")
        if isinstance(node, ast.keyword):
            value = node.value
            if node.arg == "shell" and not (
                isinstance(value, ast.Constant) and value.value is False
            ):
                found.append(f"{line}: shell=")
            if node.arg in HTML_KEYWORDS:
                found.append(f"{line}: {node.arg}=")
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in FORBIDDEN_CALLS:
            found.append(f"{line}: {func.id}(")
        if isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else None
            forbidden = (owner, func.attr) in FORBIDDEN_ATTRIBUTES
            allowed = (where, f"{owner}.{func.attr}") in ALLOWED
            if (forbidden and not allowed) or func.attr in HTML_CALLS:
                found.append(f"{line}: {owner}.{func.attr}(")
            if func.attr == "exec_module" and (where, "exec_module") not in ALLOWED:
                found.append(f"{line}: .exec_module(")
    return found


def test_the_scanner_finds_each_way_to_run_text() -> None:
    """The scan below is not vacuous: each forbidden construct is reported, and the safe
    look-alikes (`re.compile`, `model.compile`, `shell=False`) are not."""
    bad = textwrap.dedent(
        """
        import pickle, subprocess
        from yaml import load
        eval(text); exec(text); compile(text, "f", "exec"); __import__(text)
        pickle.loads(data); os.system(text); importlib.import_module(text)
        subprocess.run(text, shell=True); spec.loader.exec_module(module)
        st.markdown(text, unsafe_allow_html=True); st.html(text)
        """
    )
    found = " ".join(violations(bad, "bad.py"))
    for construct in (
        "imports pickle",
        "imports subprocess",
        "imports yaml",
        "eval(",
        "exec(",
        "compile(",
        "__import__(",
        "pickle.loads(",
        "os.system(",
        "importlib.import_module(",
        "shell=",
        ".exec_module(",
        "unsafe_allow_html=",
        "st.html(",
    ):
        assert construct in found, construct
    safe = "re.compile(p)\nmodel.compile(optimizer=o)\nrun(x, shell=False)\nst.markdown(t)"
    assert violations(safe, "safe.py") == []


def test_the_lab_never_runs_text_as_code() -> None:
    """No `eval`, `exec`, `compile`, `__import__`, pickle, YAML loading, subprocess, shell,
    `import_module` or HTML rendering anywhere in core/, ui/, pages/ and app.py, but for
    the few `ALLOWED` uses: the plugin loader's `exec_module` (the one loading of code),
    the optimizers' lazy names, and the launch of the engine process."""
    assert len(SOURCES) > 30
    found = []
    for path in SOURCES:
        found += violations(path.read_text(), path.relative_to(ROOT).as_posix())
    assert found == []
    loader = (ROOT / "core/optimizers/plugin_folder.py").read_text()
    assert loader.count("exec_module(") == 1


# Custom optimizers come only from the plugins folder --------------------------------------


@pytest.fixture
def outside_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """A plugin file outside the plugins folder (an empty `OPTLAB_PLUGINS` folder) that
    would leave a marker file if it were ever imported; (its path, the marker)."""
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    monkeypatch.setenv("OPTLAB_PLUGINS", str(plugins))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    marker = tmp_path / "imported.txt"
    plugin = outside / "evil.py"
    plugin.write_text(
        textwrap.dedent(
            f"""
            from pathlib import Path
            Path({str(marker)!r}).write_text("imported")
            from core.optimizers import GlobalVectorOptimizer, register

            @register("evil", summary="s", update_rule="u")
            class Evil(GlobalVectorOptimizer):
                def update(self, x, g):
                    return x
            """
        )
    )
    yield plugin, marker
    assert "optlab_plugins.evil" not in sys.modules


def test_a_plugin_outside_the_plugins_folder_is_never_imported(
    tmp_path: Path, outside_plugin: tuple[Path, Path]
) -> None:
    """Naming a file outside the plugins folder as the optimizer — its path, its name, a
    relative path, a module path — through a config, the engine, the registry or the CLI
    is refused naming `optimizer`, and the file is never imported."""
    plugin, marker = outside_plugin
    names = [
        str(plugin),
        "evil",
        "evil.py",
        "../elsewhere/evil.py",
        "elsewhere.evil",
        plugin.as_uri(),
    ]
    assert optimizers.plugins_folder() == tmp_path / "plugins"
    assert str(plugin) not in optimizers.load_plugins()
    engine = Engine(tmp_path / "lab.sqlite")
    try:
        for name in names:
            for attempt in (
                lambda name=name: RunConfig.from_dict({"optimizer": name}),
                lambda name=name: engine.start({"optimizer": name}),
                lambda name=name: optimizers.get_spec(name),
                lambda name=name: optimizers.build(name),
            ):
                with pytest.raises(InvalidHyperparameters) as caught:
                    attempt()
                assert set(caught.value.errors) == {"optimizer"}
            config = tmp_path / "run.json"
            config.write_text(json.dumps({"optimizer": name}))
            for flags in (["--optimizer", name], ["--config", config]):
                code, _, err = run_main("train", "--store", tmp_path / "cli.sqlite", *flags)
                assert code == 2 and err.startswith("error: optimizer: "), err
        assert engine.list() == []
    finally:
        engine.close()
    assert not marker.exists()
    assert "evil" not in {spec.name for spec in optimizers.specs()}


def test_plugins_load_only_from_the_top_of_the_plugins_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`OPTLAB_PLUGINS` (else `plugins/` in the project) is the plugins folder; of it, only
    the `*.py` files at its top not starting with `_` are imported: not sub-folders, not
    other extensions."""
    monkeypatch.delenv("OPTLAB_PLUGINS", raising=False)
    assert optimizers.plugins_folder() == ROOT / "plugins"
    folder = tmp_path / "plugins"
    (folder / "nested").mkdir(parents=True)
    marks = tmp_path / "marks"
    marks.mkdir()
    files = {
        "loaded.py": folder / "loaded_plugin.py",
        "nested": folder / "nested" / "deep.py",
        "private": folder / "_private.py",
        "text": folder / "notes.txt",
        "pyc": folder / "cached.pyc",
    }
    for mark, path in files.items():
        path.write_text(f"from pathlib import Path\nPath({str(marks / mark)!r}).touch()\n")
    monkeypatch.setenv("OPTLAB_PLUGINS", str(folder))
    assert optimizers.plugins_folder() == folder
    optimizers.load_plugins()
    assert sorted(p.name for p in marks.iterdir()) == ["loaded.py"]
    sys.modules.pop("optlab_plugins.loaded_plugin", None)


# Run ids and names never lead an export out of its folder ---------------------------------


@settings(max_examples=200, deadline=None)
@given(
    name=st.one_of(
        st.text(max_size=30),
        st.lists(st.sampled_from(["..", ".", "a", "", "/", "~", "\\", "\x00", "b.c"])).map(
            "/".join
        ),
    )
)
def test_safe_path_never_leads_outside_its_folder(
    tmp_path_factory: pytest.TempPathFactory, name: str
) -> None:
    """For any name, `safe_path(base, name)` is a path strictly inside `base`, or a
    `ValueError` naming the field."""
    base = tmp_path_factory.getbasetemp() / "exports"
    try:
        target = safe_path(base, name, field="run_id")
    except ValueError as exc:
        assert str(exc).startswith("run_id: ")
        return
    root = base.resolve()
    assert target.is_relative_to(root) and target != root
    assert ".." not in target.relative_to(root).parts


def _run_with_metrics(store_path: Path, run_id: str, name: str) -> None:
    """A completed run of 3 steps; its id is written by hand, as the store refuses a
    hostile one (see `test_a_planted_run_id_is_listed_but_never_followed`)."""
    with Store(store_path) as store:
        planted.run(store.location, run_id, name=name, status="running")
        with store.metrics_writer(run_id) as writer:
            for step in range(1, 4):
                writer.append(step, {"loss": 1.0 / step, "wall_time": time.time()})
        store.finish(run_id, "completed", {"steps": 3})


def _tree(folder: Path) -> set[str]:
    """Every path under `folder` but the store's own files."""
    return {
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if not p.name.startswith("lab.sqlite")
    }


def test_a_hostile_run_name_exports_inside_the_folder(tmp_path: Path) -> None:
    """A run named `../../etc/passwd` exports to DIR/RUN_ID: its name is never a path."""
    store = tmp_path / "lab.sqlite"
    _run_with_metrics(store, "0101-abcdef", "../../etc/passwd")
    before = _tree(tmp_path)
    code, _, err = run_main(
        "export", "0101-abcdef", "--store", store, "--tensorboard", tmp_path / "tb"
    )
    assert code == 0, err
    added = _tree(tmp_path) - before
    assert {path.split("/")[0] for path in added} == {"tb"}
    assert {path.split("/")[1] for path in added if "/" in path} == {"0101-abcdef"}
    assert not any("passwd" in path or "etc" in path.split("/") for path in added)


@pytest.mark.parametrize("run_id", ["../../escape", "/tmp/escape", "a/../../escape", "tb/.."])
def test_a_hostile_run_id_is_refused_before_anything_is_written(
    tmp_path: Path, run_id: str
) -> None:
    """A store whose run id would lead out of the export folder (a store may come from
    elsewhere) exits 2 naming `run_id`, before the CSV or any event file is written."""
    store = tmp_path / "lab.sqlite"
    _run_with_metrics(store, run_id, "hostile")
    before = _tree(tmp_path)
    code, out, err = run_main(
        "export",
        run_id,
        "--store",
        store,
        "--csv",
        tmp_path / "run.csv",
        "--tensorboard",
        tmp_path / "tb",
    )
    assert (code, out) == (2, "")
    assert err.startswith("error: run_id: ") and err.count("\n") == 1, err
    assert _tree(tmp_path) - before <= {"tb"}  # at most the (empty) export folder
    assert not Path("/tmp/escape").exists()


def test_a_plugin_summary_from_the_store_is_shown_as_text(lab: EngineClient) -> None:
    """The plugins the Optimizers page lists come from the engine's service row, which
    anyone who can write the store can write (and have trusted while it beats): a
    plugin's name and summary reach the page as text, every Markdown mark escaped (a
    link, an image, emphasis, a colour, HTML, maths)."""
    from tests.apptest import page

    hostile = "**bold** [a link](https://example.com) ![x](x.png) :red[red] <b>b</b> $x$"
    described = {
        **optimizers.get_spec("sgd").describe(),
        "name": "sneaky_sgd",
        "summary": hostile,
        "source": "plugins/sneaky.py",
    }
    now = time.time()
    info = {"plugins": [described], "ready": True}
    planted.service(
        lab.store.location, "other-host:1:1", ENGINE, started=now + 60, heartbeat=now, info=info
    )
    at = page(nav.OPTIMIZERS).run()
    assert not at.exception
    [label] = [expander.label for expander in at.expander if "sneaky" in expander.label]
    name, _, summary = label.partition(": ")
    assert (name, summary.replace("\\", "")) == (r"**sneaky\_sgd**", hostile)
    assert re.search(r"(?<!\\)[][*()!:<>$]", summary) is None, summary


def test_a_plugins_texts_from_the_store_are_shown_as_text_on_train(lab: EngineClient) -> None:
    """The Train page describes the optimizer and the model it offers (update rule, knob
    help, description, plugin file) from what the engine's row published: as text, every
    Markdown mark escaped."""
    from tests.apptest import page

    hostile = "**bold** [a link](https://example.com) ![x](x.png) :red[red] `code` <b>b</b> $x$"
    sgd = optimizers.get_spec("sgd").describe()
    knobs = [{**knob, "help": hostile} for knob in sgd["knobs"]]
    described = {**sgd, "name": "sneaky_sgd", "update_rule": hostile, "knobs": knobs}
    model = {"name": "sneaky_mlp", "description": hostile, "images": False, "source": "x*y.py"}
    now = time.time()
    info = {"plugins": [described], "plugin_models": [model], "ready": True}
    planted.service(
        lab.store.location, "other-host:1:1", ENGINE, started=now + 60, heartbeat=now, info=info
    )
    at = page(nav.TRAIN).run()
    at.selectbox(key="run:optimizer").select("sneaky_sgd").run()
    at.selectbox(key="run:model").select("sneaky_mlp").run()
    assert not at.exception
    # A caption's last line: the optimizer's update rule, or the model's description.
    shown = [c.value.split("  \n")[-1] for c in at.caption if "bold" in c.value]
    shown += [w.help for w in at.text_input if w.key.startswith("knob:sneaky_sgd:")]
    assert len(shown) >= 3, shown  # the rule, the model's description, knobs' help
    for text in shown:
        assert hostile in text.replace("\\", ""), text
        typed = re.split(r" Valid:| \*\(plugin: ", text)[0]  # then what the lab adds
        assert re.search(r"(?<!\\)[][*()!:<>$`]", typed) is None, text
    assert any(r"x\*y\.py" in text for text in shown)  # the plugin's file name, escaped too


def test_a_planted_runs_id_and_knobs_show_as_typed_on_live(lab: EngineClient) -> None:
    """A row written by hand may hold any id (it is listed, see below) and any knob
    value: Live's status line shows them as typed."""
    from tests.apptest import page

    hostile = "x`![i](http://127.0.0.1:9/i.png)`"
    config = {"optimizer": "sgd", "hyperparameters": {"learning_rate": hostile}}
    planted.run(lab.store.location, hostile, status="stopped", config=config)
    at = page(nav.LIVE)
    at.session_state["watch"] = [hostile]
    at.run()
    assert not at.exception
    [status] = [m.value for m in at.markdown if "planted" in m.value]
    assert hostile not in status and status.count(escape_markdown(hostile)) == 2, status


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def nested_store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, Path]:
    """A new store on each backend whose checkpoints folder lies two folders below
    `tmp_path / "lab"`, which it returns too: where `../..` from there leads, inside
    `tmp_path` whatever happens."""
    lab = tmp_path / "lab"
    if request.param == "sqlite":
        return str(lab / "store" / "lab.sqlite"), lab
    monkeypatch.setenv(FILES_VAR, str(lab / "files"))
    return request.getfixturevalue("postgres").create_schema(), lab


@pytest.mark.parametrize("run_id", ["../..", "a/../../x"])
def test_a_planted_run_id_is_listed_but_never_followed(
    nested_store: tuple[str, Path], run_id: str
) -> None:
    """A run id that the store refuses (`create_run`), written into it by hand: the run
    is listed (the CLI, Home's table and its checkpoints column), and deleting it,
    resuming, forking, exporting its model or computing its landscape are refused naming
    `run_id`, from the client and from the CLI, before anything is deleted: the folder
    its id leads to (before, `delete` removed it, the store with it) is untouched."""
    location, lab = nested_store
    with Store(location) as store:
        with pytest.raises(InvalidInput, match=r"^run_id: "):
            store.create_run(run_id, "hostile", {})
        saved = store.checkpoint_folder("a")  # run a's, so that the paths resolve
        saved.mkdir(parents=True)
        target = Path(os.path.normpath(saved.parent / run_id))
        assert target.is_relative_to(lab)
        target.mkdir(parents=True, exist_ok=True)
        (target / "sentinel").write_text("kept")
        planted.run(location, run_id, status="stopped")
        store.register_service(owner.current(), ENGINE, {})  # a fork is asked of an engine
        client = EngineClient(store)
        [listed] = client.list()
        assert (listed.id, client.checkpoints(run_id), client.disk_bytes(run_id)) == (run_id, [], 0)
        refused_actions: list[Callable[[str], object]] = [
            client.delete,
            client.resume,
            lambda run: client.fork(run, 1),
            client.model_file,
            lambda run: client.landscape(run, 1),
            lambda run: client.ask_landscape(run, 1),
        ]
        for action in refused_actions:
            with pytest.raises(InvalidInput) as refused:
                action(run_id)
            assert list(refused.value.errors) == ["run_id"] and repr(run_id) in str(refused.value)
    code, out, err = run_main("delete", run_id, "--store", location)
    assert (code, out) == (2, "") and err.startswith("error: run_id: ") and repr(run_id) in err
    code, out, err = run_main("runs", "--json", "--store", location)
    assert code == 0, err
    assert [(run["id"], run["checkpoints"]) for run in json.loads(out)] == [(run_id, [])]
    assert (target / "sentinel").read_text() == "kept"
