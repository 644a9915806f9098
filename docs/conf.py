"""Sphinx configuration of the documentation site: the guides (docs/*.md, MyST), the
quickstart notebook (executed at every build) and the API reference (docs/api, from the
package's docstrings), one site.

Build: ``python -m sphinx -W --keep-going -b html docs build/docs`` (or ``make docs``);
tests/test_docs.py builds it with warnings as errors.
"""

import importlib
import json
import os
import sys

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer
from sphinx.util.docutils import SphinxDirective

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
# the checkout's package (with its built extensions) before any installed copy, here and
# in the kernel that executes the notebook
sys.path.insert(0, ROOT)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
# the kernel's inline backend makes the notebook's figure an output of its cell
os.environ.pop("MPLBACKEND", None)

project = "pgoutput_codec"
author = "pgoutput_codec contributors"
copyright = "pgoutput_codec contributors"

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.autosummary"]

root_doc = "index"
exclude_patterns = ["_build", "**/.ipynb_checkpoints"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}

# a guide's link to another guide (``[types](types.md)``, ``[x](guide.md#a-heading)``)
# becomes a reference the build checks; headings get GitHub's anchors, so the links that
# work on GitHub are the links that work in the site
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence"]

# the quickstart (notebooks/, linked into docs/) runs at every build (local decoding of the shipped sample archive, no
# server, no JVM): a cell that raises is a warning with its traceback, so it fails a -W build
nb_execution_mode = "force"
nb_execution_timeout = 300
nb_execution_show_tb = True
nb_merge_streams = True
# unresolved cross-references (:func:`.rows.resolve`, ``pa.Table`` annotations) are
# left as plain text, not warnings
nitpicky = False

autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
# autosummary tables only: no stub pages written into the source tree
autosummary_generate = False

html_theme = "pydata_sphinx_theme"
html_title = "pgoutput_codec"
html_theme_options = {"navigation_depth": 2, "show_toc_level": 2}
html_show_sourcelink = False

_MISSING = object()


def _drop_type_docstring(app, what, name, obj, options, lines):
    """A constant has no docstring of its own: autodoc would show its type's (``str``,
    ``dict``, a pyarrow schema's class). Keep only a ``#:`` comment or the page's text."""
    if what not in ("data", "attribute") or isinstance(obj, type) or callable(obj):
        return
    own = " ".join(" ".join(lines).split())
    doc = getattr(type(obj), "__doc__", None)
    of_type = " ".join(doc.split()) if isinstance(doc, str) else ""
    if own and of_type and (own == of_type or of_type.startswith(own) or own.startswith(of_type)):
        lines[:] = []


def _comment_of_defining_module(app, what, name, obj, options, lines):
    """A package re-exports a constant its submodule defines with a ``#:`` comment:
    autodoc reads only the package's own source, so take the submodule's comment."""
    if what != "data" or lines:
        return
    package, _, attr = name.rpartition(".")
    for modname, module in list(sys.modules.items()):
        if not modname.startswith(package + ".") or getattr(module, attr, _MISSING) is not obj:
            continue
        try:
            docs = ModuleAnalyzer.for_module(modname).find_attr_docs()
        except PycodeError:
            continue
        if ("", attr) in docs:
            lines[:] = list(docs[("", attr)])
            return


class AutoAll(SphinxDirective):
    """``.. autoall:: package``: an entry for each name of the package's ``__all__`` that
    the page has not described above it, under the package's name (``pgoutput_codec.Begin``),
    whichever module defines it: the pages follow the public names, not the package's
    layout, and a name added to ``__all__`` gets its entry."""

    required_arguments = 1

    def run(self):
        modname = self.arguments[0]
        module = importlib.import_module(modname)
        described = self.env.get_domain("py").objects
        lines = []
        for name in module.__all__:
            full = f"{modname}.{name}"
            entry = described.get(full)
            if entry is not None and entry.docname == self.env.docname:
                continue
            obj = getattr(module, name)
            if isinstance(obj, type) and issubclass(obj, BaseException):
                lines += [f".. autoexception:: {full}", "   :members:"]
            elif isinstance(obj, type):
                lines += [f".. autoclass:: {full}", "   :members:", "   :undoc-members:"]
            elif callable(obj):
                lines += [f".. autofunction:: {full}"]
            else:
                lines += [f".. autodata:: {full}", "   :no-value:"]
            lines.append("")
        holder = nodes.Element()
        source = self.get_source_info()[0]
        self.state.nested_parse(StringList(lines, source=source), self.content_offset, holder)
        return holder.children


def _kernel_of_this_interpreter(app):
    """The notebook names its kernel ``python3``: make that this interpreter (the
    environment building the docs, with the checkout's package), ahead of any other
    ``python3`` kernel the machine has, in a kernelspec kept with the build's doctrees."""
    jupyter = os.path.join(app.doctreedir, "jupyter")
    spec = os.path.join(jupyter, "kernels", "python3")
    os.makedirs(spec, exist_ok=True)
    with open(os.path.join(spec, "kernel.json"), "w") as f:
        json.dump({"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                   "display_name": "Python 3 (the docs build's)", "language": "python"}, f)
    os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (jupyter, os.environ.get("JUPYTER_PATH")) if p)


def setup(app):
    _kernel_of_this_interpreter(app)
    app.add_directive("autoall", AutoAll)
    app.connect("autodoc-process-docstring", _drop_type_docstring)
    app.connect("autodoc-process-docstring", _comment_of_defining_module)
