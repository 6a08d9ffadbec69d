"""The API takes JSON and multipart bodies validated by its pydantic schemas (``schemas.py``), not Django forms."""
