"""Quantities of the command line (bytes, bandwidths, FLOP/s, latencies, counts) and of the output.

Decimal prefixes are powers of ten (GB = 1e9 bytes, as the ZeRO and Megatron-LM papers count),
binary ones powers of two (GiB = 2**30). A bandwidth unit with a lowercase b or "bit" counts bits:
200Gbit, 200Gb/s and 200Gbps are all 25e9 bytes per second.
"""

import re

DECIMAL = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}
BINARY = {"ki": 2.0 ** 10, "mi": 2.0 ** 20, "gi": 2.0 ** 30, "ti": 2.0 ** 40, "pi": 2.0 ** 50}
COUNT_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
TIME_UNIT = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "\u00b5s": 1e-6, "ns": 1e-9}

_QUANTITY = re.compile(r"\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([^\s0-9].*?)?\s*")
_PREFIXED = re.compile(r"([kKmMgGtTpP]i?)?(.*)")


class UnitError(ValueError):
    """A quantity that cannot be read; the message says what was expected."""


def split_quantity(text, expected="a number with an optional unit"):
    """(number, unit text) of '600GB/s', '2e-6 s', '80'."""
    m = _QUANTITY.fullmatch(str(text))
    if not m:
        raise UnitError("%r: expected %s" % (text, expected))
    return float(m.group(1)), (m.group(2) or "")


def prefix_factor(prefix):
    prefix = (prefix or "").lower()
    return BINARY[prefix] if prefix.endswith("i") else DECIMAL[prefix]


def parse_bytes(text, default_unit="GB"):
    """Bytes of '80GB', '80GiB', '512MiB', '80' (GB by default), '2G'."""
    number, unit = split_quantity(text, "a size such as 80GB, 80GiB or 512MiB")
    unit = unit or default_unit
    prefix, rest = _PREFIXED.fullmatch(unit).groups()
    if rest.lower() not in ("", "b", "byte", "bytes") or rest in ("b",):
        raise UnitError("%r: expected a size such as 80GB, 80GiB or 512MiB" % text)
    return number * prefix_factor(prefix)


def parse_bandwidth(text):
    """Bytes per second of '600GB/s', '600 GB/s', '200Gbit', '200Gb/s', '25GBps', '600' (GB/s)."""
    number, unit = split_quantity(text, "a bandwidth such as 600GB/s or 200Gbit/s")
    if not unit:
        return number * 1e9
    prefix, rest = _PREFIXED.fullmatch(unit).groups()
    for tail in ("/s", "ps"):
        if rest.endswith(tail) and len(rest) > len(tail):
            rest = rest[: -len(tail)]
            break
    if rest in ("B", "byte", "bytes", "Byte", "Bytes"):
        scale = 1.0
    elif rest in ("b", "bit", "bits", "Bit", "Bits"):
        scale = 1.0 / 8.0
    else:
        raise UnitError("%r: expected a bandwidth such as 600GB/s or 200Gbit/s" % text)
    return number * prefix_factor(prefix) * scale


def parse_flops(text):
    """FLOP/s of '312T', '312TFLOPS', '19.5 TFLOP/s', '312e12'."""
    number, unit = split_quantity(text, "FLOP/s such as 312T, 312TFLOPS or 312e12")
    prefix, rest = _PREFIXED.fullmatch(unit).groups()
    if rest.lower() not in ("", "flops", "flop/s", "flop"):
        raise UnitError("%r: expected FLOP/s such as 312T, 312TFLOPS or 312e12" % text)
    value = number * prefix_factor(prefix)
    if 0 < value < 1e6:
        raise UnitError("%r FLOP/s is implausibly small: give a prefix, e.g. 312T" % text)
    return value


def parse_time(text):
    """Seconds of '5us', '0.02ms', '2e-6s'; a bare number is accepted only when it is 0."""
    number, unit = split_quantity(text, "a time such as 5us or 0.1ms")
    if not unit:
        if number == 0:
            return 0.0
        raise UnitError("%r: give a unit (s, ms, us, ns), e.g. 5us" % text)
    if unit not in TIME_UNIT:
        raise UnitError("%r: expected a time such as 5us or 0.1ms" % text)
    return number * TIME_UNIT[unit]


def parse_count(text):
    """A count such as a number of parameters: '70e9', '70B', '1.5B', '124M', '7000000000', as
    a float (the caller checks that it is whole: inputs.positive_count)."""
    number, unit = split_quantity(text, "a count such as 70e9, 70B or 124M")
    unit = unit.lower()
    if unit not in COUNT_SUFFIX:
        raise UnitError("%r: expected a count such as 70e9, 70B or 124M" % text)
    return number * COUNT_SUFFIX[unit]


def fmt_bytes(n):
    """'39.4 GB', '512.0 MB', '12.0 KB', '100 B' (decimal units, like the inputs' default)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            return "%.1f %s" % (n / scale, unit)
    return "%d B" % round(n)


def fmt_time(s):
    """'61.2 s', '35.0 ms', '12.0 us', '0 s'."""
    if s == 0:
        return "0 s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(s) >= scale:
            return "%.*f %s" % (1 if abs(s) < 1000 * scale else 0, s / scale, unit)
    return "%.0f ns" % (s * 1e9)


def fmt_bandwidth(bps):
    """'600 GB/s', '25 GB/s'."""
    return "%g GB/s" % float("%.4g" % (bps / 1e9))


def fmt_count(n):
    """'70.0B', '124.4M', '1.9M', '512'."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return "%.1f%s" % (n / scale, unit)
    return "%d" % n


def fmt_flops(f):
    """'312 TFLOP/s', '50 GFLOP/s'."""
    for unit, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if f >= scale:
            return "%g %sFLOP/s" % (float("%.4g" % (f / scale)), unit)
    return "%g FLOP/s" % f
