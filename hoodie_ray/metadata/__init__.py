"""The metadata table (``.hoodie/metadata``): records, reader and writer.

Kept free of imports so that ``table.py`` can use the reader while the writer uses the table.
"""
