"""Capture: how Python code becomes spans. Wrapping functions (``wrapping``), spans and
their metrics (``span``, ``metrics``), installing a targets file into a running program
(``instrument``, with the post-import ``import_hook``) and running a main script with its
targets wrapped as they are defined (``script``). Everything here writes to the native
recorder; nothing reads a trace back."""
