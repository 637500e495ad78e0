"""The exit statuses of every ``opsight`` command, Python's and the C++ core's alike (the
core's table is ``include/opsight/exit_codes.hpp``; a test checks that both agree):

====  ==========================================================================
0     ok
1     unusable input (a missing file, a model that cannot load) or a failed check
2     damaged input: the part before the damage was used
3     a regression or a bound not held (``compare --fail-on-regression``, bench's p99)
64    bad usage: an unknown command, option or value
75    ``opsight run``: the program exited 0 but an export dropped spans (sysexits'
      EX_TEMPFAIL: try again); ``--allow-export-drops`` keeps 0
====  ==========================================================================

``opsight run`` exits with the traced program's own status, except 64 for a bad export
target (the program is not started) and 75 as above.
"""

OK = 0
ERROR = 1
DAMAGED = 2
REGRESSION = 3
USAGE_ERROR = 64
EXPORT_INCOMPLETE = 75
