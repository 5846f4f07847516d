"""JSON ads (`condor_status -json`): a list of objects, each decoded on its own; HTCondor's
`"\\/Expr(...)\\/"` strings are expressions (`reader`'s docstring)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

import classad2

from gridfair.ad_views import AdWarning
from gridfair.classads.ad_text import check_decodable, excerpt, repeat_warning
from gridfair.classads.bounds import check_json_ad, operators_problem
from gridfair.classads.framing import Framed, json_objects
from gridfair.errors import InputError

_JSON_EXPRESSION = re.compile(r"^/Expr\((.*)\)/$", re.DOTALL)


def json_framed(pieces: Iterable[str], source: str) -> Iterator[Framed]:
    """The objects of a JSON list (or JSON lines), each decoded on its own (`json_objects`,
    keeping count of repeated keys); no line is kept (a JSON ad is named by its index). JSON
    that does not decode is an InputError."""
    for chunk in json_objects(pieces, keyed=True, closed=True):
        if chunk.corrupt:  # no ad boundary left to trust: the file is refused, lenient or not
            raise InputError(f"not valid JSON: {chunk.problem}", source=source,
                             ad=f"#{chunk.index}")
        yield chunk._replace(line=None)


def parse_json(chunk: Framed, source: str,
                warnings: list[AdWarning] | None) -> classad2.ClassAd:
    value, index = chunk.payload, chunk.index
    if not isinstance(value, dict):
        raise InputError(f"not a JSON object but {type(value).__name__}", source=source,
                         ad=f"#{index}")
    check_json_ad(value, source, index)
    ad = _json_ad(value, source, index)
    if any(type(item) is str and "\\" in item for item in value.values()):
        check_decodable(ad, chunk, source)  # an expression's string escapes
    repeated = getattr(value, "repeated", None)
    if repeated and warnings is not None:
        warnings.append(repeat_warning(source, chunk, ad,
                                        [(name, None, None) for name in repeated]))
    return ad


def _json_ad(value: dict, source: str, index: int) -> classad2.ClassAd:
    ad = classad2.ClassAd()
    for name, item in value.items():
        try:
            ad[name] = _json_value(item)
        except (ValueError, TypeError, SystemError, classad2.ClassAdException) as error:
            raise InputError(f"unusable value {excerpt(json.dumps(item))}: {error}",
                             source=source, ad=f"#{index}", attribute=name) from None
    return ad


def _json_value(item: Any) -> Any:
    if isinstance(item, str):
        expression = _JSON_EXPRESSION.match(item)
        if expression:
            problem = operators_problem(expression.group(1))
            if problem:
                raise ValueError(problem)
            return classad2.ExprTree(expression.group(1))
    elif isinstance(item, list):
        return [_json_value(element) for element in item]
    elif isinstance(item, dict):
        nested = classad2.ClassAd()
        for name, element in item.items():
            nested[name] = _json_value(element)
        return nested
    return item
