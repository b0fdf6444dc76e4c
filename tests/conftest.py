from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# Keep test logs readable and the thread count fixed on the 2-core machines.
os.environ.setdefault("RETRIEVAL_LOG_FORMAT", "text")
# The suite's indexes use the int8 build without timing both builds first (seconds per fresh index);
# tests/integration/test_model_choice.py covers the measured choice.
os.environ.setdefault("RETRIEVAL_MODEL", "int8")

# Property tests check values, never speed: on a busy machine an example may take longer than
# hypothesis's 200 ms deadline, and generating one longer than its too_slow health check allows.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")
