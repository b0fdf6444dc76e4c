"""The largest values the settings that bound a request's fields take, in a module that imports
nothing: the settings (pydantic) hold them as their bounds, and the client commands, which import
no settings, check their options against them."""

from __future__ import annotations

#: the most a server's RETRIEVAL_TOP_K_MAX allows: no Query (nor StreamQuery) takes a larger top_k
TOP_K_LIMIT = 10_000
#: the most a server's RETRIEVAL_SEARCH_TOP_K_MAX allows: no Search takes a larger top_k
SEARCH_TOP_K_LIMIT = 1_000
