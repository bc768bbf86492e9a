"""Typed values and their semantics, shared by every backend: column kinds and types, coercion,
enum filters, canonical JSON, LIKE and case-insensitive matching, row aggregation.

The same rules on memory, PostgreSQL and Supabase are what make their answers agree.
"""
