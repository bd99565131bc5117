"""Helpers shared by figures and tables: labels, provenance captions, LaTeX/Markdown writers."""
