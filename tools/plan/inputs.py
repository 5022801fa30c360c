"""The command line's numbers, checked before anything is planned.

Every numeric option is read by a lenient reader that never stops the parse: a value it cannot
accept becomes a Bad carrying one message that names the option, the value and what it must be.
bad_inputs() collects them all, so one run reports every bad input at once (exit status 2),
rather than the first one argparse meets. A count must be a whole number (parameters, layers,
heads, batch sizes, GPUs); a size, bandwidth or FLOP rate must be positive; a latency or a fixed
memory may be 0.
"""

from . import units


class Bad:
    """An input that could not be accepted; message names the option, the value and why."""

    def __init__(self, message):
        self.message = message

    def __repr__(self):
        return "Bad(%r)" % self.message


def _why(error, text):
    """A UnitError's message without its leading repr of @text."""
    message, lead = str(error), "%r: " % (text,)
    return message[len(lead):] if message.startswith(lead) else message


def _whole(number):
    return float(number).is_integer()


def positive_int(option):
    """A reader of option's value: an integer of at least 1 ('8', '1e3')."""
    def read(text):
        try:
            number = float(text)
        except ValueError:
            return Bad("%s %s: not a number; give a positive integer" % (option, text))
        if not _whole(number) or number < 1:
            return Bad("%s %s: must be a positive integer" % (option, text))
        return int(number)
    read.__name__ = "positive integer"
    return read


def positive_count(option):
    """A reader of a count with an optional suffix ('70e9', '70B', '124M'), a whole number of at
    least 1."""
    def read(text):
        try:
            number = units.parse_count(text)
        except units.UnitError as e:
            return Bad("%s %s: %s" % (option, text, _why(e, text)))
        if not _whole(number) or number < 1:
            return Bad("%s %s: must be a positive whole number of parameters" % (option, text))
        return int(number)
    read.__name__ = "count"
    return read


def quantity(option, parse, minimum_exclusive=True):
    """A reader of a quantity parse() reads (bytes, bandwidth, FLOP/s, time): positive, or with
    minimum_exclusive False at least 0."""
    def read(text):
        try:
            value = parse(text)
        except units.UnitError as e:
            return Bad("%s %s: %s" % (option, text, _why(e, text)))
        if value < 0 or (minimum_exclusive and value == 0):
            return Bad("%s %s: must be %s" % (option, text, "positive" if minimum_exclusive
                                               else "at least 0"))
        return value
    read.__name__ = parse.__name__
    return read


def fraction(option):
    """A reader of a fraction in (0, 1]."""
    def read(text):
        try:
            value = float(text)
        except ValueError:
            return Bad("%s %s: not a number; give a fraction in (0, 1]" % (option, text))
        if not 0 < value <= 1:
            return Bad("%s %s: must be in (0, 1]" % (option, text))
        return value
    read.__name__ = "fraction"
    return read


def bad_inputs(args):
    """The messages of every Bad value among the parsed @args, in option order."""
    return [v.message for v in vars(args).values() if isinstance(v, Bad)]


def join_negative_values(argv, value_options):
    """@argv with '--opt -70e9' written '--opt=-70e9' for the options of @value_options, so
    that a negative value reaches its reader (and its message) instead of being taken for an
    option: argparse takes '-70e9' for one, though not '-28672'."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        if a in value_options and nxt[:1] == "-" and nxt[1:2] in tuple("0123456789."):
            out.append("%s=%s" % (a, nxt))
            i += 2
            continue
        out.append(a)
        i += 1
    return out
