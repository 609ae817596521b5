"""The Streamlit layer: the only package that imports streamlit. Pages call into it."""
