"""Sessions: one recording at a time per process, started and finished in one place
(``lifecycle``), with the integrations (torch, ONNX Runtime) plugged in through one
interface. ``profile`` is ``opsight.profile``; ``startup`` activates a session from the
environment (``OPSIGHT_OUTPUT``, ``opsight run``); ``control`` lets ``opsight ctl`` switch
tracing from outside; ``state`` holds what is running."""
