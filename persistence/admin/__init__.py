"""What the admin commands need: building the search side tables, the Supabase ranking function.

Run by a database owner (`rag-agent index`, `rag-agent search-function`), never by the read-only
facade. It may use the PostgreSQL backend's SQL helpers; no backend imports it.
"""
