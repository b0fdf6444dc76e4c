from __future__ import annotations

import os

# Keep test logs readable and the thread count fixed on the 2-core machines.
os.environ.setdefault("RETRIEVAL_LOG_FORMAT", "text")
