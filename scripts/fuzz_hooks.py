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
