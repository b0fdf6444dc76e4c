from __future__ import annotations

import os

# Keep test logs readable and the thread count fixed on the 2-core machines.
os.environ.setdefault("RETRIEVAL_LOG_FORMAT", "text")
# The suite's indexes use the int8 build without timing both builds first (seconds per fresh index);
# tests/integration/test_model_choice.py covers the measured choice.
os.environ.setdefault("RETRIEVAL_MODEL", "int8")
