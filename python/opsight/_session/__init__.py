"""Sessions: one recording at a time per process, started and finished in one place
(``lifecycle``), with the integrations (torch, ONNX Runtime) plugged in through one
interface. ``profile`` is ``opsight.profile``; ``startup`` activates a session from the
environment (``OPSIGHT_OUTPUT``, ``opsight run``); ``control`` lets ``opsight ctl`` switch
tracing from outside; ``export`` sends a finished trace where ``export=``,
``OPSIGHT_EXPORT`` or ``opsight run --export`` say; ``state`` holds what is running."""
