"""The price table: what an hour of each hardware label costs, from a YAML file the user
edits (``examples/remote/prices.yaml`` is an example with its sources), and the cost of a
million requests at a measured time per request.

The file::

    currency: USD                   # optional, USD by default
    hardware:
      r6i.large:
        per_hour: 0.126             # the price of one node of that kind for an hour
        source: "AWS EC2 on-demand, us-east-1, Linux (aws.amazon.com/ec2/pricing/on-demand)"
      g4dn.xlarge: 0.526            # a bare number is the price per hour

Errors name the file, the label and the field at fault."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from .specs import RemoteError


@dataclass
class PriceTable:
    """Price per hour by hardware label, the currency, and where each price came from."""
    per_hour: dict[str, float] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    currency: str = "USD"
    path: str | None = None

    def price(self, hardware: str) -> float | None:
        return self.per_hour.get(hardware)

    def to_dict(self) -> dict[str, Any]:
        return {"currency": self.currency, "path": self.path, "per_hour": dict(self.per_hour),
                "sources": dict(self.sources)}


def cost_per_million(price_per_hour: float | None, seconds_per_request: float | None) -> float | None:
    """The price of a million requests that take ``seconds_per_request`` of the hardware
    each (one request at a time: the hardware is paid for by the hour while it serves)."""
    if price_per_hour is None or seconds_per_request is None:
        return None
    return seconds_per_request * 1e6 * price_per_hour / 3600.0


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0:
        raise RemoteError(f"{where}: the price per hour must be a number >= 0, got {value!r}")
    return float(value)


def load_prices(path: str | os.PathLike) -> PriceTable:
    """Reads a price table; raises :class:`RemoteError` naming the file and field at fault."""
    import yaml

    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as file:
            document = yaml.safe_load(file)
    except OSError as error:
        raise RemoteError(f"{name}: cannot read the price table: {error.strerror or error}") \
            from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{name}:{mark.line + 1}" if mark is not None else name
        raise RemoteError(f"{where}: not YAML: {getattr(error, 'problem', None) or error}") \
            from None
    if not isinstance(document, dict) or not isinstance(document.get("hardware"), dict):
        raise RemoteError(f"{name}: expected a mapping with a 'hardware' mapping of "
                          "LABEL: {per_hour: NUMBER, source: TEXT}")
    unknown = sorted(set(document) - {"currency", "hardware"})
    if unknown:
        raise RemoteError(f"{name}: unknown field {unknown[0]!r} (expected currency, hardware)")
    currency = document.get("currency", "USD")
    if not isinstance(currency, str) or not currency:
        raise RemoteError(f"{name}: currency must be a text like USD, got {currency!r}")
    table = PriceTable(currency=currency, path=os.path.abspath(name))
    for label, entry in document["hardware"].items():
        where = f"{name}: hardware {label!r}"
        if isinstance(entry, dict):
            extra = sorted(set(entry) - {"per_hour", "source"})
            if extra:
                raise RemoteError(f"{where}: unknown field {extra[0]!r} (expected per_hour, "
                                  "source)")
            if "per_hour" not in entry:
                raise RemoteError(f"{where}: per_hour is missing")
            table.per_hour[str(label)] = _number(entry["per_hour"], f"{where}: per_hour")
            if entry.get("source") is not None:
                table.sources[str(label)] = str(entry["source"])
        else:
            table.per_hour[str(label)] = _number(entry, where)
    return table


def as_price_table(prices: Any) -> PriceTable:
    """``None``, a path, a :class:`PriceTable` or a mapping label -> price per hour."""
    if prices is None:
        return PriceTable()
    if isinstance(prices, PriceTable):
        return prices
    if isinstance(prices, (str, os.PathLike)):
        return load_prices(prices)
    if isinstance(prices, dict):
        table = PriceTable()
        for label, value in prices.items():
            table.per_hour[str(label)] = _number(value, f"the price of {label!r}")
        return table
    raise RemoteError(f"prices: expected a YAML file's path or a mapping label -> price per "
                      f"hour, got {type(prices).__name__}")
