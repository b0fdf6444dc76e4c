"""Servicers: validate, identify the caller, convert protobuf <-> domain, map errors to status codes."""
