"""Operations around the agent: `doctor` (privileges and indexes) and the bundled sample data."""
