"""Loaded by schemathesis in `make fuzz` (SCHEMATHESIS_HOOKS).

Hypothesis names the lambdas in a strategy's repr by parsing their source
with `ast.parse`. Deep in the stack, which nested request bodies reach,
CPython 3.11 can fail that parse with SystemError ("AST constructor
recursion depth mismatch", CPython issue gh-106905), and the case errors
before any request is sent. The name only ever appears in messages, so an
unnamed lambda stands in for it; nothing about the requests or the checks
changes.
"""

from hypothesis.internal import lambda_sources

_describe = lambda_sources._lambda_description


def _lambda_description(f, *args, **kwargs):
    try:
        return _describe(f, *args, **kwargs)
    except SystemError:
        return "lambda: <unknown>"


lambda_sources._lambda_description = _lambda_description

# The same bug, in an import: anyio (which schemathesis imports the first
# time it checks whether a body can be sent) builds its lazy-import map by
# compiling its own source. Imported first deep in that stack, the compile
# fails and the operation errors. Imported here, at the top, it never is.
import schemathesis.transport.asgi  # noqa: E402,F401
