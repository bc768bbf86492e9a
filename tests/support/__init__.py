"""Test helpers shared by several test packages (an in-process PostgREST emulator, fake keys)."""
