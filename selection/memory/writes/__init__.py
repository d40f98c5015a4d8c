"""Memory writes: one service per write (services.py, admission.py), used by every surface."""
