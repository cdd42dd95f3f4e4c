"""The steps of a DBDatabase (docs/databases.md), on the instance steps' contract."""
