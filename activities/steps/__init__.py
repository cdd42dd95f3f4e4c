"""The convergence steps, one module each (``observe``, ``decide``, ``act``, tied as
``STEP``), and the loop every step runs in (``loop``). A step imports no other step:
what two steps share lives in ``activities.infra``."""
