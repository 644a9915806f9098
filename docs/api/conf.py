"""Sphinx configuration of the API reference (built from the package's docstrings).

Build: ``python -m sphinx -W -b html docs/api build/docs`` (or ``make docs``);
tests/test_docs.py builds it with warnings as errors.
"""

import os
import sys

from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# the checkout's package (with its built extensions) before any installed copy
sys.path.insert(0, ROOT)

project = "pgoutput_codec"
author = "pgoutput_codec contributors"
copyright = "pgoutput_codec contributors"

extensions = ["sphinx.ext.autodoc", "sphinx.ext.autosummary"]

root_doc = "index"
exclude_patterns = ["_build"]
# unresolved cross-references (:func:`.rows.resolve`, ``pa.Table`` annotations) are
# left as plain text, not warnings
nitpicky = False

autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
# autosummary tables only: no stub pages written into the source tree
autosummary_generate = False

html_theme = "pydata_sphinx_theme"
html_title = "pgoutput_codec API reference"
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


def setup(app):
    app.connect("autodoc-process-docstring", _drop_type_docstring)
    app.connect("autodoc-process-docstring", _comment_of_defining_module)
