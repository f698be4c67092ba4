"""The environment's fingerprint leaves out what only the development extras bring (make test and make lab
install them after make reports): hand-written metadata, as importlib.metadata parses it."""

from email.message import Message

from dlcluster.codeversion import development_only


def _dist(name: str, *requires: str) -> Message:
    headers = Message()
    headers["Name"] = name
    headers["Version"] = "1.0"
    for requirement in requires:
        headers["Requires-Dist"] = requirement
    return headers


INSTALLED = [
    _dist("dlcluster", "numpy==2.4.6", "dask[distributed]==2026.8.0", "nbconvert==7.17.2",
          'pytest==9.2.0; extra == "test"', 'jupyterlab==4.6.6; extra == "lab"', 'torch==2.13.0; extra == "torch"'),
    _dist("numpy"),
    _dist("dask", 'distributed; extra == "distributed"', 'bokeh; extra == "diagnostics"'),
    _dist("distributed", "tornado"),
    _dist("tornado"),
    _dist("bokeh"),
    _dist("nbconvert", "Jinja2>=3.0"),
    _dist("jinja2", "MarkupSafe"),
    _dist("MarkupSafe"),
    _dist("pytest", "pluggy<2", 'exceptiongroup; python_version < "3.11"', 'tomli; python_version < "3.0"'),
    _dist("pluggy"),
    _dist("tomli"),
    _dist("jupyterlab", "jinja2>=3.0.3", "jupyter_server", "tornado"),
    _dist("jupyter-server", "Send2Trash"),
    _dist("send2trash"),
    _dist("torch"),
    _dist("Bottleneck"),   # installed by hand: pandas uses it if present, so it must count
]


def test_only_what_the_test_and_lab_extras_alone_pull_in_is_left_out():
    assert development_only(INSTALLED) == {"pytest", "pluggy", "jupyterlab", "jupyter-server", "send2trash"}


def test_nothing_is_left_out_where_the_project_is_not_installed():
    assert development_only([h for h in INSTALLED if h["Name"] != "dlcluster"]) == set()
